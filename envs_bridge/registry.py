"""Environment name -> adapter class, imported lazily from the env's spec (``envs_bridge.specs``).

Modules are imported only when that environment is asked for, so a machine (or server interpreter)
without, say, ``alfworld`` still serves ``textworld_express``. The adapter class is built as
``cls(**options)`` with the JSON options the client sent to ``/create``.
"""

from __future__ import annotations

import inspect
from typing import Any

from envs_bridge.base import EnvAdapter, EnvError
from envs_bridge.specs import UnknownEnvError, env_names, env_spec

__all__ = ["EnvUnavailableError", "adapter_class", "env_names", "make_adapter"]


class EnvUnavailableError(RuntimeError):
    """The environment is registered but cannot be imported in this interpreter."""


def adapter_class(name: str) -> type[EnvAdapter]:
    """Imports and returns the adapter class of environment ``name``."""
    try:
        spec = env_spec(name)
    except UnknownEnvError as error:
        raise EnvError(str(error)) from None
    try:
        cls = spec.adapter_class()
    except ImportError as error:
        raise EnvUnavailableError(
            f"environment {name!r} cannot be loaded in this interpreter ({error}); "
            f"install what it needs: {spec.install_hint}"
        ) from error
    if not (inspect.isclass(cls) and issubclass(cls, EnvAdapter)):
        raise TypeError(f"{spec.adapter} is not an EnvAdapter subclass")
    return cls


def make_adapter(name: str, **options: Any) -> EnvAdapter:
    """Builds one adapter instance; unknown or ill-typed options raise EnvError (a client error)."""
    cls = adapter_class(name)
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as error:
        raise EnvError(f"bad options for environment {name!r}: {error}") from error
    return cls(**options)

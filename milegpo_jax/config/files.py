"""Python files as configs: ``get_config(arg)`` of an experiment config, ``get_sweep`` of a sweep.

Both are imported by path (not as modules of a package) with ``load_file_function``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_collections

from milegpo_jax.config.checks import ConfigError


def load_file_function(path: str | os.PathLike, name: str, what: str = "file") -> Callable[..., Any]:
    """Imports the Python file at ``path`` and returns its function ``name``; ConfigError if the file
    or the function is missing."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{what} {os.fspath(path)} does not exist")
    module_spec = importlib.util.spec_from_file_location(f"_milegpo_{what.replace(' ', '_')}_{file.stem}", file)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"{os.fspath(path)} defines no {name}()")
    return function


def load_config_file(spec: str | os.PathLike) -> ml_collections.ConfigDict:
    """Imports ``path/to/config.py`` (optionally ``path.py:arg``) and returns ``get_config(arg)``."""
    spec = os.fspath(spec)
    path, arg = spec, None
    head, sep, tail = spec.rpartition(":")
    if sep and head.endswith(".py"):
        path, arg = head, tail
    get_config = load_file_function(path, "get_config", "config file")
    result = get_config(arg) if arg is not None else get_config()
    if not isinstance(result, ml_collections.ConfigDict):
        raise ConfigError(f"{path}: get_config() returned {type(result).__name__}, not an ml_collections.ConfigDict")
    return result


def empty_config() -> ml_collections.ConfigDict:
    """A ConfigDict with one empty section per ``TrainConfig`` field: the start of a config file,
    which then sets only what differs from the schema's defaults (``config.ppo.kl_coef = 0.0``)."""
    from milegpo_jax.config.schema import TrainConfig  # the schema imports more than file loading needs

    return ml_collections.ConfigDict({f.name: ml_collections.ConfigDict() for f in dataclasses.fields(TrainConfig)})

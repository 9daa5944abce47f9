"""The config's error type and the small value checks every section uses."""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping, Sequence
from typing import Any


class ConfigError(ValueError):
    """A bad training configuration: unknown key, wrong type, value out of range, missing field."""


def frozen(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(mapping or {}))


def suggestion(key: str, candidates: Sequence[str] | Mapping[str, Any], prefix: str = "") -> str:
    """``"; did you mean 'a' or 'b'?"`` for close matches of ``key``, else ``""``."""
    close = difflib.get_close_matches(key, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(prefix + c) for c in close) + "?"


def choice(path: str, value: Any, allowed: Sequence[Any]) -> None:
    if value not in allowed:
        hint = suggestion(str(value), [str(a) for a in allowed])
        raise ConfigError(f"{path}={value!r}: must be one of {', '.join(map(str, allowed))}{hint}")


def positive(path: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{path}={value}: must be > 0")


def non_negative(path: str, value: float) -> None:
    if not value >= 0:
        raise ConfigError(f"{path}={value}: must be >= 0")



def plain(value: Any) -> Any:
    """Read-only mappings and tuples as plain dicts and lists (JSON, adapter keyword arguments)."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value

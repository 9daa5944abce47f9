"""The config's error type and the small value checks every section uses."""

from __future__ import annotations

import difflib
import numbers
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


# A seed is a non-negative integer below 2**32 wherever one is read (run.seed, the commands' --seed
# and --seeds, an arena's records): the range every consumer takes alike (numpy's generators refuse
# a negative seed, its RandomState one of 2**32 or more, and a run met the first only 9 s into SFT).
# One check up front, shared by the config and the commands (this module imports no jax).
SEED_LIMIT = 2**32


def seed_problem(value: Any) -> str | None:
    """Why ``value`` is not a seed, or None; callers prefix the flag or field (``--seed -1: ...``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < SEED_LIMIT:
        return "a seed is an integer in 0..2**32-1"
    return None


def check_seed(path: str, value: Any) -> None:
    problem = seed_problem(value)
    if problem:
        raise ConfigError(f"{path}={value!r}: {problem}")


def plain(value: Any) -> Any:
    """Read-only mappings and tuples as plain dicts and lists (JSON, adapter keyword arguments)."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value

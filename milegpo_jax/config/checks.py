"""The config's error type, the small value checks every section uses, and the sections' fields
taken from the library's option types (``option_fields``, ``checked``)."""

from __future__ import annotations

import dataclasses
import numbers
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from milegpo_jax.suggest import suggestion  # the config's hints and the option types' are one rule


class ConfigError(ValueError):
    """A bad training configuration: unknown key, wrong type, value out of range, missing field."""


def frozen(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(mapping or {}))


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


def option_fields(option_type: type, *names: str, exclude: Sequence[str] = (), **defaults: Any) -> type:
    """A frozen dataclass of ``option_type``'s fields (``names``, else all but ``exclude``) with their
    types and defaults (``defaults`` replaces some): the base a section takes a library option
    type's fields from, so each is declared once, in the library (docs/training.md §1)."""
    hints = typing.get_type_hints(option_type)
    chosen = [f for f in dataclasses.fields(option_type) if (f.name in names if names else f.name not in exclude)]
    fields = [(f.name, hints[f.name], dataclasses.field(default=defaults.get(f.name, f.default))) for f in chosen]
    return dataclasses.make_dataclass(f"{option_type.__name__}Fields", fields, frozen=True)


def values_of(section: Any, option_type: type) -> dict[str, Any]:
    """The section's values of ``option_type``'s fields (those it has)."""
    names = [f.name for f in dataclasses.fields(option_type)]
    return {name: getattr(section, name) for name in names if name in {f.name for f in dataclasses.fields(section)}}


def checked(option_type: type, prefix: str, **values: Any) -> Any:
    """``option_type(**values)``: the option type's own checks, a failure as ``ConfigError`` with the
    config's path (``prefix`` + the option's message, which starts with the field's name)."""
    try:
        return option_type(**values)
    except ValueError as error:
        raise ConfigError(f"{prefix}{error}") from None

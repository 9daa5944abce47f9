"""Command-line changes to a ConfigDict: ``--config.a.b=value`` flags, parsed against the schema.

    overrides, rest = split_config_flags(sys.argv[1:])      # ["run.seed=1", ...], other flags
    raw = apply_overrides(raw, overrides)                  # text parsed as each field's type
    raw = apply_overrides(raw, {"credit.stage": None})     # or Python values (sweeps)

The result still goes through ``load_config`` for range checks.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import ml_collections

from milegpo_jax.config.builder import field_hints, unknown_key
from milegpo_jax.config.checks import ConfigError
from milegpo_jax.config.schema import TrainConfig
from milegpo_jax.config.text import format_value, is_mapping, parse_text, split_assignment, strip_optional, type_name


def _field_hint(parts: Sequence[str], config_dict: ml_collections.ConfigDict) -> Any:
    """The schema type of a dotted key, or ConfigError naming close matches."""
    cls: Any = TrainConfig
    for depth, part in enumerate(parts):
        hints = field_hints(cls)
        if part not in hints:
            raise unknown_key(".".join(parts[:depth]), part, list(hints))
        hint = hints[part]
        inner = strip_optional(hint)
        rest = parts[depth + 1 :]
        if not rest:
            return hint
        if dataclasses.is_dataclass(inner):
            cls = inner
            continue
        if is_mapping(inner):
            value_hint = typing.get_args(inner)[1]
            if value_hint is Any and len(rest) == 1:  # free-form: keep the type of a value already there
                existing = _get_path(config_dict, parts)
                if existing is not None and not isinstance(existing, ml_collections.ConfigDict):
                    return type(existing) | None
            return value_hint if len(rest) == 1 else Any
        raise ConfigError(f"config key {'.'.join(parts[: depth + 1])!r} is a {type_name(hint)}, it has no sub-keys")
    raise AssertionError("unreachable")


def _get_path(config_dict: ml_collections.ConfigDict, parts: Sequence[str]) -> Any:
    node: Any = config_dict
    for part in parts:
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            return None
        node = node[part]
    return node


def _set_path(config_dict: ml_collections.ConfigDict, parts: Sequence[str], value: Any) -> None:
    node = config_dict
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, ml_collections.ConfigDict):
            with node.unlocked(), node.ignore_type():
                node[part] = ml_collections.ConfigDict()
            child = node[part]
        node = child
    with node.unlocked():
        try:
            node[parts[-1]] = value
        except TypeError:  # ConfigDict's own type lock (e.g. int -> float); the schema decides instead
            with node.ignore_type():
                node[parts[-1]] = value


def apply_overrides(
    config_dict: ml_collections.ConfigDict, overrides: Sequence[str] | Mapping[str, Any]
) -> ml_collections.ConfigDict:
    """A copy of ``config_dict`` with ``["a.b=value", ...]`` (text, parsed as the field's type) or
    ``{"a.b": value}`` (Python values) applied in order. Unknown keys raise ConfigError with close
    matches; the result still goes through ``load_config`` for range checks."""
    result = copy.deepcopy(config_dict)  # FieldReferences stay linked inside the copy
    if isinstance(overrides, Mapping):
        items = [(key, value, False) for key, value in overrides.items()]
    else:
        items = [(*split_assignment(assignment), True) for assignment in overrides]
    for key, value, is_text in items:
        parts = key.split(".")
        hint = _field_hint(parts, result)
        _set_path(result, parts, parse_text(hint, value, key) if is_text else value)
    return result


def format_override(key: str, value: Any) -> str:
    """``key=text`` that ``apply_overrides`` parses back to ``value`` (for sweep command lines)."""
    return f"{key}={format_value(value)}"


def split_config_flags(argv: Sequence[str], flag: str = "--config") -> tuple[list[str], list[str]]:
    """Separates ``--config.a.b=value`` / ``--config.a.b value`` flags from the rest of ``argv``;
    returns ``(["a.b=value", ...], rest)``."""
    overrides, rest = [], []
    prefix = flag + "."
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith(prefix):
            body = arg[len(prefix) :]
            if "=" not in body:
                if i + 1 >= len(args):
                    raise ConfigError(f"{arg}: missing value")
                body = f"{body}={args[i + 1]}"
                i += 1
            overrides.append(body)
        else:
            rest.append(arg)
        i += 1
    return overrides, rest

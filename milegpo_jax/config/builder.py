"""The one typed builder: a nested mapping (a ConfigDict's ``to_dict``) -> the frozen ``TrainConfig``.

Each value is checked against its field's type hint (int -> float, list -> tuple, dict -> read-only
mapping, nested mapping -> section); unknown keys raise ``ConfigError`` with close matches, at the
same level or, failing that, anywhere in the schema. Range checks are the sections' own.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import ml_collections

from milegpo_jax.config.checks import ConfigError, frozen, suggestion
from milegpo_jax.config.schema import TrainConfig
from milegpo_jax.config.text import is_mapping, is_optional, strip_optional, type_name
from milegpo_jax.models.model_config import ModelConfigError

# Keys that moved, with where they went (the error says so rather than guessing a close match).
MOVED_KEYS = {
    "credit.overrides": "credit options are keys of the credit section itself: write credit.eta=0.5, "
                        "not credit.overrides.eta=0.5",
}


def field_hints(cls: type) -> dict[str, Any]:
    """A schema class's public fields and their type hints."""
    return {k: v for k, v in typing.get_type_hints(cls).items() if not k.startswith("_")}


def _leaf_paths(cls: type, prefix: str = "") -> list[str]:
    paths = []
    for name, hint in field_hints(cls).items():
        inner = strip_optional(hint)
        if dataclasses.is_dataclass(inner):
            paths += _leaf_paths(inner, f"{prefix}{name}.")
        else:
            paths.append(prefix + name)
    return paths


def unknown_key(path: str, key: str, known: Sequence[str]) -> ConfigError:
    """An unknown key, with close matches at the same level or, failing that, anywhere."""
    prefix = path + "." if path else ""
    if prefix + key in MOVED_KEYS:
        return ConfigError(f"unknown config key {prefix + key!r}: {MOVED_KEYS[prefix + key]}")
    hint = suggestion(key, known, prefix)
    if not hint:  # e.g. `learning_rate` given at the top level: look across all sections
        by_leaf: dict[str, list[str]] = {}
        for leaf_path in _leaf_paths(TrainConfig):
            by_leaf.setdefault(leaf_path.rsplit(".", 1)[-1], []).append(leaf_path)
        close = difflib.get_close_matches(key, list(by_leaf), n=3, cutoff=0.75)
        if close:
            hint = "; did you mean " + " or ".join(repr(p) for c in close for p in by_leaf[c]) + "?"
        else:
            hint = f"; known keys here: {', '.join(prefix + k for k in known)}"
    return ConfigError(f"unknown config key {prefix + key!r}{hint}")


def _json_like(path: str, value: Any) -> Any:
    """Free-form values (adapter options) must be JSON data: they travel to env servers and hashes."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"{path}={value}: must be finite")
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_json_like(f"{path}[{i}]", v) for i, v in enumerate(value))
    if isinstance(value, Mapping):
        return frozen({str(k): _json_like(f"{path}.{k}", v) for k, v in value.items()})
    raise ConfigError(f"{path}={value!r}: expected JSON-like data (number, string, bool, list, dict)")


def convert(hint: Any, value: Any, path: str) -> Any:
    """``value`` checked against the type ``hint`` and converted to the schema's form."""
    if value is None:
        if is_optional(hint) or hint is Any:
            return None
        raise ConfigError(f"{path} is None but must be {type_name(hint)}")
    inner = strip_optional(hint)
    if dataclasses.is_dataclass(inner):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a section (mapping of fields), got {value!r}")
        return build_section(inner, value, path)
    if inner is Any:
        return _json_like(path, value)
    if inner is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}={value!r}: expected true/false")
        return value
    if inner is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}={value!r}: expected an integer")
        return value
    if inner is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}={value!r}: expected a number")
        return float(value)
    if inner is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}={value!r}: expected a string")
        return value
    if typing.get_origin(inner) is tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise ConfigError(f"{path}={value!r}: expected a list")
        item_hint = typing.get_args(inner)[0]
        return tuple(convert(item_hint, v, f"{path}[{i}]") for i, v in enumerate(value))
    if is_mapping(inner):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        value_hint = typing.get_args(inner)[1]
        return frozen({str(key): convert(value_hint, item, f"{path}.{key}") for key, item in value.items()})
    raise TypeError(f"{path}: unsupported field type {inner!r}")  # a schema bug, not a user error


def build_section(cls: type, data: Mapping[str, Any], path: str) -> Any:
    """``cls(**data)`` with every value converted; missing keys take the field defaults."""
    hints = field_hints(cls)
    kwargs = {}
    for key, value in data.items():
        if key not in hints:
            raise unknown_key(path, str(key), list(hints))
        kwargs[key] = convert(hints[key], value, f"{path}.{key}" if path else key)
    try:
        return cls(**kwargs)
    except ModelConfigError as error:  # sections that build library configs
        raise ConfigError(f"{path}: {error}") from None


def load_config(config: ml_collections.ConfigDict | Mapping[str, Any]) -> TrainConfig:
    """The typed, validated ``TrainConfig`` of a ConfigDict (or plain nested mapping).

    Missing keys take the dataclass defaults; unknown keys, wrong types and out-of-range values raise
    ``ConfigError`` naming the dotted path (with close matches for unknown keys)."""
    data = config.to_dict() if isinstance(config, ml_collections.ConfigDict) else config
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config must be a ConfigDict or mapping, got {type(config).__name__}")
    return build_section(TrainConfig, data, "")

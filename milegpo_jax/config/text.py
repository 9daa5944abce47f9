"""The one text parser: a command-line value, read as the type of the field it sets.

``--config.a.b=value`` (``overrides.apply_overrides``), the credit CLIs' ``--set key=value``
(``credit.parse_credit_options``) and sweep command lines (``format_value`` writes what this reads
back) all go through ``parse_text``. Types come from the schema's type hints.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from typing import Any

from milegpo_jax.config.checks import ConfigError, plain

NONE_TEXTS = ("None", "none", "null")


def strip_optional(hint: Any) -> Any:
    """``X | None`` -> ``X``; anything else unchanged."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def is_optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def is_mapping(hint: Any) -> bool:
    return typing.get_origin(hint) in (Mapping, dict, typing.Mapping)


def type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def split_assignment(assignment: str) -> tuple[str, str]:
    """``"a.b=text"`` -> ``("a.b", "text")``; the text may itself contain ``=``."""
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {assignment!r}: expected key=value")
    return key.strip(), text


def parse_literal(text: str) -> Any:
    """Free-form values: JSON or Python literals where they parse, else the text itself."""
    if text in NONE_TEXTS:
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            continue
    return text


def parse_text(hint: Any, text: str, key: str) -> Any:
    """Parses ``text`` as the type ``hint``; ConfigError naming ``key`` when it does not parse."""
    if is_optional(hint) and text in NONE_TEXTS:
        return None
    inner = strip_optional(hint)
    if dataclasses.is_dataclass(inner):
        clear = f", or {key}=None to clear it" if is_optional(hint) else ""
        raise ConfigError(f"{key} is a section: set its fields one by one ({key}.FIELD=value){clear}")
    try:
        if inner is Any:
            return parse_literal(text)
        if inner is bool:
            lowered = text.strip().lower()
            if lowered in ("true", "1", "yes"):
                return True
            if lowered in ("false", "0", "no"):
                return False
            raise ValueError
        if inner is int:
            return int(text)
        if inner is float:
            return float(text)
        if inner is str:
            return text
        origin = typing.get_origin(inner)
        if origin is tuple:
            stripped = text.strip()
            if stripped and stripped[0] in "([":
                return tuple(ast.literal_eval(stripped))
            item_hint = typing.get_args(inner)[0]
            return tuple(parse_text(item_hint, item.strip(), key) for item in stripped.split(",") if item.strip())
        if is_mapping(inner):
            value = parse_literal(text)
            if not isinstance(value, Mapping):
                raise ValueError
            return value
    except (ValueError, SyntaxError):
        raise ConfigError(f"{key}={text!r}: expected {'true/false' if inner is bool else type_name(inner)}") from None
    raise TypeError(f"{key}: unsupported field type {inner!r}")  # a schema bug, not a user error


def format_value(value: Any) -> str:
    """The text ``parse_text`` reads back as ``value`` (for sweep command lines)."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        items = ",".join(json.dumps(v) if isinstance(v, str) else repr(v) for v in value)
        return "(" + items + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, Mapping):
        return json.dumps(plain(value), sort_keys=True)
    return str(value)

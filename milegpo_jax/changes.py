"""What differs between two nested records: a run's config identity and its checkpoint's, a warm
start's inputs and the run's. jax-free, with no imports of the package, so the config and train/
both read it (docs/architecture.md §3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def describe_changes(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``["ppo.kl_coef: 0.01 -> 0.02", ...]`` between two nested dicts (e.g. ``config_identity``'s)."""
    changes = []
    for key in sorted(set(old) | set(new)):
        path = prefix + key
        a, b = old.get(key, "<absent>"), new.get(key, "<absent>")
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            changes += describe_changes(a, b, path + ".")
        elif a != b:
            changes.append(f"{path}: {a!r} -> {b!r}")
    return changes

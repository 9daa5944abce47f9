"""A package's public names loaded on first use (PEP 562): its jax-free modules then import without
the rest (``milegpo_jax.models``, ``milegpo_jax.sampling``; docs/architecture.md §3)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_names(package: str, homes: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` of ``package`` whose public name -> defining module is ``homes``."""
    names = sorted(homes)

    def getattr_(name: str):
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return getattr_, lambda: names

"""Close-match hints for a mistyped name ("did you mean ...?"), without jax or the config, so that the
config's checks (``config/checks.py``) and the library's jax-free option types (``rollout/tree_shape.py``)
word them alike (docs/architecture.md §3)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any


def suggestion(key: str, candidates: Sequence[str] | Mapping[str, Any], prefix: str = "") -> str:
    """``"; did you mean 'a' or 'b'?"`` for close matches of ``key``, else ``""``."""
    close = difflib.get_close_matches(key, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(prefix + c) for c in close) + "?"

"""The pool's reply records and errors, and its small helpers (``client.py`` re-exports them)."""

from __future__ import annotations

import dataclasses
import enum
import operator
import os
import sys
from collections.abc import Sequence

from envs_bridge.base import StepResult


class EpisodeStatus(str, enum.Enum):
    OK = "ok"
    ABORTED = "aborted"  # the server holding the episode failed; exclude the episode from training


@dataclasses.dataclass(frozen=True)
class EnvReply:
    env_index: int
    status: EpisodeStatus
    result: StepResult | None  # None when aborted
    error: str = ""  # why the episode was aborted

    @property
    def aborted(self) -> bool:
        return self.status is EpisodeStatus.ABORTED


class PoolError(RuntimeError):
    """The pool cannot go on: a server does not start, or fails again right after a restart."""


class EnvRequestError(ValueError):
    """A server rejected a request as malformed (HTTP 4xx): a bug in the caller, never retried."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def interpreter_for(env: str) -> str:
    return os.environ.get(f"MILEGPO_PYTHON_{env.upper()}") or sys.executable


def raise_first(errors: list[EnvRequestError]) -> None:
    if errors:
        raise errors[0]


def integers(values: Sequence[int], what: str) -> list[int]:
    """Python ints from ints or numpy integers; anything else (bools, floats, strings) is refused."""
    converted = []
    for value in values:
        if isinstance(value, bool):
            raise ValueError(f"{what} {value!r} is not an integer")
        try:
            converted.append(operator.index(value))
        except TypeError:
            raise ValueError(f"{what} {value!r} is not an integer") from None
    return converted

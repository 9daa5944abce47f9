"""The in-process environment interface every adapter implements, served over HTTP by ``server.py``.

An adapter instance plays one episode at a time. ``reset`` starts task ``task_id`` of a split; every
K rollouts of a group call ``reset`` with the same (split, task_id, seed) and must see exactly the same
initial observation and state key (group semantics, docs/environments.md §2). ``step`` takes the action
string the agent produced (already projected out of the LLM response; it may be inadmissible).

Splits: ``train``, ``eval_id`` (evaluation, in distribution) and ``eval_ood`` (evaluation, out of
distribution); an environment without a separate OOD pool documents what its ``eval_ood`` is.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

SPLITS = ("train", "eval_id", "eval_ood")


class EnvError(ValueError):
    """Bad input to an environment (unknown split, task id out of range, ...): reported as HTTP 4xx."""


@dataclasses.dataclass(frozen=True)
class StepResult:
    """What the environment shows after ``reset`` or ``step``."""

    observation: str  # text observation shown to the agent (without prompt decoration)
    admissible_actions: tuple[str, ...]  # the commands the env would accept now
    reward: float  # reward of this step (0 on reset)
    done: bool
    won: bool  # task success
    score: float  # task score in [0, 1] (WebShop's reward; 1.0/0.0 elsewhere)
    task: str  # the task description ("Your task is to: ...", the WebShop instruction)
    state_key: str  # canonical state key for graph credit (docs/credit.md §1.5)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)  # JSON-serialisable extras

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["admissible_actions"] = list(self.admissible_actions)
        return data


class EnvAdapter(abc.ABC):
    """One environment instance. Each has a spec in ``envs_bridge.specs``."""

    #: spec name, e.g. "textworld_express"
    name: str = ""

    @abc.abstractmethod
    def num_tasks(self, split: str) -> int:
        """How many distinct tasks ``split`` holds (task ids are 0 .. num_tasks - 1)."""

    @abc.abstractmethod
    def reset(self, split: str, task_id: int, seed: int) -> StepResult:
        """Starts task ``task_id`` of ``split``; ``seed`` fixes any remaining randomness."""

    @abc.abstractmethod
    def step(self, action: str) -> StepResult:
        """Applies one action string; after ``done`` a further step raises EnvError."""

    def close(self) -> None:
        """Releases external resources (JVM, subprocesses)."""

    def copy_episode(self, other: EnvAdapter) -> bool:
        """Copies this running episode's state into ``other`` (a fresh instance with the same options)
        and says so; False (the default) means the engine cannot be copied and a fork replays the
        episode's actions instead (``envs_bridge/fork.py``). Must not change this episode."""
        return False


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise EnvError(f"unknown split {split!r}: choose one of {', '.join(SPLITS)}")

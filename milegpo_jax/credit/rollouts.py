"""Host-side rollout records consumed by every credit estimator.

A *group* holds the K trajectories sampled for one task; a *trajectory* is a list of steps; a step is
one LLM response with its transition ``state --action--> next_state`` (canonical state keys, see
docs/credit.md §1.5), the environment reward and the format validity of the response.

The JSON form (docs/credit-implementation.md §3) is::

    {"groups": [{"trajectories": [{"steps": [
        {"state": str, "action": str, "next_state": str, "reward": float, "valid": bool,
         "milestone": bool (optional)}, ...]}]}]}

``milestone`` (BEACON, docs/credit-family.md) is true on the step that completes the environment's next
milestone; rollouts recorded without milestone detection omit it (``Step.milestone is None``).

``parse_rollouts`` validates that form and raises ``RolloutFormatError`` with a one-line message that
names the offending place (``groups[g].trajectories[k].steps[t].field``). Credit takes rollouts as
``RolloutColumns`` only: ``columns.columns_from_groups`` interns these records at the JSON edge (the
CLI, the replay tool), where the estimator's needs are checked too (``columns.check_columns_for``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The literal GraphGPO uses for the success sink (docs/credit.md §1.1, §4.2). On the last step of a
# successful trajectory the next state is replaced by this node.
SUCCESS_STATE = "success"


class RolloutFormatError(ValueError):
    """Rollout data that does not follow the documented format."""


@dataclasses.dataclass(frozen=True)
class Step:
    state: str
    action: str
    next_state: str
    reward: float
    valid: bool = True
    milestone: bool | None = None  # None: the rollout was recorded without milestone flags


@dataclasses.dataclass(frozen=True)
class Trajectory:
    steps: tuple[Step, ...]

    @property
    def episode_reward(self) -> float:
        return sum(step.reward for step in self.steps)

    @property
    def succeeded(self) -> bool:
        # R2 (docs/credit.md §1.2): success is an episode env reward above 0 (theta_R = 0).
        return self.episode_reward > 0.0


@dataclasses.dataclass(frozen=True)
class Group:
    trajectories: tuple[Trajectory, ...]


def _require(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise RolloutFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise RolloutFormatError(f"{where}: missing key '{key}'")
    return obj[key]


def _parse_step(raw: Any, where: str) -> Step:
    values = {}
    for key in ("state", "action", "next_state"):
        value = _require(raw, key, where)
        if not isinstance(value, str):
            raise RolloutFormatError(f"{where}.{key}: expected a string, got {type(value).__name__}")
        values[key] = value
    reward = _require(raw, "reward", where)
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        raise RolloutFormatError(f"{where}.reward: expected a number, got {type(reward).__name__}")
    if not math.isfinite(reward):
        raise RolloutFormatError(f"{where}.reward: reward must be finite, got {reward}")
    valid = _require(raw, "valid", where)
    if not isinstance(valid, bool):
        raise RolloutFormatError(f"{where}.valid: expected true/false, got {type(valid).__name__}")
    milestone = raw.get("milestone")
    if milestone is not None and not isinstance(milestone, bool):
        raise RolloutFormatError(f"{where}.milestone: expected true/false, got {type(milestone).__name__}")
    return Step(reward=float(reward), valid=valid, milestone=milestone, **values)


def _parse_list(raw: Any, key: str, where: str) -> list:
    items = _require(raw, key, where)
    if not isinstance(items, list):
        raise RolloutFormatError(f"{where}.{key}: expected a list, got {type(items).__name__}")
    if not items:
        raise RolloutFormatError(f"{where}.{key}: must not be empty")
    return items


def parse_rollouts(raw: Any) -> list[Group]:
    """Validates the JSON object of the credit CLI and returns the groups it holds."""
    groups = []
    for g, raw_group in enumerate(_parse_list(raw, "groups", "input")):
        where_g = f"groups[{g}]"
        trajectories = []
        for k, raw_traj in enumerate(_parse_list(raw_group, "trajectories", where_g)):
            where_k = f"{where_g}.trajectories[{k}]"
            steps = tuple(
                _parse_step(raw_step, f"{where_k}.steps[{t}]")
                for t, raw_step in enumerate(_parse_list(raw_traj, "steps", where_k))
            )
            trajectories.append(Trajectory(steps))
        groups.append(Group(tuple(trajectories)))
    return groups


def load_rollouts(path: str | Path) -> list[Group]:
    """Reads and validates a rollout JSON file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RolloutFormatError(f"{path}: no such file") from None
    except OSError as error:
        raise RolloutFormatError(f"{path}: cannot read ({error.strerror})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise RolloutFormatError(
            f"{path}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    return parse_rollouts(raw)


def _step_json(step: Step) -> dict:
    fields = dataclasses.asdict(step)
    if step.milestone is None:
        del fields["milestone"]
    return fields


def rollouts_to_json(groups: Sequence[Group]) -> dict:
    """The inverse of ``parse_rollouts`` (used to write example files and test fixtures)."""
    return {
        "groups": [
            {"trajectories": [{"steps": [_step_json(s) for s in traj.steps]} for traj in group.trajectories]}
            for group in groups
        ]
    }


def make_group(trajectories: Sequence[Sequence[tuple]]) -> Group:
    """Builds a group from compact ``(state, action, next_state, reward, valid)`` tuples (tests, examples)."""
    return Group(tuple(Trajectory(tuple(Step(*step) for step in traj)) for traj in trajectories))

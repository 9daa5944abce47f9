"""Rollouts as flat, pre-interned integer columns: the fast road from recorded steps to a padded batch.

Interning strings is the slow part of batch building (a dict lookup per state key on the host), so a
producer that records steps one at a time (the rollout collector, the arena) interns each state key
and action when it records the step, with a ``KeyInterner`` it keeps. ``RolloutColumns`` then holds
one integer code per step field plus the reward, validity and milestone columns, and
``batch.build_batch`` turns them into the padded arrays with vectorised numpy only.

Codes are global to the interner; the per-group node ids of docs/credit.md §1.1 (sink 0, real states
in order of first appearance within the group) are derived from them in ``batch.py``, so the batch
equals the one built from the same rollouts as ``Group`` records.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence

import numpy as np

from milegpo_jax.credit.rollouts import Group, RolloutFormatError

# The per-step milestone column: the env's flag, or UNRECORDED where the rollout was recorded without
# milestone detection (``Step.milestone is None``).
UNRECORDED = -1
_MILESTONE_CODES = {None: UNRECORDED, False: 0, True: 1}
_fields = operator.attrgetter("state", "next_state", "action", "reward", "valid", "milestone")


class KeyInterner:
    """Strings -> dense integer codes 0, 1, ... in order of first sight; ``names[code]`` inverts it."""

    def __init__(self):
        self.codes: dict[str, int] = {}
        self.names: list[str] = []

    def __call__(self, key: str) -> int:
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.names)
            self.names.append(key)
        return code

    def many(self, keys: Sequence[str]) -> np.ndarray:
        """Codes of ``keys`` (new keys are added in order of first appearance)."""
        for key in dict.fromkeys(keys):
            if key not in self.codes:
                self.codes[key] = len(self.names)
                self.names.append(key)
        return np.fromiter(map(self.codes.__getitem__, keys), np.int64, len(keys))


@dataclasses.dataclass(frozen=True)
class RolloutColumns:
    """Every step of a batch of groups, trajectory-major (group 0's trajectory 0 first, its steps in order).

    ``state``/``next_state`` index ``state_names``; ``action`` codes only need to be equal for equal
    actions. ``milestone`` is 1/0 for the env's flag, ``UNRECORDED`` where it was not detected."""

    state: np.ndarray  # int [S]
    next_state: np.ndarray  # int [S]
    action: np.ndarray  # int [S]
    reward: np.ndarray  # float64 [S]
    valid: np.ndarray  # bool [S]
    milestone: np.ndarray  # int8 [S]
    lengths: np.ndarray  # int [trajectories]: steps of each trajectory
    group_sizes: np.ndarray  # int [groups]: trajectories of each group
    state_names: Sequence[str]  # code -> canonical state key

    def __post_init__(self):
        steps = len(self.state)
        if not len(self.group_sizes):
            raise ValueError("no groups to build a batch from")
        for name in ("next_state", "action", "reward", "valid", "milestone"):
            if len(getattr(self, name)) != steps:
                raise ValueError(f"columns: {name} has {len(getattr(self, name))} entries for {steps} steps")
        if int(np.sum(self.lengths)) != steps or int(np.sum(self.group_sizes)) != len(self.lengths):
            raise ValueError("columns: lengths and group_sizes do not add up to the steps")
        empty_group = np.flatnonzero(np.asarray(self.group_sizes) < 1)
        if empty_group.size:
            raise ValueError(f"groups[{empty_group[0]}]: no trajectories")
        empty = np.flatnonzero(np.asarray(self.lengths) < 1)
        if empty.size:
            g, k = self.trajectory_place(int(empty[0]))
            raise ValueError(f"groups[{g}].trajectories[{k}]: no steps")

    def trajectory_place(self, trajectory: int) -> tuple[int, int]:
        """(group, index within the group) of the flat trajectory number ``trajectory``."""
        starts = np.cumsum(self.group_sizes) - self.group_sizes
        g = int(np.searchsorted(starts, trajectory, side="right") - 1)
        return g, trajectory - int(starts[g])

    def step_place(self, step: int) -> str:
        """``groups[g].trajectories[k].steps[t]`` of the flat step number ``step``."""
        ends = np.cumsum(self.lengths)
        trajectory = int(np.searchsorted(ends, step, side="right"))
        g, k = self.trajectory_place(trajectory)
        return f"groups[{g}].trajectories[{k}].steps[{step - int(ends[trajectory] - self.lengths[trajectory])}]"


def columns_from_groups(groups: Sequence[Group]) -> RolloutColumns:
    """Interns ``Group`` records (the JSON/CLI form) into columns."""
    if not groups:
        raise ValueError("no groups to build a batch from")
    for g, group in enumerate(groups):
        if not group.trajectories:
            raise ValueError(f"groups[{g}]: no trajectories")
        for k, traj in enumerate(group.trajectories):
            if not traj.steps:
                raise ValueError(f"groups[{g}].trajectories[{k}]: no steps")
    steps = [step for group in groups for traj in group.trajectories for step in traj.steps]
    states, next_states, actions, rewards, valids, milestones = zip(*map(_fields, steps))
    interner, action_codes = KeyInterner(), KeyInterner()
    state_codes = interner.many(states + next_states)
    milestone = np.fromiter(map(_MILESTONE_CODES.__getitem__, milestones), np.int8, len(steps))
    return RolloutColumns(
        state=state_codes[: len(steps)],
        next_state=state_codes[len(steps) :],
        action=action_codes.many(actions),
        reward=np.array(rewards, np.float64),
        valid=np.array(valids, bool),
        milestone=milestone,
        lengths=np.fromiter((len(t.steps) for group in groups for t in group.trajectories), np.int64),
        group_sizes=np.fromiter((len(group.trajectories) for group in groups), np.int64),
        state_names=interner.names,
    )


def check_columns_for(columns: RolloutColumns, estimator: str) -> None:
    """``rollouts.check_estimator_inputs`` for columns: the first step without a needed field, in one line."""
    from milegpo_jax.credit.config import NEEDS_MILESTONES

    if estimator not in NEEDS_MILESTONES:
        return
    missing = np.flatnonzero(columns.milestone == UNRECORDED)
    if missing.size:
        raise RolloutFormatError(
            f"{columns.step_place(int(missing[0]))}: estimator {estimator} needs the per-step field 'milestone', "
            "which these rollouts lack"
        )

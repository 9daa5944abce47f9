"""Rollouts as flat, pre-interned integer columns: the fast road from recorded steps to a padded batch.

Interning strings is the slow part of batch building (a dict lookup per state key on the host), so a
producer that records steps one at a time interns each state key and action when it records the step:
the rollout collector with a ``StepRecorder`` (codes per group, see below), the arena with one
``KeyInterner`` per run. ``RolloutColumns`` then holds one integer code per step field plus the
reward, validity and milestone columns, and ``batch.build_batch`` turns them into the padded arrays
with vectorised numpy only (docs/credit-implementation.md §1.1).

The per-group node ids of docs/credit.md §1.1 (sink 0, real states in order of first appearance
within the group) are derived from the codes in ``batch.py``, so the batch does not depend on how the
codes were numbered and equals the one built from the same rollouts as ``Group`` records.

``StepRecorder`` numbers the state keys and actions of each group on their own, in the order the
group's steps are recorded. A group is played on one host and its steps are recorded in the same order
wherever it is played, so its codes do not depend on the host, nor on which other groups the host
played: the recordings of several hosts (or of several evaluation passes) merge by renumbering their
groups (``RecordedSteps.regrouped`` / ``concatenate``), without interning anything again.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections.abc import Callable, Collection, Sequence

import numba
import numpy as np

from milegpo_jax.credit.rollouts import Group, RolloutFormatError

# The per-step milestone column: the env's flag, or UNRECORDED where the rollout was recorded without
# milestone detection (``Step.milestone is None``).
UNRECORDED = -1
_MILESTONE_CODES = {None: UNRECORDED, False: 0, True: 1}
MILESTONE_FLAGS = {code: flag for flag, code in _MILESTONE_CODES.items()}  # code -> ``Step.milestone``
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
    actions of a group. ``milestone`` is 1/0 for the env's flag, ``UNRECORDED`` where it was not detected."""

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
        problem, place = _count_problem(np.asarray(self.lengths, np.int64), np.asarray(self.group_sizes, np.int64), steps)
        if problem == 1:
            raise ValueError("columns: lengths and group_sizes do not add up to the steps")
        if problem == 2:
            raise ValueError(f"groups[{place}]: no trajectories")
        if problem == 3:
            g, k = self.trajectory_place(place)
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


@numba.njit(cache=True)
def _count_problem(lengths, group_sizes, steps):
    """(0, 0) if the counts are consistent; else (1, 0) when lengths and group sizes do not add up to
    the steps, (2, g) for the first group without trajectories, (3, i) for the first trajectory
    without steps (one compiled call: as numpy these were six, slow when cold)."""
    if lengths.sum() != steps or group_sizes.sum() != len(lengths):
        return 1, 0
    for g in range(len(group_sizes)):
        if group_sizes[g] < 1:
            return 2, g
    for i in range(len(lengths)):
        if lengths[i] < 1:
            return 3, i
    return 0, 0


@dataclasses.dataclass(frozen=True, eq=False)
class RecordedSteps:
    """Steps in the order a producer recorded them, state keys and actions interned per group.

    ``state``/``next_state`` index the group's table ``state_names[group]``; ``action`` codes count the
    group's distinct actions. ``milestone`` as in ``RolloutColumns``."""

    group: np.ndarray  # int64 [R]
    trajectory: np.ndarray  # int64 [R] rollout index k within the group
    t: np.ndarray  # int64 [R] step index within the trajectory
    state: np.ndarray  # int64 [R]
    next_state: np.ndarray  # int64 [R]
    action: np.ndarray  # int64 [R]
    reward: np.ndarray  # float64 [R]
    valid: np.ndarray  # bool [R]
    milestone: np.ndarray  # int8 [R]
    state_names: dict[int, tuple[str, ...]]  # group -> code -> canonical state key
    action_names: dict[int, tuple[str, ...]]  # group -> code -> action (for tools that list the steps)

    def __len__(self) -> int:
        return len(self.group)

    def regrouped(self, new_group: Callable[[int], int]) -> RecordedSteps:
        """The same steps with every group ``g`` renumbered ``new_group(g)`` (codes stay valid: they are per group)."""
        mapping = np.zeros(max(self.state_names, default=-1) + 1, np.int64)
        for group in self.state_names:
            mapping[group] = new_group(group)
        names = {int(mapping[group]): table for group, table in self.state_names.items()}
        actions = {int(mapping[group]): table for group, table in self.action_names.items()}
        return dataclasses.replace(self, group=mapping[self.group], state_names=names, action_names=actions)

    @staticmethod
    def concatenate(parts: Sequence[RecordedSteps]) -> RecordedSteps:
        """One recording of the steps of ``parts`` (whose groups must be distinct), in the order given."""
        names: dict[int, tuple[str, ...]] = {}
        actions: dict[int, tuple[str, ...]] = {}
        for part in parts:
            if names.keys() & part.state_names.keys():
                raise ValueError(f"recorded steps: group {min(names.keys() & part.state_names.keys())} is in two parts")
            names.update(part.state_names)
            actions.update(part.action_names)
        arrays = {
            field.name: np.concatenate([getattr(part, field.name) for part in parts])
            for field in dataclasses.fields(RecordedSteps)
            if field.name not in ("state_names", "action_names")
        }
        return RecordedSteps(**arrays, state_names=names, action_names=actions)

    def training_order(self, dropped: Collection[tuple[int, int]] = ()) -> np.ndarray:
        """Indices of the recorded steps in (group, trajectory, t) order, without the ``dropped``
        (group, trajectory) episodes."""
        return self._ordered(dropped)[0]

    def columns(self, dropped: Collection[tuple[int, int]] = ()) -> tuple[RolloutColumns, np.ndarray]:
        """The columns of every episode but the ``dropped`` ones (``training_order``), and that order:
        entry i of the columns is recorded step ``order[i]``. State codes become global by offsetting
        each group's table by the sizes of the tables before it."""
        order, lengths, group_sizes, present, state, next_state, action, reward, valid, milestone = self._ordered(dropped)
        columns = RolloutColumns(
            state, next_state, action, reward, valid, milestone, lengths, group_sizes,
            state_names=JoinedNames(list(map(self.state_names.__getitem__, present.tolist()))),
        )
        return columns, order

    def _ordered(self, dropped: Collection[tuple[int, int]]) -> tuple[np.ndarray, ...]:
        """``_ordered_columns`` of the kept steps; every kept episode must number its steps 0, 1, ... once."""
        tables = map(self.state_names.get, range(max(self.state_names, default=-1) + 1), itertools.repeat(()))
        table_sizes = np.fromiter(map(len, tables), np.int64)
        *ordered, bad = _ordered_columns(
            self.group, self.trajectory, self.t, self.state, self.next_state, self.action, self.reward,
            self.valid, self.milestone, np.array(list(dropped), np.int64).reshape(-1, 2), table_sizes,
        )
        if bad < 0:
            return tuple(ordered)
        raise ValueError(
            f"recorded steps: group {self.group[bad]} trajectory {self.trajectory[bad]} does not number "
            f"its steps 0, 1, ... (step {bad} has t = {self.t[bad]})"
        )


class JoinedNames(Sequence):
    """Several groups' name tables read as one (code -> name), joined on the first read: the trainer's
    road reads no name (only a layout does, built on request), and joining a thousand names touches
    every string, 0.1 ms when the caches are cold."""

    def __init__(self, tables: list[tuple[str, ...]]):
        self._tables, self._joined = tables, None

    def _names(self) -> list[str]:
        if self._joined is None:
            self._joined = list(itertools.chain.from_iterable(self._tables))
        return self._joined

    def __getitem__(self, code):
        return self._names()[code]

    def __len__(self) -> int:
        return sum(map(len, self._tables))


@numba.njit(cache=True)
def _ordered_columns(group, trajectory, t, state, next_state, action, reward, valid, milestone, dropped, table_sizes):
    """The kept steps (all but the ``dropped`` [D, 2] (group, trajectory) episodes) in (group,
    trajectory, t) order, in one compiled pass (as numpy it was some twenty calls, slow when cold):
    (their indices, steps per played episode, played episodes per group with any, those groups, then
    the state, next state (offset by the state tables of the groups before), action, reward, valid
    and milestone columns in that order, and the first step whose t is out of range or repeated, or
    -1). A counting sort: each step's place is its episode's start plus its ``t``."""
    steps = len(group)
    span, groups = 1, 1
    for i in range(steps):
        span, groups = max(span, trajectory[i] + 1), max(groups, group[i] + 1)
    slots = groups * span
    dropped_slot = np.zeros(slots, np.bool_)
    for d in range(len(dropped)):
        if 0 <= dropped[d, 0] < groups and 0 <= dropped[d, 1] < span:
            dropped_slot[dropped[d, 0] * span + dropped[d, 1]] = True
    lengths = np.zeros(slots, np.int64)
    for i in range(steps):
        episode = group[i] * span + trajectory[i]
        if not dropped_slot[episode]:
            lengths[episode] += 1
    starts, episodes_of = np.empty(slots, np.int64), np.zeros(groups, np.int64)
    total = 0
    for e in range(slots):
        starts[e] = total
        total += lengths[e]
        episodes_of[e // span] += lengths[e] > 0
    order = np.full(total, -1, np.int64)
    bad = -1
    for i in range(steps):
        episode = group[i] * span + trajectory[i]
        if dropped_slot[episode]:
            continue
        if t[i] < 0 or t[i] >= lengths[episode] or order[starts[episode] + t[i]] >= 0:
            bad = i
            break
        order[starts[episode] + t[i]] = i
    present = np.flatnonzero(episodes_of)
    offset, tables = np.zeros(groups, np.int64), 0
    for g in present:
        offset[g] = tables
        tables += table_sizes[g]
    state_of, next_state_of = np.empty(total, np.int64), np.empty(total, np.int64)
    action_of, reward_of = np.empty(total, np.int64), np.empty(total, np.float64)
    valid_of, milestone_of = np.empty(total, np.bool_), np.empty(total, np.int8)
    if bad < 0:
        for i in range(total):
            r = order[i]
            shift = offset[group[r]]
            state_of[i], next_state_of[i], action_of[i] = state[r] + shift, next_state[r] + shift, action[r]
            reward_of[i], valid_of[i], milestone_of[i] = reward[r], valid[r], milestone[r]
    return (order, lengths[lengths > 0], episodes_of[present], present, state_of, next_state_of, action_of, reward_of,
            valid_of, milestone_of, bad)


class StepRecorder:
    """Interns each step's state keys and action as a producer records it, with one table per group."""

    def __init__(self):
        self._states: dict[int, KeyInterner] = {}
        self._actions: dict[int, KeyInterner] = {}
        self._steps: list[tuple] = []

    def record(
        self, group: int, trajectory: int, t: int, state: str, action: str, next_state: str,
        reward: float, valid: bool, milestone: bool | None,
    ) -> None:
        states = self._states.get(group)
        if states is None:
            states = self._states[group] = KeyInterner()
            self._actions[group] = KeyInterner()
        self._steps.append((
            group, trajectory, t, states(state), states(next_state), self._actions[group](action),
            reward, valid, _MILESTONE_CODES[milestone],
        ))

    def finish(self) -> RecordedSteps:
        fields = list(zip(*self._steps)) if self._steps else [()] * 9
        return RecordedSteps(
            *(np.array(values, np.int64) for values in fields[:6]),
            reward=np.array(fields[6], np.float64),
            valid=np.array(fields[7], bool),
            milestone=np.array(fields[8], np.int8),
            state_names={group: tuple(interner.names) for group, interner in self._states.items()},
            action_names={group: tuple(interner.names) for group, interner in self._actions.items()},
        )


def columns_from_groups(groups: Sequence[Group]) -> RolloutColumns:
    """Interns ``Group`` records (the JSON/CLI form) into columns (``RolloutColumns`` checks the counts)."""
    if not groups:
        raise ValueError("no groups to build a batch from")
    steps = [step for group in groups for traj in group.trajectories for step in traj.steps]
    states, next_states, actions, rewards, valids, milestones = zip(*map(_fields, steps)) if steps else [()] * 6
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
    """Raises ``RolloutFormatError`` naming the estimator and the first step that lacks a field it needs
    (BEACON reads the per-step ``milestone`` flag, which rollouts recorded without detection omit)."""
    from milegpo_jax.credit.config import NEEDS_MILESTONES

    if estimator not in NEEDS_MILESTONES:
        return
    missing = np.flatnonzero(columns.milestone == UNRECORDED)
    if missing.size:
        raise RolloutFormatError(
            f"{columns.step_place(int(missing[0]))}: estimator {estimator} needs the per-step field 'milestone', "
            "which these rollouts lack"
        )

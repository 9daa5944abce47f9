"""Rollout groups -> padded integer/float arrays for the jitted credit estimators.

Strings never enter jitted code: canonical state keys and action strings are mapped on the host to
dense per-group ids. Node 0 of every group is the success sink (docs/credit.md §1.1: the next state of
the last step of a successful trajectory becomes the sink); real states follow in order of first
appearance. Every dimension is padded to a power-of-two bucket so that new batch shapes recompile
rarely; padded steps, trajectories, groups and nodes are masked and receive exactly zero advantage.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from milegpo_jax.credit.rollouts import Group
from milegpo_jax.shapes import bucket_size

SINK = 0  # node id of the success sink in every group
_SINK_KEY = object()  # stands for the sink while interning (no state key can equal it)
_fields = operator.attrgetter("state", "next_state", "action", "reward", "valid", "milestone")


class CreditBatch(NamedTuple):
    """Padded arrays; G groups x K trajectories x T steps, N nodes per group (a JAX pytree)."""

    src: np.ndarray  # int32 [G, K, T] node id of s_t
    dst: np.ndarray  # int32 [G, K, T] node id of s_{t+1} (SINK on a successful final step)
    action: np.ndarray  # int32 [G, K, T] per-group action id (diagnostics only)
    reward: np.ndarray  # float32 [G, K, T] env reward of the step
    valid: np.ndarray  # bool [G, K, T] format validity of the response
    step_mask: np.ndarray  # bool [G, K, T] real step
    traj_mask: np.ndarray  # bool [G, K] real trajectory
    last_state: np.ndarray  # int32 [G, K] s_T: next state of the trajectory's last step
    node_mask: np.ndarray  # bool [G, N] real node (the sink only if the group has a success)
    milestone: np.ndarray  # bool [G, K, T] the step completes the next env milestone (BEACON; False if unrecorded)


@dataclasses.dataclass(frozen=True)
class BatchLayout:
    """Host-side bookkeeping to map padded arrays back to the ragged rollouts."""

    lengths: tuple[tuple[int, ...], ...]  # steps per trajectory, per group
    node_names: tuple[tuple[str, ...], ...]  # per group: node id -> state key ("success" for the sink)

    def unpad(self, rows: np.ndarray) -> list[list[list[float]]]:
        """[G, K, T] padded per-step values -> nested lists per group / trajectory / step."""
        rows = np.asarray(rows)
        return [
            [[float(v) for v in rows[g, k, :length]] for k, length in enumerate(group_lengths)]
            for g, group_lengths in enumerate(self.lengths)
        ]

    def node_values(self, values: np.ndarray, group: int) -> dict[str, float]:
        """[G, N] per-node values -> {state key: value} for one group's real nodes."""
        return {name: float(values[group, i]) for i, name in enumerate(self.node_names[group])}


def build_batch(
    groups: Sequence[Group],
    *,
    min_groups: int = 1,
    min_trajectories: int = 1,
    min_steps: int = 8,
    min_nodes: int = 8,
    bucket: bool = True,
) -> tuple[CreditBatch, BatchLayout]:
    """Maps rollout groups to padded arrays. ``bucket=False`` pads only to the largest size."""
    if not groups:
        raise ValueError("no groups to build a batch from")
    for g, group in enumerate(groups):
        if not group.trajectories:
            raise ValueError(f"groups[{g}]: no trajectories")
        for k, traj in enumerate(group.trajectories):
            if not traj.steps:
                raise ValueError(f"groups[{g}].trajectories[{k}]: no steps")

    # Interning and padding are vectorised: attribute reads go through C-level ``map``, per group
    # ``dict.fromkeys`` interns the state keys in order of first appearance, and the padded arrays are
    # filled by one scatter per field. The result equals a step-by-step loop.
    steps = [step for group in groups for traj in group.trajectories for step in traj.steps]
    lengths = tuple(tuple(len(traj.steps) for traj in group.trajectories) for group in groups)
    flat_lengths = np.fromiter((n for group_lengths in lengths for n in group_lengths), np.int64)
    row_ends = np.cumsum(flat_lengths)
    states, next_states, actions, rewards, valids, milestones = zip(*map(_fields, steps))
    step_rewards = np.array(rewards, np.float64)
    succeeded = np.add.reduceat(step_rewards, row_ends - flat_lengths) > 0.0  # Trajectory.succeeded
    keys: list = [None] * (2 * len(steps))
    keys[0::2] = states
    keys[1::2] = next_states
    for end, success in zip(row_ends.tolist(), succeeded.tolist()):
        if success:  # the final next state of a successful trajectory is the sink, not a node of its own
            keys[2 * end - 1] = _SINK_KEY
    group_ends = np.cumsum([sum(group_lengths) for group_lengths in lengths]).tolist()
    node_names, node_index, action_index = [], [], []
    for begin, end in zip([0, *group_ends[:-1]], group_ends):
        group_keys = keys[2 * begin : 2 * end]
        ordered = dict.fromkeys(group_keys)
        ordered.pop(_SINK_KEY, None)
        names = ("success", *ordered)
        lookup = dict(zip(ordered, range(1, len(names))))
        lookup[_SINK_KEY] = SINK
        node_names.append(names)
        node_index.append(np.fromiter(map(lookup.__getitem__, group_keys), np.int32, len(group_keys)))
        group_actions = actions[begin:end]
        action_ids = {action: i for i, action in enumerate(dict.fromkeys(group_actions))}
        action_index.append(np.fromiter(map(action_ids.__getitem__, group_actions), np.int32, end - begin))

    sizes = (
        len(groups),
        max(len(g.trajectories) for g in groups),
        max(len(t.steps) for g in groups for t in g.trajectories),
        max(len(names) for names in node_names),
    )
    minima = (min_groups, min_trajectories, min_steps, min_nodes)
    G, K, T, N = (bucket_size(s, m) if bucket else max(s, m) for s, m in zip(sizes, minima))

    group_of_traj = np.repeat(np.arange(len(groups)), [len(group_lengths) for group_lengths in lengths])
    traj_in_group = np.concatenate([np.arange(len(group_lengths)) for group_lengths in lengths])
    row_g = np.repeat(group_of_traj, flat_lengths)
    row_k = np.repeat(traj_in_group, flat_lengths)
    row_t = np.arange(len(steps)) - np.repeat(row_ends - flat_lengths, flat_lengths)
    nodes = np.concatenate(node_index).reshape(-1, 2)

    def scatter(values, dtype, shape=(G, K, T)):
        out = np.zeros(shape, dtype)
        out[row_g, row_k, row_t] = values
        return out

    src = scatter(nodes[:, 0], np.int32)
    dst = scatter(nodes[:, 1], np.int32)
    action = scatter(np.concatenate(action_index), np.int32)
    reward = scatter(step_rewards.astype(np.float32), np.float32)
    valid = scatter(np.array(valids, bool), bool)
    milestone = scatter(np.fromiter(milestones, bool, len(steps)), bool)  # None (unrecorded) -> False
    step_mask = scatter(True, bool)
    traj_mask = np.zeros((G, K), bool)
    traj_mask[group_of_traj, traj_in_group] = True
    last_state = np.zeros((G, K), np.int32)
    last_state[group_of_traj, traj_in_group] = dst[group_of_traj, traj_in_group, flat_lengths - 1]
    group_nodes = np.array([len(names) for names in node_names] + [0] * (G - len(groups)))
    node_mask = np.arange(N)[None, :] < group_nodes[:, None]
    node_mask[: len(groups), SINK] = np.logical_or.reduceat(succeeded, np.cumsum([0, *map(len, lengths)])[:-1])

    batch = CreditBatch(src, dst, action, reward, valid, step_mask, traj_mask, last_state, node_mask, milestone)
    return batch, BatchLayout(lengths, tuple(node_names))

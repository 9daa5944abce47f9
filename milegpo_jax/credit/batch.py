"""Rollout groups -> padded integer/float arrays for the jitted credit estimators.

Strings never enter jitted code: canonical state keys and action strings are mapped on the host to
dense per-group ids. Node 0 of every group is the success sink (docs/credit.md §1.1: the next state of
the last step of a successful trajectory becomes the sink); real states follow in order of first
appearance. Every dimension is padded to a power-of-two bucket so that new batch shapes recompile
rarely; padded steps, trajectories, groups and nodes are masked and receive exactly zero advantage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from milegpo_jax.credit.rollouts import Group
from milegpo_jax.shapes import bucket_size

SINK = 0  # node id of the success sink in every group


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

    node_names = []
    for group in groups:
        ids = {}
        for traj in group.trajectories:
            # The final next state of a successful trajectory is the sink, not a node of its own.
            final = len(traj.steps) - 1 if traj.succeeded else len(traj.steps)
            for t, step in enumerate(traj.steps):
                ids.setdefault(step.state, len(ids) + 1)
                if t != final:
                    ids.setdefault(step.next_state, len(ids) + 1)
        names = ["success"] + [None] * len(ids)
        for name, i in ids.items():
            names[i] = name
        node_names.append(tuple(names))

    sizes = (
        len(groups),
        max(len(g.trajectories) for g in groups),
        max(len(t.steps) for g in groups for t in g.trajectories),
        max(len(names) for names in node_names),
    )
    minima = (min_groups, min_trajectories, min_steps, min_nodes)
    G, K, T, N = (bucket_size(s, m) if bucket else max(s, m) for s, m in zip(sizes, minima))

    src = np.zeros((G, K, T), np.int32)
    dst = np.zeros((G, K, T), np.int32)
    action = np.zeros((G, K, T), np.int32)
    reward = np.zeros((G, K, T), np.float32)
    valid = np.zeros((G, K, T), bool)
    step_mask = np.zeros((G, K, T), bool)
    traj_mask = np.zeros((G, K), bool)
    last_state = np.zeros((G, K), np.int32)
    node_mask = np.zeros((G, N), bool)
    lengths = []

    for g, group in enumerate(groups):
        node_id = {name: i for i, name in enumerate(node_names[g]) if i != SINK}
        action_id: dict[str, int] = {}
        node_mask[g, 1 : len(node_names[g])] = True
        node_mask[g, SINK] = any(traj.succeeded for traj in group.trajectories)
        for k, traj in enumerate(group.trajectories):
            steps, length = traj.steps, len(traj.steps)
            src[g, k, :length] = [node_id[step.state] for step in steps]
            dst[g, k, :length] = [node_id.get(step.next_state, SINK) for step in steps]
            if traj.succeeded:
                dst[g, k, length - 1] = SINK
            action[g, k, :length] = [action_id.setdefault(step.action, len(action_id)) for step in steps]
            reward[g, k, :length] = [step.reward for step in steps]
            valid[g, k, :length] = [step.valid for step in steps]
            step_mask[g, k, :length] = True
            traj_mask[g, k] = True
            last_state[g, k] = dst[g, k, length - 1]
        lengths.append(tuple(len(traj.steps) for traj in group.trajectories))

    batch = CreditBatch(src, dst, action, reward, valid, step_mask, traj_mask, last_state, node_mask)
    return batch, BatchLayout(tuple(lengths), tuple(node_names))

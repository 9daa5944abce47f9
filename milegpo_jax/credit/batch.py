"""Rollout groups -> padded integer/float arrays for the jitted credit estimators.

Strings never enter jitted code: canonical state keys and action strings are interned on the host
(``columns.py``; a producer may hand in pre-interned columns) and mapped to dense per-group ids. Node 0 of every group is the success sink (docs/credit.md §1.1: the next state of
the last step of a successful trajectory becomes the sink); real states follow in order of first
appearance. Every dimension is padded to a power-of-two bucket so that new batch shapes recompile
rarely; padded steps, trajectories, groups and nodes are masked and receive exactly zero advantage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from milegpo_jax.credit.columns import RolloutColumns, columns_from_groups
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
    milestone: np.ndarray  # bool [G, K, T] the step completes the next env milestone (BEACON; False if unrecorded)


@dataclasses.dataclass(frozen=True)
class BatchLayout:
    """Host-side bookkeeping to map padded arrays back to the ragged rollouts."""

    lengths: tuple[tuple[int, ...], ...]  # steps per trajectory, per group
    node_names: tuple[tuple[str, ...], ...]  # per group: node id -> state key ("success" for the sink)

    def unpad(self, rows: np.ndarray) -> list[list[list[float]]]:
        """[G, K, T] padded per-step values -> nested lists per group / trajectory / step."""
        rows = np.asarray(rows, np.float64)  # exact for float32, ints and bools; tolist gives Python floats
        return [
            [rows[g, k, :length].tolist() for k, length in enumerate(group_lengths)]
            for g, group_lengths in enumerate(self.lengths)
        ]

    def node_values(self, values: np.ndarray, group: int) -> dict[str, float]:
        """[G, N] per-node values -> {state key: value} for one group's real nodes."""
        return {name: float(values[group, i]) for i, name in enumerate(self.node_names[group])}


def build_batch(rollouts: Sequence[Group] | RolloutColumns, **options) -> tuple[CreditBatch, BatchLayout]:
    """Maps rollout groups (or their pre-interned columns) to padded arrays and their layout
    (``padded_batch``'s options)."""
    batch, layout, _ = padded_batch(rollouts, **options)
    return batch, layout()


def padded_batch(
    rollouts: Sequence[Group] | RolloutColumns,
    *,
    min_groups: int = 1,
    min_trajectories: int = 1,
    min_steps: int = 8,
    min_nodes: int = 8,
    bucket: bool = True,
) -> tuple[CreditBatch, Callable[[], BatchLayout], np.ndarray]:
    """The padded arrays, a function that makes their ``BatchLayout`` (Python tuples of names and
    lengths, which a caller that only needs per-step values never builds) and the place of every step
    in the flattened [G, K, T] arrays, in the steps' (trajectory-major) order. ``bucket=False`` pads
    only to the largest size; the minima fix a floor, so that a caller can keep one shape across batches."""
    columns = rollouts if isinstance(rollouts, RolloutColumns) else columns_from_groups(rollouts)
    steps = len(columns.state)
    flat_lengths = np.asarray(columns.lengths, np.int64)
    group_sizes = np.asarray(columns.group_sizes, np.int64)
    num_groups = len(group_sizes)
    row_ends = np.cumsum(flat_lengths)
    row_starts = row_ends - flat_lengths
    step_rewards = np.asarray(columns.reward, np.float64)
    succeeded = np.add.reduceat(step_rewards, row_starts) > 0.0  # Trajectory.succeeded
    group_of_traj = np.repeat(np.arange(num_groups), group_sizes)
    traj_in_group = np.arange(len(flat_lengths)) - np.repeat(np.cumsum(group_sizes) - group_sizes, group_sizes)
    row_g = np.repeat(group_of_traj, flat_lengths)

    # s_0, s_1 of step 0, s_1, s_2 of step 1, ...: the order of first appearance that numbers the nodes
    keys = np.empty(2 * steps, np.int64)
    keys[0::2], keys[1::2] = columns.state, columns.next_state
    sink_positions = 2 * row_ends[succeeded] - 1  # a successful trajectory's final next state is the sink
    node_key, group_nodes, ordered_codes = _first_appearance_ids(keys, np.repeat(row_g, 2), num_groups, sink_positions)
    action_ids, _, _ = _first_appearance_ids(np.asarray(columns.action, np.int64), row_g, num_groups)

    sizes = (num_groups, int(group_sizes.max()), int(flat_lengths.max()), int(group_nodes.max()) + 1)
    minima = (min_groups, min_trajectories, min_steps, min_nodes)
    G, K, T, N = (bucket_size(s, m) if bucket else max(s, m) for s, m in zip(sizes, minima))

    row_k = np.repeat(traj_in_group, flat_lengths)
    row_t = np.arange(steps) - np.repeat(row_starts, flat_lengths)
    nodes = node_key + 1
    nodes[sink_positions] = SINK
    nodes = nodes.reshape(-1, 2)

    flat_row = (row_g * K + row_k) * T + row_t

    def scatter(values, dtype):
        out = np.zeros(G * K * T, dtype)
        out[flat_row] = values
        return out.reshape(G, K, T)

    src = scatter(nodes[:, 0], np.int32)
    dst = scatter(nodes[:, 1], np.int32)
    action = scatter(action_ids, np.int32)
    reward = scatter(step_rewards.astype(np.float32), np.float32)
    valid = scatter(np.asarray(columns.valid, bool), bool)
    milestone = scatter(np.asarray(columns.milestone) == 1, bool)  # unrecorded -> False
    step_mask = scatter(True, bool)
    traj_mask = np.zeros((G, K), bool)
    traj_mask[group_of_traj, traj_in_group] = True
    last_state = np.zeros((G, K), np.int32)
    last_state[group_of_traj, traj_in_group] = dst[group_of_traj, traj_in_group, flat_lengths - 1]
    real_nodes = np.zeros(G, np.int64)
    real_nodes[:num_groups] = group_nodes + 1
    node_mask = np.arange(N)[None, :] < real_nodes[:, None]
    node_mask[:num_groups, SINK] = np.logical_or.reduceat(succeeded, np.cumsum(group_sizes) - group_sizes)

    batch = CreditBatch(src, dst, action, reward, valid, step_mask, traj_mask, last_state, node_mask, milestone)

    def layout() -> BatchLayout:
        ordered_names = list(map(columns.state_names.__getitem__, ordered_codes.tolist()))
        node_ends = np.cumsum(group_nodes).tolist()
        node_names = tuple(
            ("success", *ordered_names[begin:end]) for begin, end in zip([0, *node_ends[:-1]], node_ends)
        )
        steps_of, group_ends = flat_lengths.tolist(), np.cumsum(group_sizes).tolist()
        lengths = tuple(tuple(steps_of[begin:end]) for begin, end in zip([0, *group_ends[:-1]], group_ends))
        return BatchLayout(lengths, node_names)

    return batch, layout, flat_row


def _first_appearance_ids(
    codes: np.ndarray, group: np.ndarray, num_groups: int, skip: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-group dense ids of ``codes`` in order of first appearance (positions are group-major).

    Returns (id of every position, 0 at the ``skip`` positions; distinct codes per group; the distinct
    codes of all groups in id order). Linear in the positions, no sort of them: ``np.minimum.at`` finds
    the first position of every (group, code) in a dense table (the skipped positions go to one extra
    slot that is then forgotten), and those first positions in ascending order are the ids, counted
    from each group's first."""
    size = len(codes)
    span = int(codes.max(initial=0)) + 1
    key = group * span + codes
    trash = num_groups * span  # the last slot
    if skip is not None:
        key[skip] = trash
    if trash > 4 * size + 4096:  # sparse codes: a table of the distinct keys only (the trash slot stays last)
        _, key = np.unique(key, return_inverse=True)
        trash = int(key.max(initial=0)) if skip is not None and len(skip) else int(key.max(initial=0)) + 1
    first = np.full(trash + 1, size, np.int64)
    np.minimum.at(first, key, np.arange(size))
    first[trash] = size
    first_positions = np.sort(first[first < size])
    counts = np.bincount(group[first_positions], minlength=num_groups)
    rank = np.zeros(trash + 1, np.int64)
    rank[key[first_positions]] = np.arange(len(first_positions)) - np.repeat(np.cumsum(counts) - counts, counts)
    return rank[key], counts, codes[first_positions]

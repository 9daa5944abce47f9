"""Rollout columns -> the padded, named arrays of a ``CreditBatch`` for the jitted credit estimators.

Strings never enter jitted code: canonical state keys and action strings are interned on the host
(``columns.py``) and mapped to dense per-group ids by the node pass (``passes/nodes.py``). Node 0 of
every group is the success sink (docs/credit.md §1.1); real states follow in order of first
appearance. Every dimension is padded to a power-of-two bucket so that new batch shapes recompile
rarely; padded steps, trajectories, groups and nodes are masked and receive exactly zero advantage.

The host structure beyond the rows is built in passes of its own (``credit/passes/``), each only
when an estimator's spec reads it (``registry.host_parts``); a part that was not built is None in
the batch, and ``CreditBatch.parts`` says which were (docs/credit-implementation.md §1.1). The batch's fields and
the passes ``padded_batch`` runs follow from the table of host passes (``passes.ROWS``,
``passes.PASSES``).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Collection
from typing import NamedTuple

import numba
import numpy as np

from milegpo_jax.credit.columns import RolloutColumns
from milegpo_jax.credit.passes import ALL_PARTS, PASSES, ROWS, PassInput, padded_size, with_needed
from milegpo_jax.credit.passes.nodes import SINK, number_nodes
from milegpo_jax.credit.registry import load
from milegpo_jax.shapes import bucket_size  # re-exported: tests import it from here

__all__ = ["SINK", "BatchLayout", "CreditBatch", "bucket_size", "build_batch", "padded_batch"]


# Every pass's build, imported once here, as estimators/run.py imports the programs (one imported
# later would come from whichever checkout sys.path names then: experiments/bench/credit_versions.py).
_BUILDS = [(host_pass.name, load(host_pass.build)) for host_pass in PASSES]
_PART_FIELDS = [field.name for host_pass in PASSES for field in host_pass.fields]
_FIRST_FIELDS = [(host_pass.name, host_pass.fields[0].name) for host_pass in PASSES]  # a part is built or not


class CreditBatch(collections.namedtuple(
    "CreditBatch", [field.name for field in ROWS] + _PART_FIELDS, defaults=[None] * len(_PART_FIELDS), module=__name__,
)):
    """Padded arrays of G groups x K trajectories x T steps, N nodes and E distinct edges per group (a
    JAX pytree; under vmap a program sees one group's [K, T] / [N] / [E] arrays): a field per entry of
    ``passes.ROWS``, then per field of each host pass (``passes.PASSES``, where each field's type,
    shape and meaning are written), None where that part was not built."""

    __slots__ = ()

    @property
    def parts(self) -> frozenset[str]:
        """The host parts this batch was built with."""
        return frozenset(part for part, first in _FIRST_FIELDS if getattr(self, first) is not None)


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


def build_batch(columns: RolloutColumns, **options) -> tuple[CreditBatch, BatchLayout]:
    """The padded arrays of ``columns`` and their layout (``padded_batch``'s options)."""
    batch, layout, _ = padded_batch(columns, **options)
    return batch, layout()


def padded_batch(
    columns: RolloutColumns,
    *,
    parts: Collection[str] = ALL_PARTS,
    min_groups: int = 1,
    min_trajectories: int = 1,
    min_steps: int = 8,
    min_nodes: int = 8,
    min_edges: int = 8,
    bucket: bool = True,
) -> tuple[CreditBatch, Callable[[], BatchLayout], np.ndarray]:
    """The padded arrays with the host ``parts`` (and those they need), a function that makes their
    ``BatchLayout`` (Python tuples of names and lengths, which a caller that only needs per-step values
    never builds) and the place of every step in the flattened [G, K, T] arrays, in the steps'
    (trajectory-major) order. ``bucket=False`` pads only to the largest size; the minima fix a floor,
    so that a caller can keep one shape across batches; E is sized by the edge pass, and a batch
    without the edges has no [G, E] field.

    The rows first, then the pass of each part in the table's order (``passes.PASSES``), each given
    the fields built so far. Compiled passes (numba) over the steps, one per part: at the paper's batch size the equivalent
    numpy spent most of its time in the overhead of some hundred small calls (docs/credit-implementation.md §1.1)."""
    parts = with_needed(parts)
    lengths = np.asarray(columns.lengths, np.int64)
    group_sizes = np.asarray(columns.group_sizes, np.int64)
    reward = np.asarray(columns.reward, np.float64)
    nodes = number_nodes(
        np.asarray(columns.state, np.int64), np.asarray(columns.next_state, np.int64),
        np.asarray(columns.action, np.int64), reward, lengths, group_sizes,
    )
    sizes = (len(group_sizes), int(group_sizes.max()), int(lengths.max()), int(nodes.states_per_group.max()) + 1)
    minima = (min_groups, min_trajectories, min_steps, min_nodes)
    G, K, T, N = (padded_size(s, m, bucket) for s, m in zip(sizes, minima))
    rows = _pad_rows(
        nodes.src, nodes.dst, nodes.action, reward, np.asarray(columns.valid, np.bool_),
        np.asarray(columns.milestone, np.int8), nodes.succeeded, lengths, group_sizes, nodes.states_per_group,
        G, K, T, N,
    )
    fields = rows._asdict()
    place = fields.pop("place")
    # one dict: each pass sees the fields of the passes before it
    given = PassInput(fields, (G, K, T, N), lengths, group_sizes, nodes, place, bucket, min_edges)
    for part, build in _BUILDS:  # in the table's order: a part after those it needs
        if part in parts:
            fields.update(build(given))
    batch = CreditBatch(**fields)

    def layout() -> BatchLayout:
        ordered_names = list(map(columns.state_names.__getitem__, nodes.state_codes.tolist()))
        node_ends = np.cumsum(nodes.states_per_group).tolist()
        node_names = tuple(
            ("success", *ordered_names[begin:end]) for begin, end in zip([0, *node_ends[:-1]], node_ends)
        )
        steps_of, group_ends = lengths.tolist(), np.cumsum(group_sizes).tolist()
        steps = tuple(tuple(steps_of[begin:end]) for begin, end in zip([0, *group_ends[:-1]], group_ends))
        return BatchLayout(steps, node_names)

    return batch, layout, place


class PaddedRows(NamedTuple):
    """What ``_pad_rows`` returns: the fields every batch has, and each step's place."""

    src: np.ndarray
    dst: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    valid: np.ndarray
    step_mask: np.ndarray
    milestone: np.ndarray
    traj_mask: np.ndarray
    last_state: np.ndarray
    node_mask: np.ndarray
    place: np.ndarray  # int64 [S] flat index of each step in [G, K, T]


@numba.njit(cache=True)
def _pad_rows(src, dst, action, reward, valid, milestone, succeeded, lengths, group_sizes, states_per_group, G, K, T, N):
    """The padded arrays of the steps."""
    padded_src, padded_dst = np.zeros((G, K, T), np.int32), np.zeros((G, K, T), np.int32)
    padded_action, rewards = np.zeros((G, K, T), np.int32), np.zeros((G, K, T), np.float32)
    padded_valid, step_mask = np.zeros((G, K, T), np.bool_), np.zeros((G, K, T), np.bool_)
    padded_milestone = np.zeros((G, K, T), np.bool_)
    traj_mask, last_state = np.zeros((G, K), np.bool_), np.zeros((G, K), np.int32)
    node_mask = np.zeros((G, N), np.bool_)
    place = np.empty(len(src), np.int64)
    step, trajectory = 0, 0
    for g in range(len(group_sizes)):
        for k in range(group_sizes[g]):
            for t in range(lengths[trajectory]):
                s = step + t
                padded_src[g, k, t], padded_dst[g, k, t], padded_action[g, k, t] = src[s], dst[s], action[s]
                rewards[g, k, t] = reward[s]  # float64 -> float32, rounded
                padded_valid[g, k, t], step_mask[g, k, t] = valid[s], True
                padded_milestone[g, k, t] = milestone[s] == 1  # unrecorded (-1) -> False
                place[s] = (g * K + k) * T + t
            step += lengths[trajectory]
            traj_mask[g, k], last_state[g, k] = True, dst[step - 1]
            node_mask[g, SINK] |= succeeded[trajectory]
            trajectory += 1
        node_mask[g, 1 : states_per_group[g] + 1] = True
    return PaddedRows(
        src=padded_src, dst=padded_dst, action=padded_action, reward=rewards, valid=padded_valid, step_mask=step_mask,
        milestone=padded_milestone, traj_mask=traj_mask, last_state=last_state, node_mask=node_mask, place=place,
    )

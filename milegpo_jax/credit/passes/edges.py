"""Edge numbering (docs/credit-implementation.md §1.1): each group's distinct transitions (u, v) 0, 1, ... in order
of first use, and whether a step is its trajectory's first use of its edge. Read by the programs
through the spec's ``edges`` and needed by the hops pass. The pass adds the batch's size E, the
most distinct edges of a group, padded like the other sizes.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from milegpo_jax.credit.passes import PassInput, padded_size
from milegpo_jax.credit.passes.table import clear, largest_group_steps, pair_id, pair_table


class EdgeNumbering(NamedTuple):
    edge: np.ndarray  # int32 [S] the step's edge id within its group
    first_use: np.ndarray  # bool [S] the step is its trajectory's first use of that edge
    edge_src: np.ndarray  # int32 [sum of edges_per_group] u of each group's edges, in id order
    edge_dst: np.ndarray  # int32 [...] v
    edges_per_group: np.ndarray  # int64 [groups]


@numba.njit(cache=True)
def number_edges(src, dst, lengths, group_sizes) -> EdgeNumbering:
    """The edges of the node ids ``src`` -> ``dst`` of every step (trajectory-major)."""
    steps = len(src)
    edge, first_use = np.empty(steps, np.int32), np.zeros(steps, np.bool_)
    edge_src, edge_dst = np.empty(steps, np.int32), np.empty(steps, np.int32)
    edges_per_group = np.zeros(len(group_sizes), np.int64)
    keys, ids, filled = pair_table(largest_group_steps(lengths, group_sizes))
    last_user = np.empty(steps, np.int64)  # per numbered edge: the last trajectory that used it
    step, trajectory, numbered = 0, 0, 0
    for g in range(len(group_sizes)):
        count = 0
        for _ in range(group_sizes[g]):
            for s in range(step, step + lengths[trajectory]):
                e, after = pair_id(keys, ids, filled, count, src[s], dst[s])
                if after > count:  # a new edge
                    edge_src[numbered + e], edge_dst[numbered + e] = src[s], dst[s]
                    last_user[numbered + e] = -1
                    count = after
                edge[s] = e
                first_use[s] = last_user[numbered + e] != trajectory
                last_user[numbered + e] = trajectory
            step += lengths[trajectory]
            trajectory += 1
        clear(keys, filled, count)
        edges_per_group[g] = count
        numbered += count
    return EdgeNumbering(
        edge=edge, first_use=first_use, edge_src=edge_src[:numbered], edge_dst=edge_dst[:numbered],
        edges_per_group=edges_per_group,
    )


def build(given: PassInput) -> dict[str, np.ndarray]:
    """The "edges" fields (``passes.PASSES``)."""
    nodes = given.nodes
    numbered = number_edges(nodes.src, nodes.dst, given.lengths, given.group_sizes)
    E = padded_size(int(numbered.edges_per_group.max()), given.min_edges, given.bucket)
    G, K, T, _ = given.shape
    return _pad_edges(
        numbered.edge, numbered.first_use, numbered.edge_src, numbered.edge_dst, numbered.edges_per_group,
        given.place, G, K, T, E,
    )._asdict()


class EdgeFields(NamedTuple):
    """What ``_pad_edges`` returns: the batch's "edges" fields."""

    edge: np.ndarray
    first_use: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_mask: np.ndarray


@numba.njit(cache=True)
def _pad_edges(edge, first_use, edge_src, edge_dst, edges_per_group, place, G, K, T, E):
    """The padded "edges" fields of the numbered edges (padded rows: edge id E, a spare slot)."""
    padded_edge = np.full(G * K * T, E, np.int32)
    padded_first_use = np.zeros(G * K * T, np.bool_)
    for s in range(len(place)):
        padded_edge[place[s]], padded_first_use[place[s]] = edge[s], first_use[s]
    ends_src, ends_dst = np.zeros((G, E), np.int32), np.zeros((G, E), np.int32)
    edge_mask = np.zeros((G, E), np.bool_)
    numbered = 0
    for g in range(len(edges_per_group)):
        for e in range(edges_per_group[g]):
            ends_src[g, e], ends_dst[g, e], edge_mask[g, e] = edge_src[numbered], edge_dst[numbered], True
            numbered += 1
    return EdgeFields(
        edge=padded_edge.reshape(G, K, T), first_use=padded_first_use.reshape(G, K, T), edge_src=ends_src,
        edge_dst=ends_dst, edge_mask=edge_mask,
    )

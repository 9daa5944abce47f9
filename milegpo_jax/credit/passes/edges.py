"""Edge numbering (docs/credit.md §10.1): each group's distinct transitions (u, v) 0, 1, ... in order
of first use, and whether a step is its trajectory's first use of its edge. Read by the programs
through the spec's ``edges`` and needed by the hops pass.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

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

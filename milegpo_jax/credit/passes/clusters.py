"""Row clusters beyond the anchor (docs/credit.md §10.1), read through the spec's ``clusters``.

Each is a cluster id < K·T within the group (K·T where the row has no key), numbered 0, 1, ... in row
order: ECPO's (s_t, action) pairs, every invalid step one action; HGPO's order-2 and order-3 history
keys (s_{t-1}, s_t) and (s_{t-2}, s_{t-1}, s_t), the latter named as (order-2 id of the row before,
s_t); and ProGPO's first visits: s_{t+1} is none of s_0..s_t of the trajectory.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from milegpo_jax.credit.passes.table import clear, largest_group_steps, pair_id, pair_table


class RowClusters(NamedTuple):
    state_action: np.ndarray  # int32 [G, K, T] ECPO's (s_t, action or "invalid") cluster
    history2: np.ndarray  # int32 [G, K, T] HGPO's (s_{t-1}, s_t); K·T where t = 0
    history3: np.ndarray  # int32 [G, K, T] HGPO's (s_{t-2}, s_{t-1}, s_t); K·T where t < 2
    first_visit: np.ndarray  # bool [G, K, T] s_{t+1} is none of s_0..s_t of the trajectory


@numba.njit(cache=True)
def row_clusters(src, dst, action, valid, lengths, group_sizes, num_nodes) -> RowClusters:
    """The clusters of the padded steps (``src``, ``dst``, ``action``, ``valid`` [G, K, T])."""
    G, K, T = src.shape
    state_action = np.full((G, K, T), K * T, np.int32)
    history2, history3 = state_action.copy(), state_action.copy()
    first_visit = np.zeros((G, K, T), np.bool_)
    most = largest_group_steps(lengths, group_sizes)
    pairs, histories2, histories3 = pair_table(most), pair_table(most), pair_table(most)
    seen_by = np.full(num_nodes, -1, np.int64)  # per node: the last trajectory (run) that had it as s_t
    trajectory, run = 0, 0
    for g in range(len(group_sizes)):
        counts = np.zeros(3, np.int64)
        for k in range(group_sizes[g]):
            run += 1
            for t in range(lengths[trajectory]):
                here = src[g, k, t]
                seen_by[here] = run
                first_visit[g, k, t] = seen_by[dst[g, k, t]] != run
                chosen = action[g, k, t] + 1 if valid[g, k, t] else 0
                state_action[g, k, t], counts[0] = pair_id(*pairs, counts[0], chosen, here)
                if t >= 1:
                    history2[g, k, t], counts[1] = pair_id(*histories2, counts[1], src[g, k, t - 1], here)
                if t >= 2:
                    history3[g, k, t], counts[2] = pair_id(*histories3, counts[2], history2[g, k, t - 1], here)
            trajectory += 1
        clear(pairs[0], pairs[2], counts[0])
        clear(histories2[0], histories2[2], counts[1])
        clear(histories3[0], histories3[2], counts[2])
    return RowClusters(state_action=state_action, history2=history2, history3=history3, first_visit=first_visit)

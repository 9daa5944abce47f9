"""Row clusters beyond the anchor (docs/credit-implementation.md §1.1), read through the spec's ``clusters``.

Each is a cluster id < K·T within the group (K·T where the row has no key), numbered 0, 1, ... in row
order: ECPO's (s_t, action) pairs, every invalid step one action; HGPO's order-2 and order-3 history
keys (s_{t-1}, s_t) and (s_{t-2}, s_{t-1}, s_t), the latter named as (order-2 id of the row before,
s_t); and ProGPO's first visits: s_{t+1} is none of s_0..s_t of the trajectory.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from milegpo_jax.credit.passes import PassInput
from milegpo_jax.credit.passes.table import EMPTY, FIBONACCI, largest_group_steps


class RowClusters(NamedTuple):
    state_action: np.ndarray  # int32 [G, K, T] ECPO's (s_t, action or "invalid") cluster
    history2: np.ndarray  # int32 [G, K, T] HGPO's (s_{t-1}, s_t); K·T where t = 0
    history3: np.ndarray  # int32 [G, K, T] HGPO's (s_{t-2}, s_{t-1}, s_t); K·T where t < 2
    first_visit: np.ndarray  # bool [G, K, T] s_{t+1} is none of s_0..s_t of the trajectory


def build(given: PassInput) -> dict[str, np.ndarray]:
    """The "clusters" fields (``passes.PASSES``)."""
    f = given.fields
    return row_clusters(f["src"], f["dst"], f["action"], f["valid"], given.lengths, given.group_sizes, given.shape[3])._asdict()


@numba.njit(cache=True)
def row_clusters(src, dst, action, valid, lengths, group_sizes, num_nodes) -> RowClusters:
    """The clusters of the padded steps (``src``, ``dst``, ``action``, ``valid`` [G, K, T]).

    The three kinds share one open-addressing table per group, keyed by (kind, a, s_t) packed into
    one int64 (kind in bits 60-61, a in bits 30-59, s_t below), probed inline: measured several
    times faster than three tables behind a look-up function (``table.py``), which this hot loop
    (three keys per row) cannot afford."""
    G, K, T = src.shape
    clusters = np.full((3, G, K, T), K * T, np.int32)  # state_action, history2, history3
    first_visit = np.zeros((G, K, T), np.bool_)
    slots = 2
    while slots < 8 * largest_group_steps(lengths, group_sizes):  # three keys per row: under half full
        slots *= 2
    keys, ids = np.full(slots, EMPTY, np.int64), np.empty(slots, np.int32)
    used = np.empty(slots, np.int64)
    counts = np.zeros(3, np.int32)
    seen_by = np.full(num_nodes, -1, np.int64)  # per node: the last trajectory (run) that had it as s_t
    trajectory, run = 0, 0
    for g in range(len(group_sizes)):
        filled = 0
        counts[:] = 0
        for k in range(group_sizes[g]):
            run += 1
            for t in range(lengths[trajectory]):
                here = src[g, k, t]
                seen_by[here] = run
                first_visit[g, k, t] = seen_by[dst[g, k, t]] != run
                for kind in range(min(t, 2) + 1):  # (kind, key's first part): a pair, then the two histories
                    if kind == 0:
                        first = action[g, k, t] + 1 if valid[g, k, t] else 0
                    else:
                        first = src[g, k, t - 1] if kind == 1 else clusters[1, g, k, t - 1]
                    key = (np.int64(kind) << 60) | (np.int64(first) << 30) | np.int64(here)
                    slot = ((key * FIBONACCI) >> 40) & (slots - 1)
                    while keys[slot] != EMPTY and keys[slot] != key:
                        slot = (slot + 1) & (slots - 1)
                    if keys[slot] == EMPTY:
                        keys[slot], ids[slot] = key, counts[kind]
                        counts[kind] += 1
                        used[filled] = slot
                        filled += 1
                    clusters[kind, g, k, t] = ids[slot]
            trajectory += 1
        for i in range(filled):
            keys[used[i]] = EMPTY
    return RowClusters(state_action=clusters[0], history2=clusters[1], history3=clusters[2], first_visit=first_visit)

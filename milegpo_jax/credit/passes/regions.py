"""MVPO's loop-body regions (M1 of docs/credit-family.md, docs/credit-implementation.md §1.1), read through the
spec's ``regions``.

In the state sequence s_0..s_L of each trajectory, transition u -> u+1 lies in a loop body when some
revisit at a later position p > u has its state's first visit at or before u (the union of the
bodies between consecutive visits of a state equals the union of the spans from its first visit to
each later one). The states of every such transition are joined in a union-find whose root is always
the smaller id, so each set is named by its least node id, as the program's min-label propagation
named it.
"""

from __future__ import annotations

import numba
import numpy as np

from milegpo_jax.credit.passes import PassInput


def build(given: PassInput) -> dict[str, np.ndarray]:
    """The "regions" field (``passes.PASSES``)."""
    fields = given.fields
    return {"region": loop_regions(fields["src"], fields["last_state"], given.lengths, given.group_sizes, given.shape[3])}


@numba.njit(cache=True)
def loop_regions(src, last_state, lengths, group_sizes, num_nodes):
    """int32 [G, N] each node's region (the least node id of its set), from the padded node ids of the
    steps ``src`` [G, K, T] and the trajectories' last next states ``last_state`` [G, K]."""
    G, _, T = src.shape
    region = np.empty((G, num_nodes), np.int32)
    first = np.full(num_nodes, -1, np.int64)  # first position of each node in the current state sequence
    loop_start = np.empty(T + 1, np.int64)
    stamp, run = np.full(num_nodes, -1, np.int64), 0  # the last run of covered transitions that joined each node
    trajectory = 0
    for g in range(G):
        parent = region[g]
        for v in range(num_nodes):
            parent[v] = v
        trajectories = group_sizes[g] if g < len(group_sizes) else 0
        for k in range(trajectories):
            length = lengths[trajectory + k]
            for p in range(length + 1):  # s_p is src of step p, and s_length the last next state
                v = src[g, k, p] if p < length else last_state[g, k]
                loop_start[p] = first[v] if first[v] >= 0 else T + 1  # a revisit: its body starts there
                if first[v] < 0:
                    first[v] = p
            # Descending u, a run of covered transitions joins s_u..s_(run's end) into one set: its
            # root is ``joined``, and a state already joined in this run (``stamp``) needs no look-up.
            earliest, joined = T + 1, -1  # the least loop-body start after u
            for u in range(length - 1, -1, -1):
                earliest = min(earliest, loop_start[u + 1])
                if earliest > u:
                    joined = -1
                    continue
                if joined < 0:
                    run += 1
                    v = src[g, k, u + 1] if u + 1 < length else last_state[g, k]
                    joined, stamp[v] = _root(parent, v), run
                v = src[g, k, u]
                if stamp[v] != run:
                    stamp[v] = run
                    a = _root(parent, v)
                    parent[max(a, joined)] = min(a, joined)
                    joined = min(a, joined)
            for p in range(length):
                first[src[g, k, p]] = -1
            first[last_state[g, k]] = -1
        for v in range(num_nodes):
            parent[v] = _root(parent, v)
        trajectory += trajectories
    return region


@numba.njit(cache=True)
def _root(parent, v):
    """The root of ``v``'s set, halving the path on the way."""
    while parent[v] != v:
        parent[v] = parent[parent[v]]
        v = parent[v]
    return v

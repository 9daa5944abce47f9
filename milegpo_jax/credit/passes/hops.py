"""Hops to the sink (docs/credit-implementation.md §1.1): a breadth-first search from the sink along each group's
distinct edges reversed, in linear time where the program took fixpoint rounds; -1 where the sink is
unreachable or the group has no success. Read through the spec's ``hops``; built from the edges.
"""

from __future__ import annotations

import numba
import numpy as np

from milegpo_jax.credit.passes import PassInput
from milegpo_jax.credit.passes.nodes import SINK


def build(given: PassInput) -> dict[str, np.ndarray]:
    """The "hops" field (``passes.PASSES``), from the padded edges."""
    fields = given.fields
    has_sink = fields["node_mask"][:, SINK]
    return {"sink_hops": sink_hops(fields["edge_src"], fields["edge_dst"], fields["edge_mask"], has_sink, given.shape[3])}


@numba.njit(cache=True)
def sink_hops(edge_src, edge_dst, edge_mask, has_sink, num_nodes):
    """int32 [G, N] hops from each node to the sink, from the padded edge lists [G, E] and whether
    each group has a success (``has_sink`` [G])."""
    G, E = edge_mask.shape
    hops = np.full((G, num_nodes), -1, np.int32)
    into_start = np.empty(num_nodes + 1, np.int64)  # reversed adjacency of the group's edges, by destination
    into = np.empty(E, np.int32)
    queue = np.empty(num_nodes, np.int32)
    for g in range(G):
        if not has_sink[g]:
            continue
        into_start[:] = 0
        for e in range(E):
            if edge_mask[g, e]:
                into_start[edge_dst[g, e] + 1] += 1
        for v in range(num_nodes):
            into_start[v + 1] += into_start[v]
        for e in range(E):
            if edge_mask[g, e]:
                v = edge_dst[g, e]
                into[into_start[v]] = edge_src[g, e]
                into_start[v] += 1
        for v in range(num_nodes - 1, -1, -1):  # the fill advanced every start to the next one's
            into_start[v + 1] = into_start[v]
        into_start[0] = 0
        hops[g, SINK], queue[0], head, tail = 0, SINK, 0, 1
        while head < tail:
            v = queue[head]
            head += 1
            for i in range(into_start[v], into_start[v + 1]):
                u = into[i]
                if hops[g, u] < 0:
                    hops[g, u] = hops[g, v] + 1
                    queue[tail] = u
                    tail += 1
    return hops

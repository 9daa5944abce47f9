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

import numba
import numpy as np

from milegpo_jax.credit.columns import RolloutColumns, columns_from_groups
from milegpo_jax.credit.rollouts import Group
from milegpo_jax.shapes import bucket_size

SINK = 0  # node id of the success sink in every group


class CreditBatch(NamedTuple):
    """Padded arrays; G groups x K trajectories x T steps, N nodes and E distinct edges per group (a
    JAX pytree). Fields of one type and shape share one array, so that a call hands XLA 8 arrays
    rather than 17 (each argument has a fixed cost per call); the properties name their planes. The
    node planes are structure of the graph alone, found on the host (docs/credit.md §10.1).
    Indexing from the end, so they hold for one group ([P, K, T] planes, as under vmap) as well."""

    step_ints: np.ndarray  # int32 [G, 7, K, T]: src, dst, action, edge, state_action, history2, history3
    step_flags: np.ndarray  # bool [G, 5, K, T]: valid, step_mask, milestone, first_use, first_visit
    # (without the row clusters, 4 planes each: the last three int planes and first_visit absent)
    reward: np.ndarray  # float32 [G, K, T] env reward of the step
    traj_mask: np.ndarray  # bool [G, K] real trajectory
    last_state: np.ndarray  # int32 [G, K] s_T: next state of the trajectory's last step
    node_ints: np.ndarray  # int32 [G, 3, N]: real node (1/0), hops to the sink, MVPO region
    edge_ends: np.ndarray  # int32 [G, 2, E]: edge_src, edge_dst
    edge_mask: np.ndarray  # bool [G, E] real edge

    @property
    def src(self):  # int32 [G, K, T] node id of s_t
        return self.step_ints[..., 0, :, :]

    @property
    def dst(self):  # int32 [G, K, T] node id of s_{t+1} (SINK on a successful final step)
        return self.step_ints[..., 1, :, :]

    @property
    def action(self):  # int32 [G, K, T] per-group action id (diagnostics only)
        return self.step_ints[..., 2, :, :]

    @property
    def edge(self):  # int32 [G, K, T] the step's edge id (E on padded rows; docs/credit.md §10.1)
        return self.step_ints[..., 3, :, :]

    @property
    def state_action(self):  # int32 [G, K, T] ECPO's (s_t, action or "invalid") cluster id; K·T on padded rows
        return self.step_ints[..., 4, :, :]

    @property
    def history2(self):  # int32 [G, K, T] HGPO's order-2 history id (s_{t-1}, s_t); K·T where t = 0 or padded
        return self.step_ints[..., 5, :, :]

    @property
    def history3(self):  # int32 [G, K, T] HGPO's order-3 history id (s_{t-2}, s_{t-1}, s_t); K·T where t < 2
        return self.step_ints[..., 6, :, :]

    @property
    def valid(self):  # bool [G, K, T] format validity of the response
        return self.step_flags[..., 0, :, :]

    @property
    def step_mask(self):  # bool [G, K, T] real step
        return self.step_flags[..., 1, :, :]

    @property
    def milestone(self):  # bool [G, K, T] the step completes the next env milestone (BEACON; False if unrecorded)
        return self.step_flags[..., 2, :, :]

    @property
    def first_use(self):  # bool [G, K, T] the step is its trajectory's first use of its edge
        return self.step_flags[..., 3, :, :]

    @property
    def first_visit(self):  # bool [G, K, T] s_{t+1} is none of s_0..s_t of the trajectory (ProGPO's novelty)
        return self.step_flags[..., 4, :, :]

    @property
    def node_mask(self):  # bool [G, N] real node (the sink only if the group has a success)
        return self.node_ints[..., 0, :] != 0

    @property
    def sink_hops(self):  # int32 [G, N] hops from each node to the sink; -1 if unreachable or no success
        return self.node_ints[..., 1, :]

    @property
    def region(self):  # int32 [G, N] MVPO's loop-body region: the least node id of the node's set
        return self.node_ints[..., 2, :]

    @property
    def edge_src(self):  # int32 [G, E] node id of each distinct edge's u (0 on padded edges)
        return self.edge_ends[..., 0, :]

    @property
    def edge_dst(self):  # int32 [G, E] node id of each distinct edge's v
        return self.edge_ends[..., 1, :]

    # What the host built (``padded_batch``'s with_graph / with_row_clusters): this class alone knows
    # how an absent part shows in the planes.
    @property
    def has_graph(self) -> bool:  # distinct edges, hops to the sink, regions (E = 0 without them)
        return self.edge_mask.shape[-1] > 0

    @property
    def has_row_clusters(self) -> bool:  # state_action, history2/3 and first_visit planes
        return self.step_ints.shape[-3] == 7


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
    min_edges: int = 8,
    bucket: bool = True,
    with_graph: bool = True,
    with_row_clusters: bool = True,
) -> tuple[CreditBatch, Callable[[], BatchLayout], np.ndarray]:
    """The padded arrays, a function that makes their ``BatchLayout`` (Python tuples of names and
    lengths, which a caller that only needs per-step values never builds) and the place of every step
    in the flattened [G, K, T] arrays, in the steps' (trajectory-major) order. ``bucket=False`` pads
    only to the largest size; the minima fix a floor, so that a caller can keep one shape across batches.
    ``with_graph=False`` leaves out the graph structure: no edges numbered (E = 0, edge ids 0, no first
    uses), no hops to the sink and no regions (node planes 1 and 2 are 0): for callers whose programs
    read none of it (``registry.batch_structure``), which saves the host that work.
    ``with_row_clusters=False`` likewise leaves out the row clusters of HGPO, ECPO and ProGPO:
    ``step_ints`` and ``step_flags`` then have 4 planes (``CreditBatch.has_graph``, ``has_row_clusters``).

    Two compiled passes over the steps (``_number_steps``, ``_fill_padded``; docs/credit.md §10.1):
    at the paper's batch size the equivalent numpy spent most of its time in the overhead of some
    hundred small calls, several times more after other work had run (cold caches)."""
    columns = rollouts if isinstance(rollouts, RolloutColumns) else columns_from_groups(rollouts)
    lengths = np.asarray(columns.lengths, np.int64)
    group_sizes = np.asarray(columns.group_sizes, np.int64)
    reward = np.asarray(columns.reward, np.float64)
    numbered = _number_steps(
        np.asarray(columns.state, np.int64), np.asarray(columns.next_state, np.int64),
        np.asarray(columns.action, np.int64), reward, lengths, group_sizes, with_graph,
    )
    nodes, action_ids, succeeded, group_nodes, ordered_codes, names_of_code, edge_ids, first_use, edge_nodes, group_edges = numbered
    sizes = (
        len(group_sizes), int(group_sizes.max()), int(lengths.max()), int(group_nodes.max()) + 1, int(group_edges.max())
    )
    minima = (min_groups, min_trajectories, min_steps, min_nodes, min_edges)
    G, K, T, N, E = (bucket_size(s, m) if bucket else max(s, m) for s, m in zip(sizes, minima))
    E = E if with_graph else 0
    *arrays, flat_row = _fill_padded(
        nodes, action_ids, reward, np.asarray(columns.valid, np.bool_), np.asarray(columns.milestone, np.int8),
        succeeded, lengths, group_sizes, group_nodes, edge_ids, first_use, edge_nodes, group_edges, G, K, T, N, E,
        with_graph, with_row_clusters,
    )
    batch = CreditBatch(*arrays)

    def layout() -> BatchLayout:
        codes = names_of_code[ordered_codes] if names_of_code.size else ordered_codes
        ordered_names = list(map(columns.state_names.__getitem__, codes.tolist()))
        node_ends = np.cumsum(group_nodes).tolist()
        node_names = tuple(
            ("success", *ordered_names[begin:end]) for begin, end in zip([0, *node_ends[:-1]], node_ends)
        )
        steps_of, group_ends = lengths.tolist(), np.cumsum(group_sizes).tolist()
        steps = tuple(tuple(steps_of[begin:end]) for begin, end in zip([0, *group_ends[:-1]], group_ends))
        return BatchLayout(steps, node_names)

    return batch, layout, flat_row


@numba.njit(cache=True)
def _dense_codes(codes, size):
    """``codes`` (``size`` of them, their own or a column's share) renumbered 0.. in sorted order if
    they are sparse, and the original of each new code (empty when the codes were kept). Only
    equality of codes matters to the batch; sparse codes (a run-long interner over a huge input) are
    renumbered so that the per-group tables of ``_number_steps`` stay small."""
    if len(codes) == 0 or codes.max() <= 4 * size + 4096:
        return codes, np.empty(0, np.int64)
    originals = np.unique(codes)
    return np.searchsorted(originals, codes).astype(np.int64), originals


@numba.njit(cache=True)
def _number_steps(state, next_state, action, reward, lengths, group_sizes, with_edges):
    """Per-group ids of docs/credit.md §1.1, one pass over the steps (trajectory-major).

    Node ids: the sink 0, then each group's states 1, 2, ... in order of first appearance in
    (s_0, s_1 of step 0, s_1, s_2 of step 1, ...) order, where the last next state of a successful
    trajectory (episode reward > 0, summed in step order) is the sink and numbers nothing. Action ids:
    0, 1, ... per group in order of first appearance. A table indexed by code holds the current
    group's ids and is cleared entry by entry before the next group. Edge ids (docs/credit.md §10.1):
    the group's distinct (u, v) node pairs 0, 1, ... in order of first use, from an open-addressing
    table keyed by the pair (sized by the largest group's steps, whatever the number of nodes; the
    slots a group filled are cleared before the next), and whether the step is its trajectory's
    first use of its edge (skipped without ``with_edges``: ids 0, no first uses). Returns (node ids
    of (s_t, s_{t+1}) interleaved [2S], action ids [S], success per trajectory, real states per
    group, the (dense) codes of all groups' states in id order, the original of each dense state
    code (empty if the codes were kept), edge id per step [S], first use per step [S], (u, v) of
    every group's edges in id order [2 * edges], edges per group)."""
    steps, groups = len(state), len(group_sizes)
    states, names_of_code = _dense_codes(np.concatenate((state, next_state)), 2 * steps)
    state, next_state = states[:steps], states[steps:]
    action = _dense_codes(action, steps)[0]
    num_codes, num_actions = states.max() + 1, action.max() + 1
    nodes = np.empty(2 * steps, np.int32)
    action_ids = np.empty(steps, np.int32)
    succeeded = np.zeros(len(lengths), np.bool_)
    group_nodes = np.zeros(groups, np.int64)
    ordered = np.empty(2 * steps, np.int64)
    node_of = np.full(num_codes, -1, np.int32)
    action_of = np.full(num_actions, -1, np.int32)
    group_actions = np.empty(steps, np.int64)
    edge_ids, first_use = np.zeros(steps, np.int32), np.zeros(steps, np.bool_)
    edge_nodes, group_edges = np.empty(2 * steps, np.int32), np.zeros(groups, np.int64)
    slots = _edge_table_slots(lengths, group_sizes) if with_edges else 1  # no table to fill without edges
    keys, ids = np.full(slots, -1, np.int64), np.empty(slots, np.int32)
    slot_of = np.empty(steps if with_edges else 0, np.int32)  # per numbered edge: its slot in the table
    last_user = np.full(steps if with_edges else 0, -1, np.int32)  # per numbered edge: its last trajectory
    step, trajectory, numbered, edges_numbered = 0, 0, 0, 0
    for g in range(groups):
        first_of_group, count, action_count = numbered, 0, 0
        first_edge, edge_count = edges_numbered, 0
        for _ in range(group_sizes[g]):
            end = step + lengths[trajectory]
            total = 0.0
            for s in range(step, end):
                total += reward[s]
            success = total > 0.0
            succeeded[trajectory] = success
            for s in range(step, end):
                for side in range(2):
                    if side == 1 and success and s == end - 1:
                        nodes[2 * s + 1] = SINK
                        continue
                    code = state[s] if side == 0 else next_state[s]
                    if node_of[code] < 0:
                        count += 1
                        node_of[code] = count
                        ordered[numbered] = code
                        numbered += 1
                    nodes[2 * s + side] = node_of[code]
                a = action[s]
                if action_of[a] < 0:
                    action_of[a] = action_count
                    group_actions[action_count] = a
                    action_count += 1
                action_ids[s] = action_of[a]
                if not with_edges:
                    continue
                key = (np.int64(nodes[2 * s]) << 32) | nodes[2 * s + 1]
                slot = (key * 0x9E3779B1) & (slots - 1)
                while keys[slot] != -1 and keys[slot] != key:
                    slot = (slot + 1) & (slots - 1)
                if keys[slot] == -1:
                    keys[slot], ids[slot], slot_of[edges_numbered] = key, edge_count, slot
                    edge_nodes[2 * edges_numbered], edge_nodes[2 * edges_numbered + 1] = nodes[2 * s], nodes[2 * s + 1]
                    edge_count += 1
                    edges_numbered += 1
                edge_ids[s] = ids[slot]
                first_use[s] = last_user[first_edge + ids[slot]] != trajectory
                last_user[first_edge + ids[slot]] = trajectory
            step = end
            trajectory += 1
        for i in range(first_of_group, numbered):
            node_of[ordered[i]] = -1
        for i in range(action_count):
            action_of[group_actions[i]] = -1
        for i in range(first_edge, edges_numbered):
            keys[slot_of[i]] = -1
        group_nodes[g], group_edges[g] = count, edge_count
    return (nodes, action_ids, succeeded, group_nodes, ordered[:numbered], names_of_code,
            edge_ids, first_use, edge_nodes[: 2 * edges_numbered], group_edges)


@numba.njit(cache=True)
def _edge_table_slots(lengths, group_sizes):
    """A power of two of at least twice the largest group's steps (the edge table stays sparse)."""
    largest, trajectory = 1, 0
    for g in range(len(group_sizes)):
        count = 0
        for _ in range(group_sizes[g]):
            count += lengths[trajectory]
            trajectory += 1
        largest = max(largest, count)
    slots = 1
    while slots < 2 * largest:
        slots *= 2
    return slots


@numba.njit(cache=True)
def _fill_padded(
    nodes, action_ids, reward, valid, milestone, succeeded, lengths, group_sizes, group_nodes,
    edge_ids, first_use, edge_nodes, group_edges, G, K, T, N, E, with_graph, with_row_clusters,
):
    """The ``CreditBatch`` fields in order, and each step's place in the flattened [G, K, T] arrays."""
    ints = np.zeros((G, 7 if with_row_clusters else 4, K, T), np.int32)  # src, dst, action, edge[, clusters]
    ints[:, 3] = E  # padded rows: the spare edge slot
    ints[:, 4:] = K * T  # rows without a key: the clusters' spare slot
    flags = np.zeros((G, 5 if with_row_clusters else 4, K, T), np.bool_)  # valid, step_mask, milestone, first_use[, first_visit]
    rewards = np.zeros((G, K, T), np.float32)
    traj_mask = np.zeros((G, K), np.bool_)
    last_state = np.zeros((G, K), np.int32)
    node_ints = np.zeros((G, 3, N), np.int32)  # real node, hops to the sink, region
    edge_ends = np.zeros((G, 2, E), np.int32)
    edge_mask = np.zeros((G, E), np.bool_)
    place = np.empty(len(action_ids), np.int64)
    step, trajectory, numbered = 0, 0, 0
    for g in range(len(group_sizes)):
        for k in range(group_sizes[g]):
            for t in range(lengths[trajectory]):
                s = step + t
                ints[g, 0, k, t], ints[g, 1, k, t] = nodes[2 * s], nodes[2 * s + 1]
                ints[g, 2, k, t], ints[g, 3, k, t] = action_ids[s], edge_ids[s]
                rewards[g, k, t] = reward[s]  # float64 -> float32, rounded
                flags[g, 0, k, t], flags[g, 1, k, t] = valid[s], True
                flags[g, 2, k, t], flags[g, 3, k, t] = milestone[s] == 1, first_use[s]  # unrecorded (-1) -> False
                place[s] = (g * K + k) * T + t
            step += lengths[trajectory]
            traj_mask[g, k], last_state[g, k] = True, nodes[2 * step - 1]
            node_ints[g, 0, SINK] |= succeeded[trajectory]
            trajectory += 1
        node_ints[g, 0, 1 : group_nodes[g] + 1] = 1
        for e in range(group_edges[g]):
            edge_ends[g, 0, e], edge_ends[g, 1, e] = edge_nodes[2 * numbered], edge_nodes[2 * numbered + 1]
            edge_mask[g, e] = True
            numbered += 1
    if with_graph:
        _node_structure(ints, last_state, node_ints, edge_ends, edge_mask, lengths, group_sizes)
    if with_row_clusters:
        _row_structure(ints, flags, lengths, group_sizes, N)
    return ints, flags, rewards, traj_mask, last_state, node_ints, edge_ends, edge_mask, place


@numba.njit(cache=True)
def _node_structure(ints, last_state, node_ints, edge_ends, edge_mask, lengths, group_sizes):
    """Fills planes 1 and 2 of ``node_ints``: the graph structure that no option changes, found here
    in linear time rather than by fixpoint rounds in the program (docs/credit.md §10.1).

    Hops to the sink: a breadth-first search from the sink (in a group with a success) along the
    group's distinct edges reversed; -1 where the sink is unreachable. Regions (MVPO, M1 of
    docs/credit-family.md): in the state sequence s_0..s_L of each trajectory, transition u -> u+1
    lies in a loop body when some revisit at a later position p > u has its state's first visit at
    or before u (the union of the bodies between consecutive visits of a state equals the union of
    the spans from its first visit to each later one); union-find over those transitions, each set
    named by its least node id (the root is always the smaller id)."""
    G, _, K, T = ints.shape
    N, E = node_ints.shape[2], edge_mask.shape[1]
    into_start = np.empty(N + 1, np.int64)  # reversed adjacency of the group's edges, by destination
    into = np.empty(E, np.int32)
    queue = np.empty(N, np.int32)
    first = np.full(N, -1, np.int64)  # first position of each node in the current state sequence
    loop_start = np.empty(T + 1, np.int64)
    stamp, run = np.full(N, -1, np.int64), 0  # the last run of covered transitions that joined each node
    trajectory = 0
    for g in range(G):
        hops, region = node_ints[g, 1], node_ints[g, 2]
        hops[:] = -1
        for v in range(N):
            region[v] = v
        sizes = group_sizes[g] if g < len(group_sizes) else 0
        into_start[:] = 0
        for e in range(E):
            if edge_mask[g, e]:
                into_start[edge_ends[g, 1, e] + 1] += 1
        for v in range(N):
            into_start[v + 1] += into_start[v]
        for e in range(E):
            if edge_mask[g, e]:
                v = edge_ends[g, 1, e]
                into[into_start[v]] = edge_ends[g, 0, e]
                into_start[v] += 1
        for v in range(N - 1, -1, -1):  # the fill advanced every start to the next one's
            into_start[v + 1] = into_start[v]
        into_start[0] = 0
        if node_ints[g, 0, SINK]:
            hops[SINK], queue[0], head, tail = 0, SINK, 0, 1
            while head < tail:
                v = queue[head]
                head += 1
                for i in range(into_start[v], into_start[v + 1]):
                    u = into[i]
                    if hops[u] < 0:
                        hops[u] = hops[v] + 1
                        queue[tail] = u
                        tail += 1
        for k in range(sizes):  # p <= length: s_p is src of step p, and s_length the last next state
            length = lengths[trajectory + k]
            for p in range(length + 1):
                v = ints[g, 0, k, p] if p < length else last_state[g, k]
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
                    v = ints[g, 0, k, u + 1] if u + 1 < length else last_state[g, k]
                    joined, stamp[v] = _root(region, v), run
                v = ints[g, 0, k, u]
                if stamp[v] != run:
                    stamp[v] = run
                    a = _root(region, v)
                    region[max(a, joined)] = min(a, joined)
                    joined = min(a, joined)
            for p in range(length):
                first[ints[g, 0, k, p]] = -1
            first[last_state[g, k]] = -1
        for v in range(N):
            region[v] = _root(region, v)
        trajectory += sizes


@numba.njit(cache=True)
def _root(parent, v):
    """The root of ``v``'s set, halving the path on the way."""
    while parent[v] != v:
        parent[v] = parent[parent[v]]
        v = parent[v]
    return v


@numba.njit(cache=True)
def _row_structure(ints, flags, lengths, group_sizes, num_nodes):
    """Fills the row planes that name clusters of rows beyond the anchor, structure that no option
    changes (docs/credit.md §10.1), each a cluster id < K·T within the group (K·T where the row has
    no key): ECPO's (s_t, action) pairs, every invalid step one action; HGPO's order-2 and order-3
    history keys (s_{t-1}, s_t) and (s_{t-2}, s_{t-1}, s_t), the latter named as (order-2 id of
    the row before, s_t); and ProGPO's first visits: s_{t+1} is none of s_0..s_t of the trajectory.
    Ids count from 0 in order of first appearance, from one open-addressing table per group keyed
    by (kind, a, b) (the slots a group filled are cleared before the next)."""
    slots = 4 * _edge_table_slots(lengths, group_sizes)  # three keys per row: the table under half full
    keys, ids = np.full(slots, -1, np.int64), np.empty(slots, np.int32)
    used = np.empty(slots, np.int64)
    counts = np.zeros(3, np.int32)
    seen_by = np.full(num_nodes, -1, np.int64)  # per node: the last trajectory (run) that had it as s_t
    trajectory, run = 0, 0
    for g in range(len(group_sizes)):
        filled = 0
        counts[:] = 0
        src, dst, action, planes = ints[g, 0], ints[g, 1], ints[g, 2], ints[g, 4:]  # planes: pair, histories
        history2, valid, first_visit = ints[g, 5], flags[g, 0], flags[g, 4]
        for k in range(group_sizes[g]):
            run += 1
            for t in range(lengths[trajectory]):
                here = src[k, t]
                seen_by[here] = run
                first_visit[k, t] = seen_by[dst[k, t]] != run
                for kind in range(min(t, 2) + 1):  # (kind, key's first part): a pair, then the two histories
                    if kind == 0:
                        first = action[k, t] + 1 if valid[k, t] else 0
                    else:
                        first = src[k, t - 1] if kind == 1 else history2[k, t - 1]
                    key = (np.int64(kind) << 60) | (np.int64(first) << 30) | np.int64(here)
                    slot = ((key * np.int64(-7046029254386353131)) >> 40) & (slots - 1)  # Fibonacci hashing
                    while keys[slot] != -1 and keys[slot] != key:
                        slot = (slot + 1) & (slots - 1)
                    if keys[slot] == -1:
                        keys[slot], ids[slot] = key, counts[kind]
                        counts[kind] += 1
                        used[filled] = slot
                        filled += 1
                    planes[kind, k, t] = ids[slot]
            trajectory += 1
        for i in range(filled):
            keys[used[i]] = -1

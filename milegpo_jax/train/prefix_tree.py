"""Prefix trees over training rows: each shared prompt prefix placed once (pure numpy; docs/training.md §3.1).

The rows of one update mostly open with the same tokens: every step prompt starts with the chat
header, the system prompt and the instruction, and a group's rollouts share their whole first prompt.
``build_forest`` finds those shared prefixes as a forest of *shared nodes*: a node covers positions
``[start, end)`` of every row below it, its parent covers the positions before ``start``. A row is
its path of shared nodes (at most ``max_depth``) and its own *leaf*, the positions from the last
node's end to the row's end.

Only the positions before a row's first weighted one (its first response target) may be shared: the
hidden state at the last prompt position predicts the first response token, which differs per row, so
every weighted position stays in the row's leaf. The losses read only weighted positions
(``packing.Head``), so sharing leaves every loss, metric and gradient as it was: the shared positions'
keys and values are what each row would compute alone (same tokens, same positions, the same causal
context), and the gradient reaching them is the sum over the rows that read them.

``place_rows`` puts rows into packed sequences: first fit in the forest's depth-first order, a row
costing its leaf plus the nodes of its path that the sequence does not hold yet. A tree too large for
one sequence is thereby split, its shared nodes repeated in each sequence that needs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

# A shared node shorter than this saves too little to be worth a segment of its own.
MIN_SHARED = 8
# Shared nodes on one row's path: the ancestor levels the model's mask reads. On a real rollout of the
# SmolLM2 recipe (docs/results/tree-update.md) 1, 2 and 3 levels compute 1.14x, 1.26x and 2.17x fewer
# positions than the rows alone, 4 and 8 levels no fewer than 3.
MAX_DEPTH = 3
# Rows' capacities per tree-packed sequence: on that rollout 1, 2, 4 and 8 pad the update to 23k, 21k,
# 28k and 37k positions (42k real, 69k padded alone); 2 is the fewest.
TREE_SPAN = 2


@dataclasses.dataclass(frozen=True)
class PrefixForest:
    """Shared nodes (``parent``, ``start``, ``end``, and ``source``: a row holding the node's tokens),
    each row's ``path`` of shared nodes (top first), and the rows in depth-first ``order``
    (node ids also increase depth first, so a parent's id is below its children's)."""

    parent: tuple[int, ...]
    start: tuple[int, ...]
    end: tuple[int, ...]
    source: tuple[int, ...]
    paths: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]

    def node_length(self, node: int) -> int:
        return self.end[node] - self.start[node]

    def leaf_start(self, row: int) -> int:
        """The first position of ``row`` that is its own (0 with no shared node)."""
        path = self.paths[row]
        return self.end[path[-1]] if path else 0


def unshared(lengths: Sequence[int]) -> PrefixForest:
    """Every row alone, longest first: the layout of plain first-fit-decreasing packing."""
    order = np.argsort(-np.asarray(lengths, np.int64), kind="stable")
    return PrefixForest((), (), (), (), ((),) * len(lengths), tuple(int(i) for i in order))


def _common_length(prefixes: Sequence[np.ndarray], members: Sequence[int], matched: int) -> int:
    """How many tokens from ``matched`` on all ``members``' prefixes share."""
    room = min(len(prefixes[r]) for r in members) - matched
    if room <= 0:
        return 0
    stacked = np.stack([prefixes[r][matched : matched + room] for r in members])
    differs = np.any(stacked != stacked[0], axis=0)
    return int(np.argmax(differs)) if differs.any() else room


def build_forest(prefixes: Sequence[np.ndarray], lengths: Sequence[int], *, min_shared: int = MIN_SHARED,
                 max_depth: int = MAX_DEPTH) -> PrefixForest:
    """The shared nodes of rows whose shareable tokens are ``prefixes[i]`` (``lengths[i]``: the row's
    positions, which order the leaves: longest first under each node, as first-fit decreasing).

    Top down: the rows of a subtree share a node when their common tokens past the parent are at least
    ``min_shared`` long; they are then split by their next token. ``max_depth=0`` gives ``unshared``."""
    if max_depth == 0:
        return unshared(lengths)
    parent, start, end, source = [], [], [], []
    paths: list[tuple[int, ...]] = [()] * len(prefixes)
    order: list[int] = []
    # (rows, first position not yet in a node, tokens all of them share, their path so far)
    stack = [(list(range(len(prefixes))), 0, 0, ())]
    while stack:
        members, begin, matched, path = stack.pop()
        if len(members) > 1 and len(path) < max_depth:
            matched += _common_length(prefixes, members, matched)
            if matched - begin >= min_shared:
                parent.append(path[-1] if path else -1)
                start.append(begin)
                end.append(matched)
                source.append(members[0])
                path, begin = path + (len(start) - 1,), matched
            ended = [r for r in members if len(prefixes[r]) == matched]
            by_token: dict[int, list[int]] = {}
            for r in members:
                if len(prefixes[r]) > matched:
                    by_token.setdefault(int(prefixes[r][matched]), []).append(r)
            groups = sorted(by_token.values(), key=lambda g: -max(lengths[r] for r in g))
            # a group of one is a leaf here; larger groups share more below (pushed last-first)
            leaves = ended + [g[0] for g in groups if len(g) == 1]
            for group in reversed([g for g in groups if len(g) > 1]):
                stack.append((group, begin, matched + 1, path))
        else:
            leaves = members
        for r in sorted(leaves, key=lambda r: -lengths[r]):
            paths[r] = path
            order.append(r)
    return PrefixForest(tuple(parent), tuple(start), tuple(end), tuple(source), tuple(paths), tuple(order))


@dataclasses.dataclass
class Placed:
    """One packed sequence: its shared nodes (ascending, so parents first) and rows, in layout order."""

    nodes: list[int]
    rows: list[int]
    used: int = 0
    used_head: int = 0


def place_rows(forest: PrefixForest, lengths: Sequence[int], capacity: int, heads: Sequence[int] | None = None,
               head_width: int | None = None) -> list[Placed]:
    """Rows into sequences of ``capacity`` positions (and, given ``heads``, ``heads[i]`` weighted
    positions within ``head_width``): first fit in ``forest.order``, a row costing its leaf and the
    nodes of its path the sequence lacks. Deterministic; every row must fit an empty sequence."""
    lengths = np.asarray(lengths, np.int64)
    heads = np.zeros_like(lengths) if heads is None else np.asarray(heads, np.int64)
    head_width = capacity if head_width is None else head_width
    if lengths.size and lengths.max() > capacity:
        raise ValueError(f"a row of {int(lengths.max())} positions does not fit sequences of {capacity}")
    if heads.size and heads.max() > head_width:
        raise ValueError(f"a row of {int(heads.max())} weighted positions does not fit a head of {head_width}")
    placed: list[Placed] = []
    held: list[set[int]] = []
    for row in forest.order:
        path = forest.paths[row]
        leaf = int(lengths[row]) - forest.leaf_start(row)
        for sequence, nodes in zip(placed, held):
            cost = leaf + sum(forest.node_length(k) for k in path if k not in nodes)
            if sequence.used + cost <= capacity and sequence.used_head + heads[row] <= head_width:
                break
        else:
            sequence, nodes = Placed([], []), set()
            placed.append(sequence)
            held.append(nodes)
            cost = int(lengths[row])
        new = [k for k in path if k not in nodes]
        nodes.update(new)
        sequence.nodes = sorted(sequence.nodes + new)
        sequence.rows.append(int(row))
        sequence.used += cost
        sequence.used_head += int(heads[row])
    return placed


def shared_positions(forest: PrefixForest, lengths: Sequence[int], capacity: int) -> tuple[int, int]:
    """(positions the rows hold alone, positions once each shared node is placed once per sequence)."""
    placed = place_rows(forest, lengths, capacity)
    return int(np.sum(lengths)), sum(s.used for s in placed)


__all__ = ["MAX_DEPTH", "MIN_SHARED", "TREE_SPAN", "Placed", "PrefixForest", "build_forest", "place_rows", "shared_positions",
           "unshared"]

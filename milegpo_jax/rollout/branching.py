"""Tree groups (docs/training.md, "Tree rollouts"): where a group's trajectories fork, and which recorded
steps its leaves share. No I/O here: ``tree_collector.py`` plays the envs and asks this module; the
shape and its rules (``TreeShape``, ``FORK_RULES``) are ``tree_shape.py``'s.

A tree group has K leaves (``env.group_size``), as K independent rollouts would: ``roots`` episodes start
from the task's start, and every fork point adds ``branches`` forks of a trajectory's current state (the
parent goes on too), until K leaves were started. Each leaf takes at most ``max_env_steps`` steps from the
root, and steps before a fork are played once, so a tree never spends more env steps than K independent
rollouts. Leaf k of group g is trajectory k: its own steps are recorded under k from ``fork_step`` on,
the ones before under its parent (and further up), once.

Fork rules, decided at the start of a turn for every live trajectory:

* ``uniform``: each of the group's fork points gets a depth drawn uniformly from 1..max_env_steps-1 (a
  generator seeded by the rollout seed and the group); a fork point fires at the first turn a live
  trajectory stands after exactly that many steps, on one of those trajectories drawn uniformly.
* ``first_visit``: a trajectory forks when it stands in a state (its state key) that no trajectory of
  its group has stood in before, at depth >= 1; the lowest leaf index wins ties within a turn.

Whatever a rule leaves unspent when every trajectory of the group has ended starts as new roots (a
"refill"), so a group always has K leaves.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from milegpo_jax.rollout.tree_shape import FORK_RULES, TreeShape  # declared and checked there, jax- and numpy-free


class GroupTree:
    """One group's fork bookkeeping: leaves started, pending fork points, states seen."""

    def __init__(self, shape: TreeShape, max_steps: int, seed: int, group: int):
        self.shape = shape
        self.started = shape.roots  # leaves 0..roots-1 are the roots
        self.rng = np.random.default_rng([seed % 2**32, group])
        events = -(-(shape.leaves - shape.roots) // shape.branches)
        self.depths = sorted(self.rng.integers(1, max(max_steps, 2), size=events).tolist()) if shape.fork_at == "uniform" else []
        self.seen: set[str] = set()

    @property
    def remaining(self) -> int:
        return self.shape.leaves - self.started

    def forks(self, live: Sequence[tuple[int, int, str]]) -> list[tuple[int, int]]:
        """``[(parent leaf, forks)]`` to make now, given the live trajectories ``(leaf, steps, state key)``
        in leaf order; records them as started."""
        chosen: list[int] = []
        if self.shape.fork_at == "first_visit":
            for leaf, steps, state in live:
                if state not in self.seen and steps >= 1:
                    chosen.append(leaf)
                self.seen.add(state)
        else:
            while self.depths and live:
                at_depth = [leaf for leaf, steps, _ in live if steps == self.depths[0]]
                if not at_depth and min(steps for _, steps, _ in live) <= self.depths[0]:
                    break  # a live trajectory may still reach this depth
                self.depths.pop(0)
                if at_depth:
                    chosen.append(at_depth[int(self.rng.integers(len(at_depth)))])
        made = []
        for leaf in chosen:
            count = min(self.shape.branches, self.remaining)
            if count == 0:
                break
            made.append((leaf, count))
            self.started += count
        return made

    def refill(self) -> list[int]:
        """The leaves to start as new roots once no trajectory of the group is live (all unspent ones)."""
        leaves = list(range(self.started, self.shape.leaves))
        self.started = self.shape.leaves
        self.depths = []
        return leaves


def leaves_through_steps(
    trajectory: np.ndarray, t: np.ndarray, parents: Sequence[int | None], fork_steps: Sequence[int]
) -> np.ndarray:
    """How many leaves of one tree group pass through each recorded step (1: the step is not shared).

    ``trajectory``/``t``: the group's recorded steps (leaf index, step index); ``parents[k]``/
    ``fork_steps[k]``: leaf k's parent leaf (None for a root) and the steps it shares with it. Leaf k
    passes through its own steps and, below ``fork_steps[k]``, through its parent's path."""
    leaves = len(parents)
    counts = np.ones(len(trajectory), dtype=np.int64)
    for leaf in range(leaves):
        limit, node = fork_steps[leaf], parents[leaf]
        while node is not None:  # every ancestor's steps below the point this branch left it
            counts += (trajectory == node) & (t < limit)
            limit, node = min(limit, fork_steps[node]), parents[node]
    return counts


def leaf_path(leaf: int, parents: Sequence[int | None], fork_steps: Sequence[int], length: int) -> list[tuple[int, int, int]]:
    """Leaf ``leaf``'s trajectory from the root as recorded segments ``(trajectory, t_from, t_to)``,
    root first; ``length`` is the leaf's steps from the root."""
    segments = []
    node, end = leaf, length
    while node is not None:
        start = fork_steps[node] if parents[node] is not None else 0
        if end > start:
            segments.append((node, start, end))
        node, end = parents[node], min(end, start)
    return segments[::-1]



def leaf_rows(
    group: np.ndarray, trajectory: np.ndarray, t: np.ndarray,
    leaves: Mapping[int, Mapping[int, tuple[int | None, int, int]]], kept: Collection[tuple[int, int]],
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, leaf): the recorded steps of the path from the root of every ``kept`` (group, leaf), leaf after leaf
    (groups and leaves in increasing order), each path root first: the steps credit sees as the leaf's
    trajectory (docs/credit-implementation.md §5). ``group``/``trajectory``/``t``: the recorded steps; ``leaves[g][k]
    = (parent, fork_step, steps)`` of every leaf k of group g (a kept leaf's parent may not be kept:
    the steps recorded under it before the fork stay on the kept leaf's path); ``leaf[i]``: the leaf
    whose path holds ``rows[i]``."""
    where = {key: i for i, key in enumerate(zip(group.tolist(), trajectory.tolist(), t.tolist()))}
    rows: list[int] = []
    leaf: list[int] = []
    for g in sorted(leaves):
        tree = leaves[g]
        size = max(tree) + 1
        parents = [tree[k][0] if k in tree else None for k in range(size)]
        fork_steps = [tree[k][1] if k in tree else 0 for k in range(size)]
        for k in sorted(tree):
            if (g, k) not in kept:
                continue
            for node, start, end in leaf_path(k, parents, fork_steps, tree[k][2]):
                rows.extend(where[(g, node, s)] for s in range(start, end))
            leaf.extend([k] * (len(rows) - len(leaf)))
    return np.array(rows, np.int64), np.array(leaf, np.int64)


__all__ = ["FORK_RULES", "GroupTree", "TreeShape", "leaf_path", "leaf_rows", "leaves_through_steps"]

"""The plain-Python reference of credit over tree groups (docs/credit-implementation.md §5), written from the rule,
not from ``RolloutBatch.tree_training_steps`` and ``credit/trees.py``: each leaf is its path from the
root, every estimator's reference scores the leaves as a group, and a recorded step takes the mean of
its copies' advantages.

A hand-made tree group is a tuple of ``Branch`` records, one per leaf k: its parent leaf (None for a
root; a parent comes before its children), the steps it shares with the parent (``fork_step``) and its
own steps, recorded under k at t = fork_step, fork_step + 1, ...
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Collection, Sequence

from milegpo_jax.credit.config import CreditConfig
from milegpo_jax.credit.rollouts import Group, Step, Trajectory
from milegpo_jax.credit.testing.reference import advantages_and_ema


@dataclasses.dataclass(frozen=True)
class Branch:
    parent: int | None
    fork_step: int
    steps: tuple[Step, ...]  # its own steps, recorded under this leaf


TreeGroup = tuple[Branch, ...]


def leaf_paths(tree: TreeGroup) -> list[list[tuple[int, int, Step]]]:
    """Every leaf's path from the root as (recording leaf, t, step), root first."""
    paths: list[list[tuple[int, int, Step]]] = []
    for k, branch in enumerate(tree):
        shared = [] if branch.parent is None else paths[branch.parent][: branch.fork_step]
        assert len(shared) == branch.fork_step, f"leaf {k} forks after {branch.fork_step} steps its parent lacks"
        paths.append(shared + [(k, branch.fork_step + i, step) for i, step in enumerate(branch.steps)])
    return paths


def tree_advantages(
    trees: Sequence[TreeGroup], cfg: CreditConfig, ema_prev: float = 0.0, dropped: Collection[tuple[int, int]] = ()
) -> tuple[list[dict[tuple[int, int], float]], float]:
    """Per tree group, {(recording leaf, t): advantage} of every recorded step on the path of a leaf
    not ``dropped`` ((group, leaf): aborted), and MVPO's EMA."""
    paths = [[path for k, path in enumerate(leaf_paths(tree)) if (g, k) not in dropped] for g, tree in enumerate(trees)]
    groups = [Group(tuple(Trajectory(tuple(step for _, _, step in path)) for path in tree)) for tree in paths]
    advantages, ema = advantages_and_ema(groups, cfg, ema_prev)
    result = []
    for tree, per_leaf in zip(paths, advantages):
        copies: dict[tuple[int, int], list[float]] = {}
        for path, values in zip(tree, per_leaf):
            for (leaf, t, _), value in zip(path, values):
                copies.setdefault((leaf, t), []).append(value)
        result.append({key: sum(values) / len(values) for key, values in copies.items()})
    return result, ema


def random_tree(rng: random.Random, leaves: int, max_steps: int = 5, states: int = 4) -> TreeGroup:
    """A tree of ``leaves`` leaves whose forks happen where the collector's can: a fork shares 1 to all
    but the last of its parent's steps and takes at least one of its own. Walks over ``states`` rooms
    with milestone flags; a path that reaches its end in room 0 succeeds (reward 10)."""

    def walk(start: str, depth: int) -> tuple[Step, ...]:
        steps, state = [], start
        for _ in range(rng.randint(1, max(1, max_steps - depth))):
            action = rng.choice(("go a", "go b", "take", "look"))
            nxt = f"room{rng.randrange(states)}"
            steps.append(Step(state, action, nxt, 0.0, rng.random() < 0.9, rng.random() < 0.3))
            state = nxt
        if state == "room0":
            steps[-1] = dataclasses.replace(steps[-1], reward=10.0)
        return tuple(steps)

    tree: list[Branch] = [Branch(None, 0, walk("room1", 0))]
    while len(tree) < leaves:
        paths = leaf_paths(tuple(tree))
        parent = rng.randrange(len(tree))
        if len(paths[parent]) < 2:
            tree.append(Branch(None, 0, walk("room1", 0)))  # a refill root
            continue
        fork = rng.randint(1, len(paths[parent]) - 1)
        tree.append(Branch(parent, fork, walk(paths[parent][fork - 1][2].next_state, fork)))
    return tuple(tree)

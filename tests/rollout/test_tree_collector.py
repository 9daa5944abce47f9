"""Tree rollouts (milegpo_jax/rollout/tree_collector.py) against the real TextWorldExpress engine with
a scripted policy: K leaves per group, forks with their parents, every shared step recorded once, and
each leaf's path from the root replaying on a fresh env to exactly what was recorded."""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from envs_bridge.client import EnvPool
from envs_bridge.groups import GroupPlan
from milegpo_jax.rollout.branching import TreeShape, leaf_path
from milegpo_jax.rollout.collector import PolicyResponse, collect

GAME = {"game": "coin", "game_params": "numLocations=4,numDistractorItems=1,includeDoors=0"}
MOVES = ("move north", "move south", "move east", "move west", "take coin", "look around")
K, MAX_STEPS = 4, 6


class Wander:
    """A move drawn from (seed, row, prompt): rows with the same prompt in one call still differ."""

    def generate(self, prompts: Sequence[str], *, temperature: float, seed: int) -> list[PolicyResponse]:
        return [
            PolicyResponse((1,), (2,), (-0.5,), f"<think>go</think><action>{MOVES[zlib.crc32(f'{seed}|{row}|{p}'.encode()) % len(MOVES)]}</action>")
            for row, p in enumerate(prompts)
        ]


@pytest.fixture(scope="module")
def pool():
    with EnvPool("textworld_express", 2 * K, num_servers=2, env_options={**GAME, "max_steps": MAX_STEPS}) as pool:
        yield pool


def play(pool, fork_at: str, roots: int = 1, branches: int = 1):
    plan = GroupPlan("train", task_ids=(1, 2), seeds=(0, 0), group_size=K)
    shape = TreeShape(roots=roots, branches=branches, fork_at=fork_at, leaves=K)
    return plan, collect(pool, Wander(), plan, env="textworld_express", max_steps=MAX_STEPS, history_length=1,
                         temperature=1.0, seed=3, reward_scale=10.0, branching=shape)


@pytest.mark.parametrize("fork_at", ["uniform", "first_visit"])
def test_tree_groups_have_k_leaves_whose_paths_replay_exactly(pool, fork_at):
    forks_before = pool.metrics()["forks"]
    plan, batch = play(pool, fork_at)
    rows = batch.rows
    counts = batch.leaves_per_step()
    forks = 0
    for group in range(plan.num_groups):
        leaves = sorted((e for e in batch.episodes if e.group == group), key=lambda e: e.trajectory)
        assert [e.trajectory for e in leaves] == list(range(K)) and not any(e.aborted for e in leaves)
        assert leaves[0].parent is None
        parents, fork_steps = [e.parent for e in leaves], [e.fork_step for e in leaves]
        forks += sum(p is not None for p in parents)
        by_key = {(r.trajectory, r.t): r for r in rows if r.group == group}
        lengths = 0
        for leaf in leaves:
            if leaf.parent is not None:
                assert 1 <= leaf.fork_step <= leaves[leaf.parent].steps and leaf.parent < leaf.trajectory
            path = [by_key[(k, t)] for k, start, end in leaf_path(leaf.trajectory, parents, fork_steps, leaf.steps)
                    for t in range(start, end)]
            assert [r.t for r in path] == list(range(leaf.steps)) and leaf.steps <= MAX_STEPS
            for before, after in itertools.pairwise(path):
                assert after.state == before.next_state
            lengths += leaf.steps
            # the leaf's actions from the root, on a fresh env: the same states, step for step
            env = group * K
            start = pool.reset("train", [plan.task_ids[group]], env_indices=[env])[0].result
            assert start.state_key == path[0].state
            for row in path:
                assert pool.step([row.action], env_indices=[env])[0].result.state_key == row.next_state
        in_group = np.asarray([r.group == group for r in rows])
        assert counts[in_group].sum() == lengths  # each leaf counts every step of its path once
        assert in_group.sum() <= lengths  # shared steps recorded once
    assert forks >= 1 and pool.metrics()["forks"] - forks_before == forks
    assert len(rows) <= plan.num_envs * MAX_STEPS  # never more env steps than K independent rollouts


def test_branches_and_roots_shape_the_tree(pool):
    _, batch = play(pool, "first_visit", roots=2, branches=2)
    for group in (0, 1):
        leaves = [e for e in batch.episodes if e.group == group]
        assert len(leaves) == K and sum(e.parent is None for e in leaves) >= 2
        by_parent = {}
        for e in leaves:
            if e.parent is not None:
                by_parent.setdefault((e.parent, e.fork_step), []).append(e.trajectory)
        assert all(len(children) <= 2 for children in by_parent.values())

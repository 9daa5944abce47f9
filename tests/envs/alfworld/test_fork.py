"""ALFWorld forks by replay (docs/environments.md §7.1) on the real engine, through an env server under
the ALFWorld interpreter: the fork equals its parent now and under the same later actions, a detour
of one fork touches neither its sibling nor the parent."""

from __future__ import annotations

import pytest

from envs_bridge.client import EnvPool

pytestmark = pytest.mark.timeout(240)


def test_a_fork_replays_to_its_parent_and_evolves_on_its_own(alfworld_python, shipped_games):
    with EnvPool("alfworld", 4, num_servers=1, python=alfworld_python,
                 env_options={"games_dir": str(shipped_games)}) as pool:
        start = pool.reset("train", [0, 0], env_indices=[0, 1])
        gold = list(start[0].result.info["gold_actions"])
        assert len(gold) >= 4
        for action in gold[:2]:
            now = pool.step([action] * 2, env_indices=[0, 1])
        forks = pool.fork([0, 0], [2, 3])
        assert [reply.result for reply in forks] == [now[0].result] * 2
        detour = next(a for a in forks[0].result.admissible_actions if a != gold[2])
        pool.step([detour], env_indices=[2])
        for action in gold[2:]:
            replies = pool.step([action] * 3, env_indices=[0, 1, 3])
            assert replies[0].result == replies[1].result == replies[2].result
        assert replies[1].result.won
        assert pool.metrics()["forks"] == 2

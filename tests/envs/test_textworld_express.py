"""TextWorldExpress through real env servers started by the pool (real TWX engine, real HTTP)."""

from __future__ import annotations

import random

import pytest

from envs_bridge.base import SPLITS
from envs_bridge.client import EnvPool
from envs_bridge.groups import GroupPlan
from envs_bridge.random_play import play_random_groups
from envs_bridge.textworld_express.adapter import DEFAULT_GAME_PARAMS

GAMES = tuple(DEFAULT_GAME_PARAMS)
NUM_ENVS = 8
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module", params=GAMES)
def game_pool(request):
    # Generous step cap: some twc gold paths are ~30 actions, random play is bounded by it too.
    with EnvPool(
        "textworld_express", NUM_ENVS, num_servers=2, env_options={"game": request.param, "max_steps": 60}
    ) as pool:
        yield request.param, pool


def test_splits_hold_a_thousand_tasks_each(game_pool):
    _, pool = game_pool
    assert {split: pool.num_tasks(split) for split in SPLITS} == {"train": 1000, "eval_id": 1000, "eval_ood": 1000}


def test_gold_paths_reach_success_in_every_split(game_pool):
    game, pool = game_pool
    for split in SPLITS:
        task_ids = [0, 17, 999, 500]
        replies = pool.reset(split, task_ids, env_indices=[0, 1, 2, 3])
        results = {reply.env_index: reply.result for reply in replies}
        gold = {index: list(result.info["gold_actions"]) for index, result in results.items()}
        assert all(gold.values()), f"{game}/{split}: empty gold path"
        assert all(result.info["fold"] == {"train": "train", "eval_id": "dev", "eval_ood": "test"}[split] for result in results.values())
        rewards = {index: [] for index in results}
        while any(not result.done for result in results.values()):
            active = [index for index, result in results.items() if not result.done]
            actions = [gold[index].pop(0) for index in active]
            for reply in pool.step(actions, active):
                assert not reply.aborted
                results[reply.env_index] = reply.result
                rewards[reply.env_index].append(reply.result.reward)
        for index, result in results.items():
            assert result.won and result.score == 1.0, f"{game}/{split} task {task_ids[index]} not won"
            # Sparse reward: 1 on the winning step, 0 before it.
            assert rewards[index][-1] == 1.0 and not any(rewards[index][:-1])


def test_random_play_runs_many_episodes_cleanly(game_pool):
    game, pool = game_pool
    rng = random.Random(7)
    total_steps = 0
    for round_index in range(6):
        plan = GroupPlan.sample("train", pool.num_tasks("train"), num_groups=NUM_ENVS, group_size=1, seed=round_index)
        report = play_random_groups(pool, plan, rng)
        assert report.aborted == 0
        total_steps += report.steps
        for rollout_states in (states for group in report.states for states in group):
            assert 1 <= len(rollout_states) <= 60
            assert all(key.startswith("task: ") for key in rollout_states)
    assert pool.metrics()["aborted_episodes"] == 0
    assert total_steps >= 6 * NUM_ENVS


def test_group_rollouts_start_identical_and_replay_identically(game_pool):
    game, pool = game_pool
    plan = GroupPlan("eval_ood", task_ids=(3, 4), seeds=(11, 12), group_size=4)
    replies = pool.reset_groups(plan)
    for group in range(plan.num_groups):
        members = [reply.result for reply in replies if plan.group_of(reply.env_index) == group]
        # Members sit on both servers (env i -> server i % 2), i.e. in different JVMs.
        assert {pool.server_of(reply.env_index) for reply in replies if plan.group_of(reply.env_index) == group} == {0, 1}
        first = members[0]
        for other in members[1:]:
            assert (other.observation, other.state_key, other.admissible_actions, other.task) == (
                first.observation, first.state_key, first.admissible_actions, first.task,
            )
    # The same actions keep the members of a group in lockstep: the engine is deterministic per task.
    rng = random.Random(3)
    results = {reply.env_index: reply.result for reply in replies}
    for _ in range(15):
        active = [index for index, result in results.items() if not result.done]
        if not active:
            break
        group_actions = {}
        for index in active:
            group = plan.group_of(index)
            group_actions.setdefault(group, rng.choice(results[index].admissible_actions))
        for reply in pool.step([group_actions[plan.group_of(index)] for index in active], active):
            results[reply.env_index] = reply.result
        for group in range(plan.num_groups):
            keys = {results[index].state_key for index in range(plan.num_envs) if plan.group_of(index) == group}
            assert len(keys) == 1


def test_state_key_is_the_game_state_not_the_last_message(game_pool):
    _, pool = game_pool
    start = pool.reset("train", [5], env_indices=[0])[0].result
    assert {"look around", "inventory"} <= set(start.admissible_actions)  # neither changes the game state
    looked = pool.step(["look around"], [0])[0].result
    inventory = pool.step(["inventory"], [0])[0].result
    assert looked.observation != inventory.observation
    assert start.state_key == looked.state_key == inventory.state_key


def test_repeated_state_share_under_random_policy(game_pool, record_property):
    game, pool = game_pool
    plan = GroupPlan.sample("train", pool.num_tasks("train"), num_groups=1, group_size=NUM_ENVS, seed=0)
    report = play_random_groups(pool, plan, random.Random(0))
    share = report.repeated_state_share
    record_property(f"repeated_state_share_{game}", share)
    print(f"\nrepeated-state share ({game}, 1 group x {NUM_ENVS} random rollouts, 60-step cap): {share:.2f}")
    # Every rollout starts in the shared initial state, so the share is never 0; TWX games revisit a lot.
    assert share >= 0.3


def test_gold_path_is_a_pure_function_of_the_task(game_pool):
    # The engine's own gold path comes from an unseeded random walk and changed between resets; ours
    # must be the same on every reset, on every server (separate JVMs) and in this process.
    from envs_bridge.textworld_express.adapter import TextWorldExpressAdapter

    game, pool = game_pool
    task_ids = [0, 1, 2, 3]
    paths = set()
    for _ in range(3):
        for reply in pool.reset("train", task_ids, env_indices=[0, 1, 2, 3]):
            paths.add((reply.result.info["game_seed"], tuple(reply.result.info["gold_actions"])))
        pool.reset("train", task_ids[::-1], env_indices=[0, 1, 2, 3])  # a different history per env
    assert len(paths) == len(task_ids)
    local = TextWorldExpressAdapter(game, max_steps=60)
    try:
        here = {(r.info["game_seed"], tuple(r.info["gold_actions"])) for r in (local.reset("train", t, 5) for t in task_ids)}
    finally:
        local.close()
    assert here == paths

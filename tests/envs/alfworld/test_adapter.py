"""The ALFWorld adapter through real env servers started by the pool under the alfworld interpreter."""

from __future__ import annotations

import random

import pytest

from envs_bridge.alfworld.games import TASK_TYPES
from envs_bridge.client import EnvPool, EnvRequestError
from envs_bridge.groups import GroupPlan
from envs_bridge.random_play import play_random_groups

pytestmark = pytest.mark.timeout(300)
NUM_ENVS = 8
MAX_STEPS = 50
SHIPPED_COUNTS = {"train": 6, "eval_id": 2, "eval_ood": 6}


@pytest.fixture(scope="module")
def pool(alfworld_python, shipped_games):
    with EnvPool(
        "alfworld", NUM_ENVS, num_servers=2, python=alfworld_python,
        env_options={"games_dir": str(shipped_games), "max_steps": MAX_STEPS},
    ) as pool:
        yield pool


def test_splits_hold_the_generated_games(pool):
    assert {split: pool.num_tasks(split) for split in SHIPPED_COUNTS} == SHIPPED_COUNTS


def test_walkthroughs_win_every_game_with_reward_ten(pool):
    seen_types = set()
    for split, count in SHIPPED_COUNTS.items():
        replies = pool.reset(split, list(range(count)), env_indices=list(range(count)))
        results = {reply.env_index: reply.result for reply in replies}
        plans = {index: list(result.info["walkthrough"]) for index, result in results.items()}
        rewards: dict[int, list[float]] = {index: [] for index in results}
        for index, result in results.items():
            assert result.observation.startswith("-= Welcome to TextWorld, ALFRED! =-")
            assert result.task and result.task in result.observation and "help" not in result.admissible_actions
            assert result.info["source"] == "generated" and result.info["task_type"] in TASK_TYPES
            assert plans[index] and len(plans[index]) <= MAX_STEPS
            assert result.info["gold_actions"] == plans[index]  # the SFT warm start's expert path
        while any(not result.done for result in results.values()):
            active = [index for index, result in results.items() if not result.done]
            actions = [plans[index].pop(0) for index in active]
            for index, action in zip(active, actions):
                assert action in results[index].admissible_actions or action == "help"
            for reply in pool.step(actions, active):
                assert not reply.aborted, reply.error
                results[reply.env_index] = reply.result
                rewards[reply.env_index].append(reply.result.reward)
        for index, result in results.items():
            assert result.won and result.score == 1.0 and not result.info["truncated"], result.info["gamefile"]
            assert rewards[index][-1] == 10.0 and not any(rewards[index][:-1])  # sparse: 10 on the winning step
            assert not plans[index]  # won exactly when the walkthrough ended
            if result.info["task_type"] == "look_at_obj_in_light":
                assert "Items in hand (status): nothing." not in result.state_key
            else:
                assert "History moving list by you: " in result.state_key
            seen_types.add(result.info["task_type"])
    assert seen_types == set(TASK_TYPES)


def test_live_expert_mode_reports_alfworlds_expert_action(alfworld_python, shipped_games):
    options = {"games_dir": str(shipped_games), "expert": True}
    with EnvPool("alfworld", 2, num_servers=2, python=alfworld_python, env_options=options) as pool:
        # The same game and seed on two servers: the expert's tie-breaks are seeded per episode.
        results = [reply.result for reply in pool.reset("eval_ood", [2, 2], seeds=[7, 7])]
        assert [result.info["expert_action"] for result in results] == ["look", "look"]  # it looks around first
        played: list[list[str]] = [[], []]
        while not results[0].done:
            actions = [result.info["expert_action"] for result in results]
            for index, action in enumerate(actions):
                played[index].append(action)
            results = [reply.result for reply in pool.step(actions)]
        assert played[0] == played[1]
        assert all(result.won for result in results) and len(played[0]) <= MAX_STEPS


def test_random_play_runs_several_episodes_cleanly(pool):
    # Eight episodes over the six held-out-room games (the repeated-state test below plays eight more).
    plan = GroupPlan.sample("eval_ood", pool.num_tasks("eval_ood"), num_groups=NUM_ENVS, group_size=1, seed=1)
    report = play_random_groups(pool, plan, random.Random(11))
    assert report.aborted == 0 and report.episodes == NUM_ENVS and report.steps >= NUM_ENVS
    lengths = [len(states) for group in report.states for states in group]
    assert all(1 <= length <= MAX_STEPS for length in lengths)
    # Episodes that were not won ran into the step cap (ALFWorld has no losing state).
    assert sum(length == MAX_STEPS for length in lengths) >= NUM_ENVS - report.won
    assert pool.metrics()["aborted_episodes"] == 0


def test_group_rollouts_start_identical_and_replay_identically(pool):
    plan = GroupPlan("eval_ood", task_ids=(1, 4), seeds=(5, 6), group_size=4)
    replies = pool.reset_groups(plan)
    results = {reply.env_index: reply.result for reply in replies}
    for group in range(plan.num_groups):
        members = [results[index] for index in range(plan.num_envs) if plan.group_of(index) == group]
        assert {pool.server_of(index) for index in range(plan.num_envs) if plan.group_of(index) == group} == {0, 1}
        for other in members[1:]:
            assert (other.observation, other.state_key, other.admissible_actions, other.task) == (
                members[0].observation, members[0].state_key, members[0].admissible_actions, members[0].task,
            )
    rng = random.Random(3)
    for _ in range(12):  # the same actions keep a group in lockstep: the engine is deterministic
        active = [index for index, result in results.items() if not result.done]
        group_actions: dict[int, str] = {}
        for index in active:
            group_actions.setdefault(plan.group_of(index), rng.choice(results[index].admissible_actions))
        for reply in pool.step([group_actions[plan.group_of(index)] for index in active], active):
            results[reply.env_index] = reply.result
        for group in range(plan.num_groups):
            keys = {results[index].state_key for index in range(plan.num_envs) if plan.group_of(index) == group}
            assert len(keys) == 1


def test_repeated_state_share_under_random_policy(pool, record_property):
    plan = GroupPlan("train", task_ids=(0,), seeds=(0,), group_size=NUM_ENVS)
    report = play_random_groups(pool, plan, random.Random(0))
    share = report.repeated_state_share
    record_property("repeated_state_share_alfworld", share)
    print(f"\nrepeated-state share (alfworld, 1 group x {NUM_ENVS} random rollouts, {MAX_STEPS}-step cap): {share:.2f}")
    # All rollouts share s0, and random ALFWorld play revisits states ("go to" back and forth, looks).
    assert share >= 0.1


def test_bad_input_is_rejected_with_a_clear_message(alfworld_python, shipped_games, tmp_path):
    with pytest.raises(EnvRequestError, match="max_steps must be a positive integer"):
        EnvPool("alfworld", 1, python=alfworld_python, env_options={"games_dir": str(shipped_games), "max_steps": 0})
    with pytest.raises(EnvRequestError, match="no ALFWorld games in .*envs_bridge.alfworld.generate"):
        EnvPool("alfworld", 1, python=alfworld_python, env_options={"games_dir": str(tmp_path)})

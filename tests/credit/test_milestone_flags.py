"""BEACON's milestone flags end to end: the ALFWorld walkthrough matcher and the WebShop phase detector
in the real adapters, and the collector carrying the env's flag into the rollout record."""

from __future__ import annotations

import os
import tarfile

import pytest

from envs_bridge.alfworld.milestones import WalkthroughMilestones
from envs_bridge.webshop.adapter import WebShopAdapter
from envs_bridge.webshop.milestones import COMPLETE
from milegpo_jax.credit.columns import check_columns_for, columns_from_groups
from milegpo_jax.credit.rollouts import RolloutFormatError, make_group
from milegpo_jax.rollout.collector import EpisodeSummary, PolicyResponse, RolloutBatch, StepRow


def test_walkthrough_matcher_flags_in_order_at_most_once_per_step():
    matcher = WalkthroughMilestones(["go to fridge 1", "open fridge 1", "take apple 1 from fridge 1"])
    flags = [matcher.observe(action) for action in [
        "open fridge 1",  # not the pending milestone
        "go to fridge 1",
        "go to fridge 1",  # already done: the pointer has moved on
        "Open  fridge 1".replace("  ", " "),  # case does not matter
        "take apple 1 from fridge 2",  # ratio 0.96 >= 0.95: counts as the plan's action
        "take apple 1 from fridge 1",  # the list is done
    ]]
    assert flags == [False, True, False, True, True, False]
    assert not WalkthroughMilestones(None).observe("look")


def _webshop_episode(adapter, actions):
    adapter.reset("eval_id", 0, 0)
    infos = []
    for action in actions:
        result = adapter.step(action)
        infos.append(result.info)
        if result.done:
            break
    return infos


def test_webshop_gold_actions_complete_every_phase_in_order():
    adapter = WebShopAdapter()
    for task_id in range(3):
        reset = adapter.reset("eval_id", task_id, 0)
        goal = adapter.goal("eval_id", task_id)
        gold = reset.info["gold_actions"]
        flags, phases = [], []
        for action in gold:
            result = adapter.step(action)
            flags.append(result.info["milestone_achieved"])
            phases.append(result.info["milestone_phase"])
        assert result.won, gold
        expected = 4 if goal.goal_options else 3
        assert sum(flags) == expected and flags[0] and flags[1] and flags[-1], (gold, flags)
        assert phases[-1] == COMPLETE


def test_webshop_off_goal_play_completes_no_phase():
    adapter = WebShopAdapter()
    infos = _webshop_episode(adapter, ["search[zzzz qqqq]", "click[back to search]", "click[nothing]"])
    assert not any(info["milestone_achieved"] for info in infos)
    assert infos[-1]["milestone_phase"] == "search"


def test_collector_puts_the_env_flag_into_the_record_and_beacon_needs_it():
    generation = PolicyResponse((1,), (2,), (0.0,), "")
    rows = tuple(StepRow(0, 0, t, generation, f"s{t}", "a", f"s{t + 1}", 0.0, True, flag) for t, flag in enumerate([True, False]))
    batch = RolloutBatch.from_rows(rows, (EpisodeSummary(0, 0, False, 2, False, 0.0),))
    assert [row.milestone for row in batch.rows] == [True, False]
    columns = batch.credit_columns()
    assert columns.milestone.tolist() == [1, 0]
    check_columns_for(columns, "beacon")
    unflagged = columns_from_groups([make_group([[("s0", "a", "s1", 0.0, True)]])])
    check_columns_for(unflagged, "gigpo")
    with pytest.raises(RolloutFormatError, match=r"steps\[0\]: estimator beacon needs the per-step field 'milestone'"):
        check_columns_for(unflagged, "beacon")


@pytest.mark.timeout(300)
def test_alfworld_walkthrough_steps_are_the_milestones(tmp_path):
    from envs_bridge.client import EnvPool
    from tests.envs.alfworld.conftest import SHIPPED_GAMES, alfworld_interpreter

    python = alfworld_interpreter()
    if not os.path.exists(python):
        pytest.skip(f"ALFWorld venv missing ({python})")
    with tarfile.open(SHIPPED_GAMES) as archive:
        archive.extractall(tmp_path, filter="data")
    with EnvPool("alfworld", 2, num_servers=1, python=python, env_options={"games_dir": str(tmp_path / "games")}) as pool:
        results = {reply.env_index: reply.result for reply in pool.reset("train", [0, 1], env_indices=[0, 1])}
        plans = {i: list(result.info["walkthrough"]) for i, result in results.items()}
        # env 1 first tries an action off the plan: no milestone, then the plan flags every step
        detour = {0: [], 1: ["inventory"]}
        flags = {0: [], 1: []}
        while any(not result.done for result in results.values()):
            active = [i for i, result in results.items() if not result.done]
            actions = [(detour[i] or plans[i]).pop(0) for i in active]
            for reply in pool.step(actions, active):
                results[reply.env_index] = reply.result
                flags[reply.env_index].append(reply.result.info["milestone_achieved"])
        assert all(result.won for result in results.values())
        assert flags[0] == [True] * len(flags[0])
        assert flags[1] == [False] + [True] * (len(flags[1]) - 1)

"""WebShopAdapter through the EnvAdapter interface: splits, gold paths, groups, limits, random play."""

import importlib.util
import json
import random

import pytest

from envs_bridge.base import SPLITS, EnvError
from envs_bridge.registry import make_adapter
from envs_bridge.webshop.adapter import DEFAULT_OOD_PRODUCT_TYPES, WebShopAdapter
from envs_bridge.webshop.bench import play_groups, random_action
from envs_bridge.webshop.product_types import PRODUCT_TYPES


@pytest.fixture(scope="module")
def env():
    return WebShopAdapter()


def _play(env, actions):
    result = None
    for action in actions:
        result = env.step(action)
    return result


def test_splits_follow_verl_agent_and_hold_out_product_types(env):
    assert env.num_tasks("eval_id") == 500 and env.num_tasks("train") > 5000
    assert 0 < env.num_tasks("eval_ood") <= 500
    in_distribution = [env.goal(split, i) for split in ("train", "eval_id") for i in range(env.num_tasks(split))]
    assert not {goal.product_type for goal in in_distribution} & set(DEFAULT_OOD_PRODUCT_TYPES)
    held_out = {env.goal("eval_ood", i).product_type for i in range(env.num_tasks("eval_ood"))}
    assert held_out == set(DEFAULT_OOD_PRODUCT_TYPES)
    # Goal ids are positions in WebShop's shuffled goal list: eval = the first 500, train = the rest.
    assert env.goal("train", 0) != env.goal("eval_id", 0)


def test_gold_path_wins_for_goals_of_every_product_type(env):
    per_type = {product_type.key: 0 for product_type in PRODUCT_TYPES}
    for split in SPLITS:
        for task_id in range(0, env.num_tasks(split), 7):
            goal = env.goal(split, task_id)
            if per_type[goal.product_type] >= 8:
                continue
            start = env.reset(split, task_id, seed=0)
            final = _play(env, start.info["gold_actions"])
            assert final.done and final.won and final.score == 1.0 and final.reward == 10.0, (split, task_id)
            assert final.info["reward_info"]["reward"] == 1.0
            per_type[goal.product_type] += 1
    assert min(per_type.values()) == 8, per_type


def test_gold_path_example_matches_the_spec_episode_shape(env):
    start = env.reset("eval_id", 0, seed=0)
    goal = env.goal("eval_id", 0)
    actions = start.info["gold_actions"]
    assert actions[0] == f"search[{goal.search_query}]" and actions[-1] == "click[buy now]"
    assert f"click[{goal.asin.lower()}]" in actions
    assert [f"click[{value}]" for _, value in goal.goal_options] == actions[-1 - len(goal.goal_options):-1]
    assert start.task == goal.instruction_text
    assert start.observation == f"WebShop [SEP] Instruction: [SEP] {goal.instruction_text} [SEP] Search"
    assert start.admissible_actions == ("search[<your query>]", "click[search]")
    assert start.state_key == "'Search'"


def test_k_resets_of_one_goal_are_identical_whatever_the_seed(env):
    first = env.reset("train", 42, seed=0)
    second_step = env.step(first.info["gold_actions"][0])
    for seed in (0, 1, 7, 123, 0, 5, 9):
        again = env.reset("train", 42, seed=seed)
        assert (again.observation, again.state_key, again.admissible_actions) == \
            (first.observation, first.state_key, first.admissible_actions)
        step = env.step(first.info["gold_actions"][0])
        assert (step.observation, step.state_key) == (second_step.observation, second_step.state_key)


def test_state_keys_drop_the_instruction_and_quote_page_parts(env):
    start = env.reset("eval_id", 3, seed=0)
    results = env.step(start.info["gold_actions"][0])
    assert start.task not in results.state_key
    assert results.state_key.startswith("'Back to Search' [SEP] 'Page 1 (Total results: ")
    assert results.observation.startswith(f"Instruction: [SEP] {start.task} [SEP] ")
    assert results.admissible_actions[:2] == ("click[back to search]", "click[next >]")
    assert "search[<your query>]" not in results.admissible_actions


def test_invalid_actions_are_self_loops_with_zero_reward(env):
    start = env.reset("eval_id", 1, seed=0)
    for action in ("click[buy now]", "search[]", "nonsense", "click[b000000000]", "click[search]"):
        result = env.step(action)
        assert (result.observation, result.state_key, result.admissible_actions) == \
            (start.observation, start.state_key, start.admissible_actions)
        assert result.reward == 0.0 and not result.done and not result.won and result.info["action_valid"] is False


@pytest.mark.parametrize("max_steps", [15, 30])
def test_step_cap_ends_the_episode_as_a_failure(max_steps):
    env = WebShopAdapter(max_steps=max_steps)
    env.reset("train", 0, seed=0)
    for step in range(1, max_steps + 1):
        result = env.step("click[nothing]")
        assert result.done == (step == max_steps)
    assert result.info["truncated"] and not result.won and result.reward == 0.0 and result.admissible_actions == ()
    with pytest.raises(EnvError, match="episode is over"):
        env.step("click[search]")


def test_a_wrong_purchase_ends_with_its_partial_score_and_no_reward(env):
    task_id = next(i for i in range(500) if env.goal("eval_id", i).goal_options)
    goal = env.goal("eval_id", task_id)
    option_clicks = {f"click[{value}]" for _, value in goal.goal_options}
    start = env.reset("eval_id", task_id, seed=0)
    _play(env, [action for action in start.info["gold_actions"][:-1] if action not in option_clicks])
    result = env.step("click[buy now]")  # bought without choosing the goal options
    assert result.done and not result.won and result.reward == 0.0 and 0.0 < result.score < 1.0
    assert result.score == result.info["reward_info"]["reward"]
    assert json.dumps(result.to_json())  # the server sends it as JSON


def test_bad_input_raises_env_errors():
    env = WebShopAdapter()
    with pytest.raises(EnvError, match="before reset"):
        env.step("click[search]")
    with pytest.raises(EnvError, match="unknown split"):
        env.reset("test", 0, seed=0)
    with pytest.raises(EnvError, match="out of range"):
        env.reset("eval_id", 500, seed=0)
    with pytest.raises(EnvError, match="out of range"):
        env.reset("train", -1, seed=0)
    with pytest.raises(EnvError, match="seed"):
        env.reset("train", 0, seed="zero")
    env.reset("train", 0, seed=0)
    with pytest.raises(EnvError, match="string"):
        env.step(None)
    with pytest.raises(EnvError, match="max_steps"):
        WebShopAdapter(max_steps=0)
    with pytest.raises(EnvError, match="unknown product types"):
        WebShopAdapter(ood_product_types=["spaceships"])
    with pytest.raises(EnvError, match="noun_tagger"):
        WebShopAdapter(noun_tagger="nltk")
    with pytest.raises(EnvError, match="not a saved WebShop catalog"):
        WebShopAdapter(catalog_dir="/nonexistent/catalog")


def test_registry_builds_the_adapter_from_json_options():
    env = make_adapter("webshop", max_steps=30, ood_product_types=["coffee", "office_desk"])
    assert isinstance(env, WebShopAdapter) and env.max_steps == 30
    assert env.catalog is WebShopAdapter().catalog  # instances of one process share the catalog


@pytest.mark.skipif(importlib.util.find_spec("spacy") is not None, reason="spaCy is installed")
def test_spacy_tagger_without_spacy_explains_what_to_install():
    with pytest.raises(EnvError, match="spacy"):
        WebShopAdapter(noun_tagger="spacy")


def test_random_play_runs_many_bounded_episodes_without_error(env):
    rng = random.Random(0)
    lengths, purchases = [], 0
    for episode in range(150):
        split = SPLITS[episode % 3]
        result = env.reset(split, rng.randrange(env.num_tasks(split)), seed=episode)
        words = env.goal(split, 0).search_query.split()
        steps = 0
        while not result.done:
            result = env.step(random_action(result, words, rng) if rng.random() < 0.9 else "click[junk]")
            steps += 1
            assert 0.0 <= result.score <= 1.0
            assert result.reward == (10.0 if result.won else 0.0)
            assert result.won == (result.done and result.score == 1.0)
        lengths.append(steps)
        purchases += "reward_info" in result.info
    assert max(lengths) <= env.max_steps and purchases > 10


def test_random_groups_revisit_states(env):
    """Graph credit needs states shared by rollouts of a group; the measured share is reported."""
    stats = play_groups(env, "train", list(range(12)), k=8, seed=0)
    summary = stats.to_json()
    print("webshop random play, K=8:", summary)
    assert summary["shared_state_share"] > 0.4
    assert stats.episodes == 96

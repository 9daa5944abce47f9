"""Prompt templates, history window and the action projection of docs/environments.md §6.1-6.2."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from milegpo_jax.rollout.prompts import (
    HISTORY_LENGTH,
    HistoryEntry,
    alfworld_prompt,
    build_prompt,
    extract_alfworld_task,
    extract_webshop_task,
    format_admissible_actions,
    format_history,
    format_webshop_observation,
    project_action,
    project_actions,
    textworld_express_prompt,
    webshop_actions,
    webshop_prompt,
)

WELL_FORMED = "<think>The fridge is closed, open it first.</think><action>Open Fridge 1</action>"


# ------------------------------------------------------------------------------------------ projection


def test_well_formed_response_gives_lowercased_stripped_action():
    assert project_action(WELL_FORMED, "alfworld") == ("open fridge 1", True)
    assert project_action("<think>x</think>\n<ACTION>  Click[Buy Now] </Action>", "webshop") == ("click[buy now]", True)


def test_missing_action_tags_send_the_tail_and_are_invalid():
    response = "<think>I should go to the countertop and look for the apple there</think> go to countertop 1"
    assert project_action(response, "alfworld") == (response.lower()[-30:], False)
    assert project_action(response, "textworld_express") == (response.lower()[-30:], False)
    assert project_action(response, "webshop") == (response.lower()[-20:], False)
    assert project_action("<think>a</think><action>look", "alfworld") == ("<think>a</think><action>look", False)


@pytest.mark.parametrize(
    "response",
    [
        "<action>look</action>",  # no think block
        "<think>a<action>look</action>",  # no </think>
        "<THINK>a</THINK><action>look</action>",  # think tags are matched as written, not lower-cased
        "<think>先看看</think><action>look</action>",  # CJK
        "<think>a</think><action>look 冰箱</action>",
    ],
)
def test_format_violations_keep_the_action_but_mark_it_invalid(response):
    action, valid = project_action(response, "alfworld")
    assert not valid and action.startswith("look")


def test_first_action_block_wins_and_reversed_tags_give_the_empty_action():
    assert project_action("<think>t</think><action>a</action><action>b</action>", "alfworld") == ("a", True)
    # verl-agent slices from the first <action> to the first </action>: reversed tags give "" (still valid).
    assert project_action("<think>t</think></action> x <action>", "alfworld") == ("", True)


def test_non_cjk_unicode_is_fine():
    assert project_action("<think>café — ok</think><action>Take Crème</action>", "alfworld") == ("take crème", True)


def test_project_actions_batches_and_unknown_env_is_rejected():
    assert project_actions([WELL_FORMED, "nothing"], "alfworld") == (["open fridge 1", "nothing"], [True, False])
    with pytest.raises(ValueError, match="no projection rule"):
        project_action(WELL_FORMED, "nethack")


@given(st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=80))
def test_untagged_text_always_falls_back_to_its_tail(text):
    assert project_action(text, "webshop") == (text.lower()[-20:], False)


@given(st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=40))
def test_tagged_action_round_trips(action):
    projected, valid = project_action(f"<think>reason</think><action>{action}</action>", "alfworld")
    assert projected == action.lower().strip()
    assert valid == (not any("\u4e00" <= char <= "\u9fff" for char in action))


# ------------------------------------------------------------------------------------------- history


def test_history_window_keeps_the_last_two_with_episode_step_numbers():
    history = [HistoryEntry(f"obs {k}", f"act {k}") for k in range(1, 6)]
    text, shown = format_history(history)
    assert shown == HISTORY_LENGTH == 2
    assert text == "[Observation 4: 'obs 4', Action 4: 'act 4']\n[Observation 5: 'obs 5', Action 5: 'act 5']"
    assert format_history(history[:1]) == ("[Observation 1: 'obs 1', Action 1: 'act 1']", 1)
    assert format_history([]) == ("", 0)
    assert format_history(history, history_length=0) == ("", 0)


# ------------------------------------------------------------------------------------------- prompts

ALFWORLD_FIRST = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see "
    "a cabinet 1, a fridge 1, and a microwave 1.\n\nYour task is to: heat some potato and put it in microwave."
)
ADMISSIBLE = ["go to cabinet 1", "go to fridge 1", "help", "inventory", "look"]


def test_admissible_actions_are_quoted_without_help():
    assert format_admissible_actions(ADMISSIBLE) == "'go to cabinet 1'\n 'go to fridge 1'\n 'inventory'\n 'look'"


def test_alfworld_first_step_uses_the_no_history_template():
    prompt = alfworld_prompt(ALFWORLD_FIRST, ADMISSIBLE, task=extract_alfworld_task(ALFWORLD_FIRST))
    assert "ALFRED" in prompt and ALFWORLD_FIRST in prompt
    assert "[" + format_admissible_actions(ADMISSIBLE) + "]" in prompt
    assert "'help'" not in prompt and "Before this step" not in prompt
    assert "<think> </think>" in prompt and "<action> </action>" in prompt


def test_alfworld_later_steps_show_task_counts_and_the_last_two_steps():
    task = extract_alfworld_task(ALFWORLD_FIRST)
    assert task == "heat some potato and put it in microwave."
    history = [
        HistoryEntry(ALFWORLD_FIRST, "go to fridge 1"),
        HistoryEntry("You arrive at fridge 1. The fridge 1 is closed.", "open fridge 1"),
        HistoryEntry("You open the fridge 1. The fridge 1 is open. In it, you see a potato 1.", "take potato 1 from fridge 1"),
    ]
    prompt = alfworld_prompt("You pick up the potato 1 from the fridge 1.", ADMISSIBLE, task=task, history=history)
    assert f"Your task is to: {task}" in prompt
    assert "already taken 3 step(s)" in prompt and "most recent 2 observations" in prompt and "at step 4" in prompt
    assert "[Observation 2: 'You arrive at fridge 1. The fridge 1 is closed.', Action 2: 'open fridge 1']" in prompt
    assert "Observation 1:" not in prompt
    assert "current observation is: You pick up the potato 1 from the fridge 1." in prompt


def test_alfworld_task_must_be_in_the_observation():
    with pytest.raises(ValueError, match="Your task is to"):
        extract_alfworld_task("You arrive at fridge 1.")


WEBSHOP_PAGE = (
    "WebShop [SEP] Instruction: [SEP] i need a grey accent chair, and price lower than 130.00 dollars "
    "[SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] B000100154 [SEP] Maple Accent Chair [SEP] $99.0"
)


def test_webshop_observation_and_actions_are_formatted_like_verl_agent():
    task = extract_webshop_task(WEBSHOP_PAGE)
    assert task == "i need a grey accent chair, and price lower than 130.00 dollars"
    formatted = format_webshop_observation(WEBSHOP_PAGE, task)
    assert formatted == "'Back to Search' [SEP] 'Page 1 (Total results: 50)' [SEP] 'Next >' [SEP] 'B000100154' [SEP] 'Maple Accent Chair' [SEP] '$99.0'"
    assert format_webshop_observation("no instruction here", task) == "no instruction here"
    assert webshop_actions(True, ["b000100154", "next >"]) == ["search[<your query>]", "click[b000100154]", "click[next >]"]
    with pytest.raises(ValueError, match="Instruction"):
        extract_webshop_task("WebShop [SEP] Search")


def test_webshop_prompts_and_long_history_fallback():
    task = extract_webshop_task(WEBSHOP_PAGE)
    observation = format_webshop_observation(WEBSHOP_PAGE, task)
    actions = webshop_actions(False, ["back to search", "b000100154"])
    first = webshop_prompt(observation, actions, task=task)
    assert f"Your task is to: {task}." in first and "WebShop" in first
    assert "[\n'click[back to search]',\n'click[b000100154]',\n]" in first
    history = [HistoryEntry("'Search'", "search[grey accent chair]")]
    later = webshop_prompt(observation, actions, task=task, history=history)
    assert "already taken 1 step(s)" in later and "[Observation 1: ''Search'', Action 1: 'search[grey accent chair]']" in later
    huge = [HistoryEntry("x" * 7000, "click[a]"), HistoryEntry("y" * 7000, "click[b]")]
    assert webshop_prompt(observation, actions, task=task, history=huge) == first  # > 13,000 chars


def test_textworld_express_prompt_always_states_the_task():
    task = "Your task is to search the environment and find the coin."
    first = textworld_express_prompt("You are in the kitchen.", ["look around", "move north"], task=task)
    later = textworld_express_prompt(
        "You are in the pantry.", ["look around"], task=task, history=[HistoryEntry("You are in the kitchen.", "move south")]
    )
    assert task in first and task in later
    assert "Before this step" not in first and "at step 2" in later
    assert "['look around'\n 'move north']" in first


def test_build_prompt_dispatches_per_env():
    assert build_prompt("alfworld", ALFWORLD_FIRST, ADMISSIBLE, task="t") == alfworld_prompt(ALFWORLD_FIRST, ADMISSIBLE, task="t")
    assert "text adventure" in build_prompt("textworld_express", "o", ["look around"], task="t")
    assert "WebShop" in build_prompt("webshop", "o", ["search[<your query>]"], task="t")
    with pytest.raises(ValueError, match="no prompt template"):
        build_prompt("nethack", "o", [], task="t")

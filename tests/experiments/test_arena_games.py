"""The arena's game settings: the harder TextWorldExpress presets, WebShop's search step built from
the instruction the agent sees (not the goal's own query), and ``uniform``, which measures how often
the starting policy wins a setting."""

import json
import math

import pytest

from experiments.arena import stats, uniform
from experiments.arena.envs import TWX_PRESETS, instruction_queries, make_arena_env, make_backend


def test_presets_set_the_game_parameters_and_cap():
    spec = make_arena_env("textworld_express", "twc-2rooms", None, "inprocess", 1, {})
    assert spec.label == "textworld_express:twc-2rooms"
    assert spec.adapter_options() == {"game": "twc", "game_params": "numLocations=2,numItemsToPutAway=2", "gold_path": False}
    capped = make_arena_env("textworld_express", "coin11", None, "inprocess", 1, {}).adapter_options()
    assert capped["max_steps"] == 15 and capped["game_params"] == "numLocations=11"
    assert make_arena_env("textworld_express", "coin11", 30, "inprocess", 1, {}).adapter_options()["max_steps"] == 30  # --max-steps wins
    assert {"coin", "coin8", "twc", "cookingworld"} <= set(TWX_PRESETS)  # earlier arenas keep their names


def test_instruction_queries_come_from_the_shown_text():
    text = "i want tee with relaxed fit and v neck with size: small, and price lower than 50.00 dollars"
    head = "i want tee with relaxed fit and v neck with size: small"
    assert instruction_queries(text) == (text, head, "i want tee with relaxed fit", "and v neck with size: small")
    assert instruction_queries("  socks  ") == ("socks",)  # one word: every candidate is the same query, listed once


def test_webshop_search_modes():
    oracle = make_arena_env("webshop", None, None, "inprocess", 1, {})
    own = make_arena_env("webshop", "instruction", None, "inprocess", 1, {})
    assert oracle.label == "webshop" and own.label == "webshop:search=instruction"
    assert "_search" not in own.adapter_options()  # an arena option, never the adapter's
    for spec in (oracle, own):
        backend = make_backend(spec, 1)
        try:
            (root,) = backend.reset([0], "train", [3])
            goal = backend._adapters[0].goal("train", 3)
        finally:
            backend.close()
        searches = [a for a in root.admissible_actions if a.startswith("search[")]
        if spec is oracle:
            assert searches == [f"search[{goal.search_query}]"]
        else:
            assert searches == [f"search[{q}]" for q in instruction_queries(root.task)] and len(searches) == 4
            assert f"search[{goal.search_query}]" not in searches


def test_wilson_interval_against_the_formula():
    low, high = stats.wilson_interval(6, 256)
    p, n, z = 6 / 256, 256, 1.959964
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert (low, high) == (pytest.approx(centre - half), pytest.approx(centre + half))
    assert stats.wilson_interval(0, 10)[0] == 0.0 and stats.wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert stats.wilson_interval(0, 256)[1] == pytest.approx(0.0148, abs=1e-4)  # the "0 of 256" row of the design table


def test_uniform_counts_wins_of_the_uniform_policy(capsys):
    assert uniform.main(["--game", "coin", "--tasks", "3", "--rollouts", "2", "--max-steps", "8"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["job"] == "arena-uniform" and report["episodes"] == 6 and report["tasks"] == 3
    assert 0 <= report["wins"] <= 6 and report["success"] == report["wins"] / 6 and report["mean_steps"] <= 8
    assert uniform.main(["--game", "zork"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown TextWorldExpress game 'zork'" in err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--tasks", "100000000"], "--tasks 100000000: must be in 1..4096"),  # was 3 GB in 13 s
        (["--rollouts", "100000000"], "--rollouts 100000000: must be in 1..4096"),
        (["--tasks", "64", "--rollouts", "65"], "--tasks x --rollouts: 4160 episodes at once, at most 4096 (one env-server batch)"),
        (["--servers", "0", "--backend", "pool"], "--servers 0: must be in 1..64"),  # as the arena refuses it
        (["--seed", "-1"], "--seed -1: a seed is an integer in 0..2**32-1"),
    ],
)
def test_uniform_bad_input_is_one_line_and_exit_2(capsys, extra, message):
    assert uniform.main(extra) == 2
    assert capsys.readouterr().err.strip() == f"experiments.arena uniform: {message}"

"""Several studies read together: the pooled (stratified) test, the game scale, the matched option,
the family-wide Bonferroni judgement and the seed sizing, against hand-computed values; the
``family`` command on two small synthetic studies, and its bad input."""

import json
import math

import pytest
from scipy import stats as scipy_stats

from experiments.arena import crossgame, family, family_report, power, stats


def test_stratified_t_by_hand():
    # scaled: a [0.2, 0.6] mean 0.4 var 0.08 (n 2); b [0, 0.2, 0.4] mean 0.2 var 0.04 (n 3)
    # estimate (0.4 + 0.2) / 2 = 0.3; variance (0.08/2 + 0.04/3) / 4 = 0.01 + 0.003333 = 0.013333
    # Welch df = 0.013333^2 / (0.01^2 / 1 + 0.003333^2 / 2) = 1.68421
    test = family.stratified_t({"a": [0.1, 0.3], "b": [0.0, 0.2, 0.4]}, {"a": 0.5, "b": 1.0}, 0.05)
    assert test["mean"] == pytest.approx(0.3)
    assert test["se"] == pytest.approx(math.sqrt(0.04 / 3))
    assert test["df"] == pytest.approx(1.684210526)
    assert test["p"] == pytest.approx(2 * scipy_stats.t.sf(0.3 / math.sqrt(0.04 / 3), 1.684210526))
    half = scipy_stats.t.ppf(0.975, 1.684210526) * math.sqrt(0.04 / 3)
    assert (test["low"], test["high"]) == (pytest.approx(0.3 - half), pytest.approx(0.3 + half))
    # one game at scale 1 is the paired t test
    one = family.stratified_t({"g": [0.03, -0.01, 0.05, 0.02]}, {"g": 1.0}, 0.01)
    plain = stats.paired_t([0.03, -0.01, 0.05, 0.02], 0.01)
    assert (one["mean"], one["low"], one["p"]) == (pytest.approx(plain["mean"]), pytest.approx(plain["low"]), pytest.approx(plain["p"]))
    with pytest.raises(ValueError, match=">= 2 seeds"):
        family.stratified_t({"g": [0.1]}, {"g": 1.0}, 0.05)


def test_learning_gain_and_matched_option():
    # AUCs 0.3 and 0.1, first iterations 0.1 and 0: gains 0.2 and 0.1
    assert family.learning_gain([[0.1, 0.3, 0.5], [0.0, 0.2]]) == pytest.approx(0.15)
    order = [(1.0, "pg"), (3.0, "pg"), (1.0, "ppo"), (3.0, "ppo")]
    a = {(1.0, "pg"): 0.5, (3.0, "pg"): 0.6, (3.0, "ppo"): 0.9}
    b = {(1.0, "pg"): 0.6, (3.0, "pg"): 0.65, (1.0, "ppo"): 0.9}
    assert family.matched_option(a, b, order) == (3.0, "pg")  # 1.25 against 1.1; 3 ppo and 1 ppo are not shared
    assert family.matched_option({(1.0, "pg"): 0.5, (3.0, "pg"): 0.4}, {(1.0, "pg"): 0.4, (3.0, "pg"): 0.5}, order) == (1.0, "pg")  # tie: first
    assert family.matched_option({(1.0, "pg"): 0.5}, {(3.0, "pg"): 0.5}, order) is None


def test_judge_family_bonferroni_by_hand():
    rows = [
        {"claim": "small", "margin": 0.01, "test": lambda level: stats.paired_t([0.001, -0.001, 0.0005, -0.0005], level)},
        {"claim": "large", "margin": 0.01, "test": lambda level: stats.paired_t([0.20, 0.21, 0.19, 0.22], level)},
        {"claim": "noisy", "margin": 0.01, "test": lambda level: stats.paired_t([0.05, -0.04, 0.06, -0.03], level)},
    ]
    judged = family.judge_family(rows)
    assert [row["level"] for row in judged] == pytest.approx([0.05 / 3] * 3)
    assert [row["verdict"] for row in judged] == ["equivalent", "supported", "unresolved"]
    p = [stats.paired_t(d, 0.05)["p"] for d in ([0.001, -0.001, 0.0005, -0.0005], [0.20, 0.21, 0.19, 0.22], [0.05, -0.04, 0.06, -0.03])]
    assert [row["p_bonferroni"] for row in judged] == pytest.approx([min(1, 3 * x) for x in p])
    # the interval is the paired t interval at 1 - 0.05/3: excludes 0 exactly when 3 p < 0.05
    low, high = scipy_stats.t.interval(1 - 0.05 / 3, 3, loc=0.205, scale=stats.mean_std([0.20, 0.21, 0.19, 0.22])[1] / 2)
    assert (judged[1]["low"], judged[1]["high"]) == (pytest.approx(low), pytest.approx(high))
    assert judged[1]["claim"] == "large" and "test" not in judged[1]


def test_power_against_hand_computed_values():
    # one-sample t, effect 1 s.d., n 10, alpha 0.05: power 0.803 (the textbook / G*Power value)
    assert power.detect_power([1.0], 10, 1.0, 0.05) == pytest.approx(0.8031, abs=1e-4)
    # two games, s.d. 0.1 and 0.2, 5 seeds: variance (0.01/5 + 0.04/5) / 4 = 0.0025, se 0.05;
    # Welch df = 0.0025^2 / ((0.0005^2 + 0.002^2) / 4) = 5.882
    assert power._se_df([0.1, 0.2], 5) == (pytest.approx(0.05), pytest.approx(5.882353))
    # many seeds: close to the normal formula 2 Phi(margin/se - z) - 1; se 0.05, margin 0.2, z 1.96
    assert power.equivalence_power([1.0], 400, 0.2, 0.05) == pytest.approx(2 * scipy_stats.norm.cdf(4 - 1.96) - 1, abs=3e-3)
    # chi-square 20 % quantile with 4 df is 1.6488: sqrt(4 / 1.6488) = 1.5576
    assert power.planning_sd(1.0, 5) == pytest.approx(1.5576, abs=1e-3)
    n = power.seeds_needed([1.0], 1.0, 0.05)
    assert n == 13  # the normal formula without the t correction gives (1.96 + 1.28)^2 = 10.5
    assert power.equivalence_power([1.0], 12, 1.0, 0.05) < 0.8 <= power.equivalence_power([1.0], 13, 1.0, 0.05)
    assert power.seeds_needed([0.5, 0.5], 1.0, 0.05) < power.seeds_needed([1.0], 1.0, 0.05)  # two games share the load
    with pytest.raises(ValueError):
        power.seeds_needed([1.0], 0.0, 0.05)


def _record(name, seed, lr, curve):
    return {"contestant": name, "seed": seed, "lr": lr, "update": "pg", "success": curve, "greedy": curve,
            "credit": {}, "time": {"env_s": 0.0, "credit_s": 0.0, "update_s": 0.0}}


def _game(offsets):
    """gigpo and graphgpo at rates 1 and 3; selection seed 0, evaluation seeds 1-3. gigpo's best on
    seed 0 is rate 3 (AUC 0.5, first iteration 0.2: gain 0.3); graphgpo's too (AUC 0.45)."""
    records = [_record("gigpo", 0, 1.0, [0.2, 0.4]), _record("gigpo", 0, 3.0, [0.2, 0.8]),
               _record("graphgpo", 0, 1.0, [0.2, 0.3]), _record("graphgpo", 0, 3.0, [0.2, 0.7])]
    for seed, offset in zip((1, 2, 3), offsets):
        records += [_record("gigpo", seed, 3.0, [0.5, 0.5]), _record("graphgpo", seed, 3.0, [0.5 + offset, 0.5 + offset])]
    return records


def test_family_rows_pool_the_games_in_scale_units():
    games = [{"name": "one", "records": _game([0.03, 0.06, 0.09]), "select_seeds": [0], "margin": 0.01},
             {"name": "two", "records": _game([-0.03, 0.0, 0.03]), "select_seeds": [0], "margin": 0.01}]
    rows, views = crossgame.family_rows(games)
    assert views["one"]["scale"] == pytest.approx(0.3)
    judged = family.judge_family(rows)
    assert [(row["scope"], row["claim"]) for row in judged] == [
        ("pooled: one, two", "graphgpo > gigpo"), ("one", "graphgpo > gigpo"), ("two", "graphgpo > gigpo")]
    # scaled differences: one 0.1, 0.2, 0.3 (mean 0.2), two -0.1, 0, 0.1 (mean 0): estimate 0.1
    assert judged[0]["mean"] == pytest.approx(0.1) and judged[1]["mean"] == pytest.approx(0.06)
    assert judged[0]["level"] == pytest.approx(0.05 / 3)
    (matched_one, matched_two) = crossgame.matched_rows(games)
    assert matched_one["matched"] == (3.0, "pg") and matched_one["same_as_tuned"] and matched_one["eval_seeds"] == 3
    # spread over seeds 0-3 at rate 3: differences -0.05, 0.03, 0.06, 0.09
    assert matched_one["spread"] == pytest.approx(stats.mean_std([-0.05, 0.03, 0.06, 0.09])[1])
    (planned,) = crossgame.plan([matched_one, matched_two], {"one": 0.3, "two": 0.3}, ["one", "two"], 0.02, 0.04, 12)
    assert planned["per_game"]["one"] == power.seeds_needed([power.planning_sd(matched_one["spread"], 4)], 0.02, 0.05 / 12)


def _write_study(directory, records, **more_settings):
    directory.mkdir()
    settings = {"groups": 2, "group_size": 2, "tasks": 2, "update": "pg", **more_settings}  # what summarize checks
    study = {"select_seeds": [0], "eval_seeds": [1, 2, 3], "margin": 0.01, "updates": ["pg"]}
    (directory / "arena.json").write_text(json.dumps({"env": "x", "settings": settings, "study": study}))
    (directory / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_family_command_writes_stable_files_and_refuses_bad_input(tmp_path, capsys):
    _write_study(tmp_path / "one", _game([0.03, 0.06, 0.09]))
    _write_study(tmp_path / "two", _game([-0.03, 0.0, 0.03]))
    argv = [str(tmp_path / "one"), str(tmp_path / "two"), "--plan", "one,two", "--out", str(tmp_path / "out")]
    assert family_report.main(argv) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["claims"] == {"pooled: one, two: graphgpo > gigpo": "unresolved", "one: graphgpo > gigpo": "unresolved",
                              "two: graphgpo > gigpo": "unresolved"}
    first = {name: (tmp_path / "out" / name).read_bytes() for name in ("family.md", "family.json")}
    assert b"### The family: 3 claims" in first["family.md"] and b"graphgpo > gigpo" in first["family.md"]
    assert family_report.main(argv) == 0
    assert {name: (tmp_path / "out" / name).read_bytes() for name in first} == first
    for extra, message in ((["--plan", "three"], "--plan three: not among"), (["--relative-margin", "0"], "must be > 0")):
        assert family_report.main([str(tmp_path / "one"), "--out", str(tmp_path / "o"), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err
    assert family_report.main([str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert "arena.json: no such file" in capsys.readouterr().err
    _write_study(tmp_path / "budgeted", _game([0.03, 0.06, 0.09]), env_steps=400)  # AUC over env steps: compare's
    assert family_report.main([str(tmp_path / "budgeted"), "--out", str(tmp_path / "o")]) == 2
    assert "env-step budget" in capsys.readouterr().err and not (tmp_path / "o").exists()

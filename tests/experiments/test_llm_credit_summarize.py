"""``python -m experiments.llm_credit summarize`` on small fabricated records whose tables can be
worked out by hand; a record that is not what the study writes is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import stats as scipy_stats

from experiments.arena.stats import paired_interval, wilson_interval
from experiments.llm_credit import analysis, records
from experiments.llm_credit.summarize import main

# seed -> outcome strings on the 4 held-out tasks of eval_id
WARM = {0: "0000", 1: "1000"}
RUNS = {("grpo", 0): "1000", ("grpo", 1): "1000", ("milegpo", 0): "1110", ("milegpo", 1): "1101"}
CURVES = {"grpo": [0.0, 0.5], "gigpo": [0.25, 0.5], "milegpo": [0.5, 1.0]}
DIGEST = {0: "a0" * 32, 1: "b1" * 32}


def _evaluation(iteration: int, outcomes: str) -> dict:
    return {"iteration": iteration, "figures": {"eval/eval_id/success_rate": outcomes.count("1") / 4},
            "outcomes": {"outcomes/eval_id/seed123": outcomes}}


def _fabricate(results: Path, runs: dict = RUNS) -> None:
    for seed, outcomes in WARM.items():
        records.write_json(records.warm_path(results, seed, DIGEST[seed]),
                           {"seed": seed, "evaluation": _evaluation(0, outcomes), "warm_start_sha256": DIGEST[seed]})
    for (arm, seed), outcomes in runs.items():
        directory = records.run_dir(results, arm, seed)
        directory.mkdir(parents=True)
        # the update's KL per iteration; iteration 2 logged twice, as a resumed run redoes it: the last counts
        steps = [{"iteration": 1, "actor/kl": 0.01 * (seed + 1)}, {"iteration": 2, "actor/kl": 0.5},
                 {"iteration": 2, "actor/kl": 0.004}]
        (directory / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in steps))
        credit = [{"credit/zero_advantage_fraction": 0.5 if arm == "grpo" else 0.25,
                   "credit/tie_correction_rate": 0.5, "credit/opposite_outcome_tied_pairs": 2 + seed}]
        records.write_json(directory / "record.json", {
            "arm": arm, "seed": seed, "training_success": CURVES[arm], "evaluations": [_evaluation(2, outcomes)],
            "credit": credit, "time_s": 100.0 + seed, "peak_rss_gb": 9.0 + seed, "warm_start_sha256": DIGEST[seed],
            "machine": "EPYC (AVX2, 2 cores)"})


def test_tables_from_fabricated_records(tmp_path):
    results = tmp_path / "results"
    _fabricate(results)
    assert main([str(results)]) == 0
    summary = json.loads((results / "summary.json").read_text())
    held = summary["heldout"]
    assert held["warm start"]["eval_id"]["success"] == 1 / 8  # 1 win in 2 x 4 tasks
    assert held["grpo"]["eval_id"]["success"] == 2 / 8
    assert held["milegpo"]["eval_id"]["success"] == 6 / 8
    # milegpo - grpo, paired by (seed, task): seed 0 1110 vs 1000, seed 1 1101 vs 1000 -> only milegpo won 4
    pair = summary["paired"]["milegpo - grpo"]["eval_id"]
    assert (pair["mcnemar"]["b"], pair["mcnemar"]["c"]) == (0, 4)
    assert pair["mcnemar"]["p"] == pytest.approx(2 / 16)
    assert pair["bootstrap"]["difference"] == pytest.approx(0.5) and pair["per_seed"] == [0.5, 0.5]
    # improvement over the warm start: grpo seed 0 +1 task, seed 1 none
    gain = summary["improvement"]["grpo"]["eval_id"]
    assert (gain["mcnemar"]["b"], gain["mcnemar"]["c"]) == (0, 1) and gain["per_seed"] == [0.25, 0.0]
    assert summary["auc"]["grpo"]["mean"] == 0.25 and summary["auc"]["milegpo"]["mean"] == 0.75
    assert summary["auc_paired"]["milegpo - grpo"]["mean"] == 0.5
    assert summary["diagnostics"]["milegpo"]["zero_advantage_fraction"] == 0.25
    assert summary["cost"]["grpo"] == {"time_s_mean": 100.5, "peak_rss_gb_max": 10.0, "runs": 2,
                                       "machines": ["EPYC (AVX2, 2 cores)"]}
    assert "gigpo" not in summary["heldout"] and summary["paired"].keys() == {"milegpo - grpo"}
    text = (results / "summary.md").read_text()
    assert "| milegpo - grpo | +0.500" in text and (results / "curves.png").stat().st_size > 0
    # differences keep their sign: per-seed improvements, and a t interval that crosses zero
    assert "| grpo | +0.250, +0.000 | 1 of 2 |" in text and "McNemar 0/1 p=1; seeds: +0.125 [-1.463, +1.713] |" in text
    assert "| milegpo - grpo | +0.500 [+0.500, +0.500] (2 seeds) |" in text  # the AUC difference
    assert "| warm start | 0, 1 | 0.125 [" in text and "| milegpo | 0, 1 | 0.750 [" in text  # the seeds each row pools
    # the pre-registered verdict: p = 0.125 is not below 0.025, and 2 of the 3 planned seeds have run
    verdicts = summary["verdicts"]["comparisons"]
    assert verdicts["milegpo - grpo"] == {"verdict": "unresolved", "difference": 0.5, "p": 2 / 16, "seeds": 2, "final": False}
    assert verdicts["milegpo - gigpo"]["verdict"] == "not run yet"
    assert summary["verdicts"]["goal_by_arm"]["milegpo"] == {"per_seed": [0.75, 0.5], "met": 2, "seeds": 2, "final": False}
    assert "| milegpo - grpo | **unresolved** | +0.500 | 0.125 | provisional, 2 of 3 seeds |" in text
    # what it can resolve: 8 pairs, 4 discordant; both seeds +0.5, so the seed-to-seed s.d. is 0
    z = 2.241403 + 0.841621  # z at 1 - 0.025 / 2 and at 0.8
    reach = summary["resolution"]["comparisons"]["milegpo - grpo"]
    assert reach["pairs"] == 8 and reach["discordant"] == 0.5 and reach["detectable"] == pytest.approx(z * 0.25, abs=1e-5)
    assert reach["seed_sd"] == 0.0 and reach["seed_half_width"] == 0.0 and reach["fresh_seeds"] == 2
    assert "| milegpo - grpo | 8 | 0.500 | 0.771 | 2 | 0.000 | 0.000 | 2 |" in text
    # each run: milegpo seed 1 from its build's 1 win (1000) to 3 (1101); its largest step iteration 1's 0.02
    assert summary["runs"][-1]["largest_step"] == {"iteration": 1, "kl": 0.02}
    assert "| milegpo seed 1 | 1 → 3 of 4 | 0.50, 1.00 | 0.750 | 0.020 (1) |" in text
    assert "| grpo seed 0 | 0 → 1 of 4 | 0.00, 0.50 | 0.250 | 0.010 (1) |" in text


def test_each_pair_of_arms_once(tmp_path):
    """GiGPO is both an arm and a reference: gigpo - grpo is reported, its mirror grpo - gigpo is not."""
    results = tmp_path / "results"
    _fabricate(results, RUNS | {("gigpo", 0): "1100", ("gigpo", 1): "1100"})
    assert main([str(results)]) == 0
    summary = json.loads((results / "summary.json").read_text())
    assert summary["paired"].keys() == {"gigpo - grpo", "milegpo - grpo", "milegpo - gigpo"}
    assert summary["auc_paired"].keys() == summary["paired"].keys()
    pair = summary["paired"]["gigpo - grpo"]["eval_id"]  # seed 0 1100 vs 1000, seed 1 1100 vs 1000
    assert (pair["mcnemar"]["b"], pair["mcnemar"]["c"]) == (0, 2)
    assert "| grpo - gigpo |" not in (results / "summary.md").read_text()


def _entry(b: int, c: int, p: float, seeds: int) -> dict:
    return {"mcnemar": {"b": b, "c": c, "p": p}, "bootstrap": {"difference": (c - b) / 96}, "seeds": seeds}


def test_the_pre_registered_verdict_rule():
    """Supported or refuted only below alpha, by the sign of the difference; final at the planned seeds;
    the goal counts the seeds whose own improvement reaches it (0.15 exactly counts)."""
    summary = {"paired": {"milegpo - grpo": {"eval_id": _entry(0, 9, 0.0039, 3)},
                          "milegpo - gigpo": {"eval_id": _entry(9, 0, 0.0039, 2), "eval_ood": _entry(0, 9, 0.0039, 3)},
                          "gigpo - grpo": {"eval_id": _entry(0, 9, 0.0039, 3)}},
               "improvement": {"grpo": {"eval_id": {"per_seed": [0.15, 0.2, 0.1]}}, "milegpo": {}}}
    out = analysis.verdicts(summary, ("milegpo - grpo", "milegpo - gigpo"), "eval_id", 0.025, 3, 0.15)
    assert out["comparisons"]["milegpo - grpo"]["verdict"] == "supported" and out["comparisons"]["milegpo - grpo"]["final"]
    assert out["comparisons"]["milegpo - gigpo"]["verdict"] == "refuted" and not out["comparisons"]["milegpo - gigpo"]["final"]
    assert out["comparisons"].keys() == {"milegpo - grpo", "milegpo - gigpo"}  # gigpo - grpo is not primary
    summary["paired"]["milegpo - grpo"]["eval_id"] = _entry(2, 9, 0.065, 3)
    assert analysis.verdicts(summary, ("milegpo - grpo",), "eval_id", 0.025, 3, 0.15)["comparisons"]["milegpo - grpo"]["verdict"] == "unresolved"
    assert out["goal_by_arm"]["grpo"] == {"per_seed": [0.15, 0.2, 0.1], "met": 2, "seeds": 3, "final": True}
    assert out["goal_by_arm"]["milegpo"] == {"per_seed": [], "met": 0, "seeds": 0, "final": False}


def test_resolution_from_the_seed_spread():
    """Seeds +0.1, +0.3, +0.2: s.d. 0.1, 95 % t half-width t(0.975, 2) * 0.1 / sqrt(3) = 0.248; one seed has
    no spread; a comparison not run yet is left out. A fresh study plans at the s.d.'s 80 % upper bound,
    0.1 * sqrt(2 / chi2(0.2; 2)) with chi2(0.2; 2) = -2 ln 0.8, and needs 28 seeds for ±0.15 at 0.025: at 28
    the interval's half-width at a true 0 stays within 0.15 with 80 % power, at 27 not (the equivalence
    side binds; detection alone would need fewer)."""
    def entry(per_seed, b, c, pairs):
        t = {"low": None} if len(per_seed) < 2 else paired_interval(per_seed)
        return {"eval_id": {"mcnemar": {"b": b, "c": c}, "pairs": pairs, "seeds": len(per_seed), "per_seed": per_seed, "seed_t": t}}

    summary = {"paired": {"milegpo - grpo": entry([0.1, 0.3, 0.2], 3, 21, 96), "gigpo - grpo": entry([0.2], 0, 1, 32)}}
    out = analysis.resolution(summary, ("milegpo - grpo", "milegpo - gigpo", "gigpo - grpo"), "eval_id", 0.025, 0.15)
    main_ = out["comparisons"]["milegpo - grpo"]
    plan = 0.1 * math.sqrt(2 / (-2 * math.log(0.8)))
    assert main_["fresh_seeds"] == 28

    def equivalence_power(n):  # P(t interval at a true 0 lies within ±0.15), by P(one side) * 2 - 1
        crit = scipy_stats.t.ppf(1 - 0.025 / 2, n - 1)
        return 2 * scipy_stats.nct.sf(crit, n - 1, 0.15 / (plan / math.sqrt(n))) - 1
    assert equivalence_power(28) >= 0.8 > equivalence_power(27)
    assert main_["discordant"] == 0.25 and main_["seed_sd"] == pytest.approx(0.1)
    assert main_["seed_half_width"] == pytest.approx(4.302653 * 0.1 / 3**0.5, abs=1e-6)
    assert out["comparisons"]["gigpo - grpo"]["seed_sd"] is None and out["comparisons"]["gigpo - grpo"]["fresh_seeds"] is None
    assert out["comparisons"].keys() == {"milegpo - grpo", "gigpo - grpo"}


def test_a_run_pairs_with_the_build_it_started_from(tmp_path):
    """Seed 0's warm start built again on another machine (other bits, other outcomes): the warm-start
    row counts each (seed, task) once, averaging the builds, and each run's improvement pairs with its
    own build."""
    results = tmp_path / "results"
    _fabricate(results)
    other = "c2" * 32
    records.write_json(records.warm_path(results, 0, other),
                       {"seed": 0, "evaluation": _evaluation(0, "1100"), "warm_start_sha256": other})
    path = records.run_dir(results, "milegpo", 0) / "record.json"
    records.write_json(path, {**json.loads(path.read_text()), "warm_start_sha256": other})
    assert main([str(results)]) == 0
    summary = json.loads((results / "summary.json").read_text())
    # seed 0: 0000 and 1100 average to 0.5, 0.5, 0, 0; seed 1: 1000. Two wins in 8 (seed, task) pairs,
    # not 3 in 12: the second build replays the same tasks and is not more evidence
    warm = summary["heldout"]["warm start"]["eval_id"]
    assert (warm["success"], warm["tasks"]) == (2 / 8, 8)
    assert warm["ci95"] == pytest.approx(list(wilson_interval(2, 8)))
    assert warm["per_seed"] == {"0": 0.25, "1": 0.25}
    # milegpo seed 0: 1110 against its build's 1100 (+1 task), not against 0000 (+3)
    assert summary["improvement"]["milegpo"]["eval_id"]["per_seed"] == [0.25, 0.5]
    assert summary["improvement"]["grpo"]["eval_id"]["per_seed"] == [0.25, 0.0]  # still against 0000
    # a run whose build has no record, or a record filed under another build's name: one line, exit 2
    records.write_json(path, {**json.loads(path.read_text()), "warm_start_sha256": "d3" * 32})
    assert main([str(results), "--out", str(tmp_path / "out")]) == 2
    records.write_json(path, {**json.loads(path.read_text()), "warm_start_sha256": other})
    misnamed = records.warm_path(results, 1, other)
    records.write_json(misnamed, json.loads(records.warm_path(results, 0, other).read_text()))
    assert main([str(results), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage", ["not json", "no arm", "bad outcomes", "no metrics", "bad metrics"])
def test_a_bad_record_writes_nothing(tmp_path, capsys, damage):
    results = tmp_path / "results"
    _fabricate(results)
    path = records.run_dir(results, "milegpo", 1) / "record.json"
    record = json.loads(path.read_text())
    if damage == "not json":
        path.write_text("{")
    elif damage == "no arm":
        del record["arm"]
        path.write_text(json.dumps(record))
    elif damage == "bad outcomes":
        record["evaluations"][0]["outcomes"]["outcomes/eval_id/seed123"] = "11y0"
        path.write_text(json.dumps(record))
    else:  # the metrics log beside the record: gone, or a line that is not JSON before the last
        path = path.with_name("metrics.jsonl")
        if damage == "no metrics":
            path.unlink()
        else:
            path.write_text("{\n" + path.read_text())
    assert main([str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]
    assert not any((results / name).exists() for name in ("summary.md", "summary.json", "curves.png"))


def test_not_a_directory_or_empty(tmp_path, capsys):
    assert main([str(tmp_path / "missing")]) == 2
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2

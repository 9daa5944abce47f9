"""experiments.report on sweep work directories written by the real metrics logger."""

import json

import numpy as np
import pytest

from experiments import report
from milegpo_jax.train.logging import MetricsLogger

TYPES = ("look_at_obj_in_light", "pick_and_place_simple", "pick_clean_then_place_in_recep")
METHODS = {"milegpo": 0.8, "milegpo-no-pcc": 0.7, "gigpo": 0.6}


def _final_eval(method, seed):
    """The numbers each synthetic run ends on (a pure function, so the test can recompute them)."""
    rng = np.random.default_rng([len(method), seed])
    base = METHODS[method]
    per_type = {t: float(np.clip(base + rng.normal(0, 0.05), 0, 1)) for t in TYPES}
    return {
        "eval_id": {"success_rate": float(np.mean(list(per_type.values()))), "score": base - 0.01 * seed,
                    **{f"success_rate/{t}": v for t, v in per_type.items()}},
        "eval_ood": {"success_rate": base - 0.1 - 0.02 * seed, "score": base - 0.12},
    }


def _write_sweep(root, seeds=(0, 1, 2)):
    for method in METHODS:
        for seed in seeds:
            with MetricsLogger(root / f"{method}-seed{seed}", tensorboard=False) as logger:
                logger.log(0, {"eval": {"eval_id": {"success_rate": 0.05, "score": 0.05}, "eval_ood": {"success_rate": 0.04}}})
                for iteration in range(1, 11):
                    metrics = {"rollout": {"success_rate": 0.1 * iteration, "episode_length": 30 - iteration},
                               "credit": {"tie_share": 0.4, "tie_correction_rate": 0.3}, "actor": {"kl": 0.001}}
                    if iteration == 5:
                        metrics["eval"] = {"eval_id": {"success_rate": 0.3, "score": 0.3}}
                    if iteration == 10:
                        metrics["eval"] = _final_eval(method, seed)
                    logger.log(iteration, metrics)


def test_tables_match_an_independent_computation(tmp_path, capsys):
    root = tmp_path / "ablation-alfworld"
    _write_sweep(root)
    assert report.main([str(root), "--out", str(tmp_path / "out" / "tables")]) == 0
    printed = capsys.readouterr().out
    summary = json.loads(printed.strip().splitlines()[-1])
    assert summary["runs"] == 9 and list(summary["id_success"]["ablation-alfworld"]) == ["milegpo", "milegpo-no-pcc", "gigpo"]
    tables = json.loads((tmp_path / "out" / "tables.json").read_text())["ablation-alfworld"]
    assert {run["iteration"] for run in tables["runs"]} == {10}  # the last evaluation, not iteration 5 or 0
    for method in METHODS:
        finals = [_final_eval(method, seed) for seed in (0, 1, 2)]
        for t in TYPES:
            values = [f["eval_id"][f"success_rate/{t}"] for f in finals]
            entry = tables["table1"][method][f"success/{t}"]
            assert entry["mean"] == pytest.approx(np.mean(values)) and entry["std"] == pytest.approx(np.std(values, ddof=1))
        gaps = [f["eval_id"]["success_rate"] - f["eval_ood"]["success_rate"] for f in finals]
        assert tables["table2"][method]["gap"]["mean"] == pytest.approx(np.mean(gaps))
        assert tables["table2"][method]["gap"]["std"] == pytest.approx(np.std(gaps, ddof=1))
        ood = [f["eval_ood"]["success_rate"] for f in finals]
        assert tables["table2"][method]["ood_success"]["mean"] == pytest.approx(np.mean(ood))
    reference = np.mean([_final_eval("milegpo", s)["eval_id"]["score"] for s in (0, 1, 2)])
    gigpo = np.mean([_final_eval("gigpo", s)["eval_id"]["score"] for s in (0, 1, 2)])
    assert tables["table3"]["gigpo"]["delta_score"] == pytest.approx(gigpo - reference)
    markdown = (tmp_path / "out" / "tables.md").read_text()
    assert "Table 1" in markdown and "| milegpo | 3 |" in markdown and "pick_and_place_simple" in markdown


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert report.main([str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert report.main([str(tmp_path / "empty")]) == 2
    assert "holds no run" in capsys.readouterr().err
    with MetricsLogger(tmp_path / "noeval" / "grpo-seed0", tensorboard=False) as logger:
        logger.log(1, {"rollout": {"success_rate": 0.2}})
    assert report.main([str(tmp_path / "noeval")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no evaluation record" in err


def _one_run(root, lines: bytes):
    run = root / "grpo-seed0"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_bytes(lines)
    return run / "metrics.jsonl"


GOOD = b'{"iteration": 1, "eval/eval_id/success_rate": 0.5}\n'


@pytest.mark.parametrize(
    "lines, place, says",
    [
        (b"[1, 2]\n" + GOOD, ":1:", "not a JSON object"),
        (GOOD + b'{"iteration": 2, "eval/eval_id/success_rate": 0.\xff}\n' + GOOD, ":2:", "not UTF-8"),
        (GOOD + b'{"iteration": 2, "eval/eval_id/success_rate": "high"}\n', ":2:", "'high', not a number"),
        (GOOD + b'{"iteration": 2, "eval/eval_id/success_rate": true}\n', ":2:", "not a number"),
        (b'{"iteration": "one", "eval/eval_id/success_rate": 0.5}\n', ":1:", "not an integer"),
        (b"42\n", ":1:", "not a JSON object"),
    ],
)
def test_malformed_metrics_lines_are_one_line_naming_file_and_line(tmp_path, capsys, lines, place, says):
    path = _one_run(tmp_path / "sweep", lines)
    assert report.main([str(tmp_path / "sweep"), "--out", str(tmp_path / "out" / "t")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and f"{path}{place}" in err and says in err, err
    assert captured.out == "" and not list((tmp_path / "out").iterdir())  # nothing written


def test_non_finite_values_are_skipped_counted_and_the_json_is_strict(tmp_path, capsys):
    lines = (b'{"iteration": 3, "eval/eval_id/success_rate": NaN, "eval/eval_id/score": 0.25, '
             b'"eval/eval_ood/success_rate": null, "eval/eval_ood/score": Infinity}\n')
    _one_run(tmp_path / "sweep", lines)
    assert report.main([str(tmp_path / "sweep"), "--out", str(tmp_path / "t")]) == 0
    strict = lambda text: json.loads(text, parse_constant=lambda name: pytest.fail(f"bare {name} in the JSON"))
    summary = strict(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["non_finite_skipped"] == 3 and summary["id_success"] == {"sweep": {"grpo": None}}
    tables = strict((tmp_path / "t.json").read_text())["sweep"]
    assert tables["runs"][0]["non_finite_skipped"] == 3 and tables["table1"]["grpo"]["score"]["mean"] == 0.25


def test_overflowing_means_become_null_not_bare_infinity(tmp_path, capsys):
    for seed in (0, 1):
        run = tmp_path / "sweep" / f"grpo-seed{seed}"
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text('{"iteration": 1, "eval/eval_id/success_rate": 1.5e308}\n')
    assert report.main([str(tmp_path / "sweep")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1], parse_constant=lambda name: pytest.fail(name))
    assert summary["id_success"] == {"sweep": {"grpo": None}}


@pytest.mark.parametrize("out, says", [("/proc/nonexistent/x", "cannot create folder"), ("{dir}/is_a_dir", "is a directory")])
def test_unwritable_out_is_refused_before_any_work(tmp_path, capsys, out, says):
    _one_run(tmp_path / "sweep", GOOD)
    (tmp_path / "is_a_dir.json").mkdir()
    assert report.main([str(tmp_path / "sweep"), "--out", out.format(dir=tmp_path)]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1 and says in captured.err and captured.out == ""

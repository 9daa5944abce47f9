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

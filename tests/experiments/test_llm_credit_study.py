"""The credit study's harness (experiments/llm_credit/study.py) with a stand-in for the training
process: which runs it starts, that a seed's warm start is built once and shared by hard links, that a
rerun resumes from the committed records (also on a fresh checkout, where the warm start is rebuilt
and evaluated again only if its bits differ from every recorded build), and that bad input writes
nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.llm_credit import records, study

TINY = ["--config.model.hf_checkpoint=None", "--config.model.architecture.hidden_size=32",
        "--config.model.architecture.num_layers=1", "--config.optim.trainable_layers=0"]


class FakeTrainer:
    """Writes what ``experiments.train`` would: the warm start's files, or a run's metrics."""

    def __init__(self, weights: bytes = b"weights"):
        self.calls: list[tuple[str, ...]] = []
        self.weights = weights

    def __call__(self, args, overrides, workdir: Path):
        values = dict(o.split("=", 1) for o in overrides)
        seed, iterations = int(values["run.seed"]), int(values.get("run.iterations", 2))
        workdir.mkdir(parents=True, exist_ok=True)
        outcomes = {"outcomes/eval_id/seed123": "01" if seed else "00"}
        lines = []
        if iterations == 0:
            evaluate = values["run.eval_before_training"] == "true"
            self.calls.append(("warm", seed, values["run.eval_before_training"]))
            warm = workdir / "warm_start"
            if evaluate:  # plays the warm start the first pass built
                assert (warm / "warm_start_inputs.json").exists()
                other = self.weights != b"weights"
                lines.append({"iteration": 0, "eval/eval_id/success_rate": 0.5 * seed,
                              "outcomes/eval_id/seed123": "10" if other and not seed else outcomes["outcomes/eval_id/seed123"]})
            else:
                warm.mkdir(exist_ok=True)
                (warm / "model.safetensors").write_bytes(self.weights + bytes([seed]))
                (warm / "warm_start_inputs.json").write_text("{}")
        else:
            self.calls.append((values["credit.estimator"], seed))
            assert (workdir / "warm_start" / "model.safetensors").read_bytes() == self.weights + bytes([seed])
            lines += [{"iteration": 1, "rollout/success_rate": 0.25, "credit/zero_advantage_fraction": 0.5, "time/update_s": 2.0},
                      {"iteration": 2, "rollout/success_rate": 0.75, "credit/zero_advantage_fraction": 0.25,
                       "time/update_s": 3.0, "eval/eval_id/success_rate": 1.0, "outcomes/eval_id/seed123": "11"}]
        (workdir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        return 0, 1.5, 0.1


def _run(monkeypatch, tmp_path, fake, *flags):
    monkeypatch.setattr(study, "_train", fake)
    argv = ["--results", str(tmp_path / "results"), "--work", str(tmp_path / "work"), *TINY, *flags]
    return study.main(argv)


def test_runs_piecewise_and_resumes_from_the_records(monkeypatch, tmp_path, capsys):
    fake = FakeTrainer()
    assert _run(monkeypatch, tmp_path, fake, "--arms", "grpo,gigpo", "--seeds", "0-1", "--max-runs", "3") == 0
    # seed by seed, each warm start built and evaluated once before its first arm
    assert fake.calls == [("warm", 0, "false"), ("warm", 0, "true"), ("grpo", 0), ("gigpo", 0),
                          ("warm", 1, "false"), ("warm", 1, "true"), ("grpo", 1)]
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["left"] == ["gigpo-seed1"]
    work, results = tmp_path / "work", tmp_path / "results"
    shared = work / "gigpo-seed0" / "warm_start" / "model.safetensors"
    assert shared.stat().st_ino == (work / "warm-seed0" / "warm_start" / "model.safetensors").stat().st_ino
    record = json.loads((results / "runs" / "grpo-seed1" / "record.json").read_text())
    assert record["training_success"] == [0.25, 0.75] and record["time_s"] == 5.0 and record["peak_rss_gb"] == 1.5
    assert record["evaluations"] == [{"iteration": 2, "figures": {"eval/eval_id/success_rate": 1.0},
                                      "outcomes": {"outcomes/eval_id/seed123": "11"}}]
    digest = records.weights_digest(work / "warm-seed1" / "warm_start")
    assert record["warm_start_sha256"] == digest and "cores" in record["machine"]
    warm_path = results / "warm" / f"seed1-{digest[:12]}.json"
    warm = json.loads(warm_path.read_text())
    assert warm["evaluation"]["outcomes"] == {"outcomes/eval_id/seed123": "01"} and warm["machine"] == record["machine"]

    fake.calls.clear()  # the same command again: only the missing run
    assert _run(monkeypatch, tmp_path, fake, "--arms", "grpo,gigpo", "--seeds", "0-1") == 0
    assert fake.calls == [("gigpo", 1)]

    # a fresh checkout: the records only. A new arm rebuilds each warm start without evaluating it again.
    import shutil

    shutil.rmtree(work)
    fake.calls.clear()
    assert _run(monkeypatch, tmp_path, fake, "--arms", "grpo,gigpo,milegpo", "--seeds", "0-1") == 0
    assert fake.calls == [("warm", 0, "false"), ("milegpo", 0), ("warm", 1, "false"), ("milegpo", 1)]
    assert json.loads(warm_path.read_text()) == warm  # the record stays as it was
    assert len(list((results / "warm").iterdir())) == 2


def test_a_build_with_other_bits_is_evaluated_once_and_paired_with_its_runs(monkeypatch, tmp_path, capsys):
    """Another machine type rebuilds seed 0's warm start with other bits: that build is evaluated and
    recorded beside the first, and the run started from it names it."""
    from experiments.llm_credit import summarize

    assert _run(monkeypatch, tmp_path, FakeTrainer(), "--arms", "grpo", "--seeds", "0") == 0
    import shutil

    shutil.rmtree(tmp_path / "work")
    other = FakeTrainer(weights=b"other weights")
    assert _run(monkeypatch, tmp_path, other, "--arms", "grpo,gigpo", "--seeds", "0") == 0
    assert other.calls == [("warm", 0, "false"), ("warm", 0, "true"), ("gigpo", 0)]
    results = tmp_path / "results"
    builds = records.load_warm_builds(results)
    digest = records.weights_digest(tmp_path / "work" / "warm-seed0" / "warm_start")
    assert len(builds) == 2 and builds[digest]["evaluation"]["outcomes"] == {"outcomes/eval_id/seed123": "10"}
    runs = {arm: json.loads((results / "runs" / f"{arm}-seed0" / "record.json").read_text()) for arm in ("grpo", "gigpo")}
    assert runs["gigpo"]["warm_start_sha256"] == digest != runs["grpo"]["warm_start_sha256"] in builds

    other.calls.clear()  # the same machine again: the build is recorded, nothing is evaluated twice
    assert _run(monkeypatch, tmp_path, other, "--arms", "grpo,gigpo", "--seeds", "0") == 0
    assert other.calls == []
    capsys.readouterr()
    assert summarize.main([str(results)]) == 0
    summary = json.loads((results / "summary.json").read_text())
    # gigpo (11) against its build (10): +1 of 2 tasks; grpo (11) against the first build (00): +2
    assert summary["improvement"]["gigpo"]["eval_id"]["per_seed"] == [0.5]
    assert summary["improvement"]["grpo"]["eval_id"]["per_seed"] == [1.0]


@pytest.mark.parametrize("flags, flag", [
    (["--arms", "grpo,ppo"], "--arms"),
    (["--seeds", "two"], "--seeds"),
    (["--seeds", "3-1"], "--seeds"),
    (["--max-runs", "0"], "--max-runs"),
    (["--config.run.iterations=-1"], "run.iterations"),
])
def test_bad_input_is_one_line_and_writes_nothing(monkeypatch, tmp_path, capsys, flags, flag):
    fake = FakeTrainer()
    assert _run(monkeypatch, tmp_path, fake, *flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]
    assert fake.calls == [] and not (tmp_path / "results").exists() and not (tmp_path / "work").exists()


def test_another_study_in_the_same_results_is_refused(monkeypatch, tmp_path, capsys):
    assert _run(monkeypatch, tmp_path, FakeTrainer(), "--arms", "grpo", "--seeds", "0") == 0
    before = (tmp_path / "results" / "study.json").read_text()
    fake = FakeTrainer()
    assert _run(monkeypatch, tmp_path, fake, "--arms", "grpo", "--seeds", "0", "--config.optim.learning_rate=1e-3") == 2
    assert "another study" in capsys.readouterr().err
    assert fake.calls == [] and (tmp_path / "results" / "study.json").read_text() == before

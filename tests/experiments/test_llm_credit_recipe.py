"""The study's recipe (experiments/configs/smollm2_twc2.py: TWC with 2 items, a 15-step cap, no history,
a warm start without the expert's repeated opening, evaluation sampled and greedy on fixed task lists)
run by the credit study's harness in miniature: a tiny random model with a word tokenizer in place of
SmolLM2, one seed, one arm, one iteration. The warm start is evaluated once and recorded with one
outcome per task; the arm starts from the same weights (hard links) and its record holds each
evaluation's per-task outcomes, sampled and greedy, in the task order; summarize rebuilds the tables
from the records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "model.hf_checkpoint=None", "model.architecture.hidden_size=32", "model.architecture.intermediate_size=64",
    "model.architecture.num_layers=1", "model.architecture.num_heads=2", "model.architecture.num_kv_heads=1",
    "model.scan_layers=false", "optim.trainable_layers=0",
    "env.groups_per_iteration=1", "env.group_size=2", "env.max_env_steps=2",
    "env.eval_tasks_per_split.eval_id=3", "env.eval_tasks_per_split.eval_ood=1",
    "sampling.max_new_tokens=8", "sft.episodes=1", "run.iterations=1",
    "logging.progress_bar=false", "logging.tensorboard=false",
]


@pytest.mark.timeout(900)  # two training processes: about 2 minutes of CPU time on a quiet machine
def test_the_study_runs_the_recipe_in_miniature(tmp_path):
    results, work = tmp_path / "results", tmp_path / "work"
    command = [sys.executable, "-m", "experiments.llm_credit", "run", "--arms", "gigpo", "--seeds", "0",
               "--results", str(results), "--work", str(work), *(f"--config.{o}" for o in TINY)]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=850)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["finished"] == ["gigpo-seed0"]

    [warm_path] = (results / "warm").glob("seed0-*.json")  # one build, named by its weights digest
    warm = json.loads(warm_path.read_text())
    lists = {"eval_id": 3, "eval_ood": 1}
    expected = {f"outcomes/{mode}{split}/seed123": n for split, n in lists.items() for mode in ("", "greedy/")}
    assert {k: len(v) for k, v in warm["evaluation"]["outcomes"].items()} == expected
    assert warm["evaluation"]["iteration"] == 0 and "eval/greedy/eval_id/success_rate" in warm["evaluation"]["figures"]
    weights = sorted((work / "gigpo-seed0" / "warm_start").glob("*.safetensors"))
    assert weights and all(w.stat().st_ino == (work / "warm-seed0" / "warm_start" / w.name).stat().st_ino for w in weights)

    record = json.loads((results / "runs" / "gigpo-seed0" / "record.json").read_text())
    assert len(record["training_success"]) == 1 and record["peak_rss_gb"] > 0
    assert record["warm_start_sha256"] == warm["warm_start_sha256"] and warm_path.name == f"seed0-{record['warm_start_sha256'][:12]}.json"
    [evaluation] = record["evaluations"]  # the arm does not evaluate the warm start again
    assert evaluation["iteration"] == 1
    assert {k: len(v) for k, v in evaluation["outcomes"].items()} == expected
    for key, text in evaluation["outcomes"].items():  # each string agrees with the logged rate
        figure = "eval/" + key[len("outcomes/"):].rsplit("/", 1)[0] + "/success_rate"
        assert evaluation["figures"][figure] == text.count("1") / len(text)
    assert "credit/zero_advantage_fraction" in record["credit"][0]

    summarize = subprocess.run([sys.executable, "-m", "experiments.llm_credit", "summarize", str(results)],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert summarize.returncode == 0, summarize.stderr
    summary = json.loads((results / "summary.json").read_text())
    assert set(summary["heldout"]) == {"warm start", "gigpo"}
    assert set(summary["lists"]) == {"eval_id", "eval_ood", "greedy/eval_id", "greedy/eval_ood"}

"""End to end on TextWorldExpress with a tiny policy: a short run trains, logs and checkpoints, and a
run stopped after one iteration and resumed ends bit-identical to an uninterrupted one."""

from __future__ import annotations

import json
import shutil

import jax
import numpy as np
import pytest
from flax import nnx

from experiments.train import build_config
from milegpo_jax.train.trainer import Trainer
from tests.train.tiny_configs import SHORT_EPISODES, SHORT_ITERATIONS, TINY_MODEL, short_sft

TINY = [*TINY_MODEL, *SHORT_EPISODES, "env.history_length=0", *SHORT_ITERATIONS, *short_sft()]


def _run(workdir, iterations):
    config = build_config("experiments/configs/demo.py", [*TINY, f"run.iterations={iterations}"])
    trainer = Trainer(config, workdir)
    summary = trainer.run()
    return trainer, summary


def _params(trainer):
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(trainer.model, nnx.Param))]


@pytest.mark.slow
def test_short_run_then_resume_is_bitwise_identical(tmp_path):
    straight, summary = _run(tmp_path / "straight", 2)
    assert summary["resumed_from"] == 0 and "eval_id/success_rate" in summary["eval_after"]
    records = [json.loads(line) for line in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if "actor/loss" in r]
    assert [r["iteration"] for r in trained] == [1, 2]
    assert all(np.isfinite(r["actor/loss"]) and np.isfinite(r["actor/kl"]) for r in trained)
    assert (tmp_path / "straight" / "checkpoints" / "2").is_dir()
    assert (tmp_path / "straight" / "warm_start" / "config.json").is_file()

    # The same starting point: TextWorldExpress's gold paths (the SFT data) are not reproducible across
    # JVM starts, so the second run reuses the first run's warm start, as a resumed run reuses its own.
    for name in ("warm_start", "tokenizer"):
        shutil.copytree(tmp_path / "straight" / name, tmp_path / "resumed" / name)
    _run(tmp_path / "resumed", 1)  # "killed" after iteration 1: only its checkpoint survives
    resumed, summary = _run(tmp_path / "resumed", 2)
    assert summary["resumed_from"] == 1
    for a, b in zip(_params(straight), _params(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    resumed_records = [json.loads(line) for line in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in resumed_records if r["iteration"] == 2 and "actor/loss" in r][0]
    assert last["actor/loss"] == trained[-1]["actor/loss"]

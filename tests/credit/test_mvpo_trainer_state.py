"""MVPO's success EMA is trainer state: it advances every iteration, is saved in the checkpoint, and a
resumed run continues it bit for bit (same tiny TextWorldExpress run as tests/train/test_trainer.py)."""

from __future__ import annotations

import shutil

import pytest

from experiments.train import build_config
from milegpo_jax.train.trainer import Trainer
from tests.train.test_trainer import TINY

START = 0.37  # a non-zero m_0, so that an EMA lost on resume (reset to 0) shows


def _run(workdir, iterations, preset=None):
    config = build_config(
        "experiments/configs/demo.py", [*TINY, "credit.estimator=mvpo", "credit.stage=None", f"run.iterations={iterations}"]
    )
    trainer = Trainer(config, workdir)
    if preset is not None:
        trainer.credit_ema = preset
    trainer.run()
    return trainer


@pytest.mark.slow
def test_mvpo_ema_advances_and_survives_resume(tmp_path):
    straight = _run(tmp_path / "straight", 2, preset=START)
    assert straight.credit_ema >= 0.81 * START - 1e-6  # two float32 updates with β = 0.9 from m_0 = START
    for name in ("warm_start", "tokenizer"):
        shutil.copytree(tmp_path / "straight" / name, tmp_path / "resumed" / name)
    _run(tmp_path / "resumed", 1, preset=START)  # "killed" after iteration 1
    resumed = _run(tmp_path / "resumed", 2)  # starts at 0 unless the checkpoint restores the EMA
    assert resumed.credit_ema == straight.credit_ema

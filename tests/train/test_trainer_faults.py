"""Trainer faults (issue 16 §3): a warm start that does not match the config, a half-written warm
start, a checkpoint save that fails for lack of space, and a work directory that cannot be written."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import pytest

from experiments.train import build_config
from milegpo_jax.train.checkpoint import CheckpointWriteError, Checkpointer
from milegpo_jax.train.trainer import Trainer
from milegpo_jax.train.warm_start import INPUTS_FILE, warm_start_status

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "model.architecture.hidden_size=32",
    "model.architecture.intermediate_size=64",
    "model.architecture.num_layers=1",
    "env.groups_per_iteration=2",
    "env.group_size=2",
    "env.max_env_steps=3",
    "env.history_length=0",
    "sft.episodes=2",
    "sft.epochs=1",
    "sft.batch_rows=4",
    "logging.progress_bar=false",
]


def _trainer(workdir: Path, *overrides: str) -> Trainer:
    trainer = Trainer(build_config("experiments/configs/demo.py", [*TINY, *overrides]), workdir)
    trainer.pool.close()
    trainer.checkpointer.close()
    return trainer


def _hidden_size(warm_start: Path) -> int:
    return json.loads((warm_start / "config.json").read_text())["hidden_size"]


@pytest.mark.slow
def test_a_warm_start_for_another_config_is_rebuilt_before_the_first_checkpoint(tmp_path, capsys):
    workdir = tmp_path / "run"
    _trainer(workdir)  # writes the warm start, then "dies" before any checkpoint
    assert _hidden_size(workdir / "warm_start") == 32
    changed = ("model.architecture.hidden_size=64", "sft.epochs=2")
    trainer = _trainer(workdir, *changed)
    err = capsys.readouterr().err
    assert "model.architecture.hidden_size: 32 -> 64" in err and "sft.epochs: 1 -> 2" in err and "rebuilding" in err
    assert _hidden_size(workdir / "warm_start") == 64 and trainer.model.config.hidden_size == 64
    assert warm_start_status(workdir / "warm_start", trainer.config) == ("matches", [])
    assert not list(tmp_path.glob("run/.warm_start.tmp-*"))


@pytest.mark.slow
def test_a_half_written_warm_start_is_rebuilt(tmp_path, capsys):
    workdir = tmp_path / "run"
    (workdir / "warm_start").mkdir(parents=True)
    (workdir / "warm_start" / "config.json").write_text(json.dumps({"model_type": "qwen2"}))  # tokenizer never came
    trainer = _trainer(workdir)
    assert "incomplete" in capsys.readouterr().err
    assert (workdir / "warm_start" / INPUTS_FILE).is_file() and (workdir / "warm_start" / "tokenizer.json").is_file()
    assert trainer.model.config.hidden_size == 32


def _state():
    return {"params": {"w": jnp.ones((512, 512), jnp.float32)}}  # 1 MiB


def test_a_save_that_runs_out_of_space_fails_at_that_save_in_one_line(tmp_path, monkeypatch):
    from etils import epath

    checkpointer = Checkpointer(tmp_path, "hash")
    checkpointer.save_now(1, _state())
    real_write = epath.Path.write_text

    def disk_full(self, *args, **kwargs):
        if "checkpoints" in str(self):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(epath.Path, "write_text", disk_full)
    with pytest.raises(CheckpointWriteError) as error:
        checkpointer.save_now(2, _state())
    message = str(error.value)
    assert "\n" not in message and "iteration 2" in message and "No space left on device" in message
    checkpointer.close()  # does not raise the reported failure again
    left = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert left == ["1"], left  # no half-written 2 or 2.orbax-checkpoint-tmp-*


def _mounted_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, check=False).returncode == 0


def test_a_really_full_disk_fails_at_the_save_and_leaves_nothing(tmp_path):
    disk = tmp_path / "disk"
    if not _mounted_tmpfs(disk, "3M"):
        pytest.skip("cannot mount a tmpfs here (needs root); the patched-writer test covers the logic")
    try:
        checkpointer = Checkpointer(disk, "hash")
        checkpointer.save_now(1, _state())
        with pytest.raises(CheckpointWriteError, match="iteration 2") as error:
            checkpointer.save_now(2, {"params": {"w": jnp.ones((1024, 1024), jnp.float32)}})  # 4 MiB
        assert "\n" not in str(error.value)
        checkpointer.close()
        assert sorted(p.name for p in (disk / "checkpoints").iterdir()) == ["1"]
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_an_unwritable_workdir_is_one_line_and_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = subprocess.run(
        [sys.executable, "-m", "experiments.train", "--config", "experiments/configs/demo.py",
         "--workdir", str(blocker / "run"), *(f"--config.{o}" for o in TINY)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: work directory") and "not writable" in lines[0], lines
    assert blocker.read_text() == "not a directory"

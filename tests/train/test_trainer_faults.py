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
import numpy as np
import pytest

from experiments.train import build_config
from milegpo_jax.train.checkpoint import CheckpointWriteError, Checkpointer
from milegpo_jax.train.trainer import Trainer
from milegpo_jax.train.warm_start import INPUTS_FILE, warm_start_status
from tests.train.tiny_configs import SHORT_EPISODES, TINY_MODEL, short_sft

ROOT = Path(__file__).resolve().parents[2]
TINY = [*TINY_MODEL, *SHORT_EPISODES, "env.history_length=0", *short_sft()]


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
    assert warm_start_status(workdir / "warm_start", trainer.warm_start.inputs) == ("matches", [])
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


@pytest.mark.slow
def test_a_warm_start_whose_tokenizer_files_were_deleted_is_rebuilt_saying_so(tmp_path, capsys):
    workdir = tmp_path / "run"
    trainer = _trainer(workdir)
    for file in (workdir / "warm_start").glob("tokenizer*.json"):
        file.unlink()
    status, why = warm_start_status(workdir / "warm_start", trainer.warm_start.inputs)
    assert status == "incomplete" and "tokenizer.json: missing" in why[0]
    capsys.readouterr()
    _trainer(workdir)
    assert "rebuilding" in capsys.readouterr().err
    assert warm_start_status(workdir / "warm_start", trainer.warm_start.inputs) == ("matches", [])


SAVE_UNDER_A_FILE_SIZE_LIMIT = """
import resource, signal, sys
import jax.numpy as jnp, numpy as np
from milegpo_jax.train.checkpoint import Checkpointer, CheckpointWriteError
noise = np.random.default_rng(0)  # incompressible: orbax compresses what it writes
checkpointer = Checkpointer(sys.argv[1], "hash")
checkpointer.save_now(1, {"params": {"w": jnp.asarray(noise.standard_normal((128, 256), np.float32))}})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, resource.RLIM_INFINITY))
try:
    checkpointer.save_now(2, {"params": {"w": jnp.asarray(noise.standard_normal((1024, 1024), np.float32))}})
except CheckpointWriteError as error:
    print(error)
checkpointer.close()  # does not raise the reported failure again
"""


def test_a_save_that_cannot_be_written_fails_at_that_save_in_one_line(tmp_path):
    """A real write failure without root: the file-size limit makes the OS refuse the write (EFBIG)."""
    result = subprocess.run([sys.executable, "-c", SAVE_UNDER_A_FILE_SIZE_LIMIT, str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True, timeout=600, check=False,
                            env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1 and "could not write the checkpoint of iteration 2" in lines[0], result.stdout
    assert os.strerror(errno.EFBIG) in lines[0]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]  # orbax's own logs are held back
    left = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert left == ["1"], left  # no half-written 2 or 2.orbax-checkpoint-tmp


def _mounted_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, check=False).returncode == 0


def test_a_really_full_disk_fails_at_the_save_and_leaves_nothing(tmp_path, capfd):
    disk = tmp_path / "disk"
    if not _mounted_tmpfs(disk, "3M"):
        pytest.skip("cannot mount a tmpfs here (needs root); the patched-writer test covers the logic")
    try:
        noise = np.random.default_rng(0)  # incompressible: orbax compresses what it writes
        checkpointer = Checkpointer(disk, "hash")
        checkpointer.save_now(1, {"params": {"w": jnp.asarray(noise.standard_normal((256, 512), np.float32))}})
        with pytest.raises(CheckpointWriteError, match="iteration 2") as error:
            checkpointer.save_now(2, {"params": {"w": jnp.asarray(noise.standard_normal((1024, 1024), np.float32))}})
        assert "\n" not in str(error.value) and "No space left on device" in str(error.value)
        assert "Traceback" not in capfd.readouterr().err  # orbax's own logs of the failure are held back
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


def test_a_kernel_this_platform_cannot_run_is_one_line_and_exit_2(tmp_path):
    """model.attention_impl=splash on CPU: refused before the work directory is made."""
    result = subprocess.run(
        [sys.executable, "-m", "experiments.train", "--config", "experiments/configs/demo.py",
         "--workdir", str(tmp_path / "run"), "--config.model.attention_impl=splash", *(f"--config.{o}" for o in TINY)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: model.attention_impl='splash' runs on TPU only; this run's devices are CPU "
                     "(choose auto, xla or blocks)"], lines
    assert not (tmp_path / "run").exists()

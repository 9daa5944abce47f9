"""Same command, same bits: two fresh runs of a short demo config, each in its own process (its own
JVM, env servers and XLA compilation) and work directory, end with identical parameters, optimiser
state, warm start, tokenizer and metrics. See docs/reproducibility.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.train.tiny_configs import SHORT_EPISODES, SHORT_ITERATIONS, TINY_MODEL, short_sft

# The demo config made small: SFT on four expert episodes (the part that differed between runs when
# TextWorldExpress's gold paths were drawn from an unseeded random walk), then two MileGPO iterations.
SHORT_DEMO = [*TINY_MODEL, *SHORT_EPISODES, *SHORT_ITERATIONS, *short_sft(episodes=4, epochs=2), "run.iterations=2"]
ROOT = Path(__file__).resolve().parents[2]
NOT_DETERMINISTIC_BY_NATURE = ("wall_time", "time/")  # clocks, not results


def _train(workdir: Path) -> None:
    command = [sys.executable, "-m", "experiments.train", "--config", "experiments/configs/demo.py",
               "--workdir", str(workdir), *(f"--config.{flag}" for flag in SHORT_DEMO)]
    done = subprocess.run(command, cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def _checkpoint_arrays(workdir: Path, iteration: int) -> dict[str, np.ndarray]:
    import jax
    import orbax.checkpoint as ocp

    tree = ocp.PyTreeCheckpointer().restore(workdir / "checkpoints" / str(iteration) / "state")
    return {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


def _metrics(workdir: Path) -> list[dict]:
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(NOT_DETERMINISTIC_BY_NATURE)} for r in records]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_fresh_demo_runs_are_bitwise_identical(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    _train(first)
    _train(second)
    for name in ("warm_start", "tokenizer"):
        files = sorted(p.relative_to(first / name) for p in (first / name).rglob("*") if p.is_file())
        assert files, f"no {name} files"
        for relative in files:
            assert (first / name / relative).read_bytes() == (second / name / relative).read_bytes(), f"{name}/{relative} differs"
    for iteration in (1, 2):
        a, b = _checkpoint_arrays(first, iteration), _checkpoint_arrays(second, iteration)
        assert a.keys() == b.keys() and len(a) > 10
        differing = [key for key in a if a[key].dtype != b[key].dtype or a[key].tobytes() != b[key].tobytes()]
        assert not differing, f"iteration {iteration}: {len(differing)} of {len(a)} arrays differ, e.g. {differing[:3]}"
    metrics_a, metrics_b = _metrics(first), _metrics(second)
    assert [r["iteration"] for r in metrics_a] == [0, 1, 2] and "actor/loss" in metrics_a[-1]
    assert json.dumps(metrics_a) == json.dumps(metrics_b)  # NaN-safe, exact float text

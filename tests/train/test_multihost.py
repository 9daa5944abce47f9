"""Two ``jax.distributed`` processes on CPU (2 fake devices each, 4 in the global mesh) train one
iteration of a tiny policy on TextWorldExpress: each host plays its share of the groups with its own
env servers, both end with the same parameters, and process 0 alone writes the logs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.train.test_trainer import TINY

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_train_one_iteration_to_identical_parameters(tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT),
    }
    overrides = [*TINY, "run.iterations=1", "run.eval_every=1"]
    workers = [
        subprocess.Popen(
            [sys.executable, "tests/train/multihost_worker.py", str(tmp_path), str(i), str(port), *overrides],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for i in range(2)
    ]
    outputs = []
    try:
        for worker in workers:
            outputs.append(worker.communicate(timeout=600)[0])
    finally:
        for worker in workers:
            worker.kill()
    for worker, output in zip(workers, outputs):
        assert worker.returncode == 0, output[-5000:]
    reports = [json.loads(line.split(" ", 1)[1]) for out in outputs for line in out.splitlines() if line.startswith("WORKER ")]
    assert [r["process_index"] for r in reports] == [0, 1]
    for report in reports:
        assert report["process_count"] == 2 and report["device_count"] == 4
        assert report["parameters_spanning_hosts"] > 0  # FSDP over the 4 devices of both hosts
        assert report["changed"] > 0  # the update did move the parameters

    first, second = np.load(tmp_path / "params-0.npz"), np.load(tmp_path / "params-1.npz")
    assert first.files == second.files
    for name in first.files:
        np.testing.assert_array_equal(first[name], second[name])

    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [0, 1]  # process 0 only: no duplicated records
    trained = records[1]
    assert trained["rollout/episodes"] == 2 * 2  # the global batch: both hosts' groups x rollouts
    assert np.isfinite(trained["actor/loss"])
    assert (tmp_path / "checkpoints" / "1").is_dir()

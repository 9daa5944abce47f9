"""experiments.bench.threads: XLA:CPU pinned to one thread only before jax starts, and offline transformers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.bench.threads import configure_cpu_threads

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_one_thread_is_set_before_jax_starts():
    environment = {**os.environ, "JAX_PLATFORMS": "cpu"}
    for name in ("XLA_FLAGS", "HF_HUB_OFFLINE"):
        environment.pop(name, None)
    program = (
        "import os\n"
        "from experiments.bench.threads import configure_cpu_threads\n"
        "configure_cpu_threads(True)\n"
        "import jax.numpy as jnp\n"  # XLA reads its flags here and must accept them
        "print(os.environ['XLA_FLAGS'], os.environ['HF_HUB_OFFLINE'], float(jnp.arange(4.0).sum()), sep='|')\n"
    )
    result = subprocess.run([sys.executable, "-c", program], cwd=REPO_ROOT, env=environment, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    flags, offline, total = result.stdout.strip().split("|")
    assert "--xla_cpu_multi_thread_eigen=false" in flags and (offline, total) == ("1", "6.0")


def test_too_late_once_jax_is_imported(monkeypatch):
    import jax  # noqa: F401  (this process has it already)

    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/nowhere")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(RuntimeError, match="before jax is imported"):
        configure_cpu_threads(True)
    configure_cpu_threads(False)  # the default: XLA's own pool, flags untouched
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/nowhere" and os.environ["HF_HUB_OFFLINE"] == "1"

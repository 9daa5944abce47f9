"""experiments.export refuses what it cannot export with one line and exit status 2, writing nothing
(the export itself is checked against transformers in tests/train/test_real_llm_smoke.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "experiments.export", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("case, message", [
    ("no_run", "not a training work directory"),
    ("no_checkpoint", "no checkpoints yet"),
    ("out_exists", "exists; choose a new directory"),
])
def test_bad_exports_are_one_line(tmp_path, case, message):
    workdir, out = tmp_path / "run", tmp_path / "hf"
    if case != "no_run":
        (workdir / "warm_start").mkdir(parents=True)
        (workdir / "warm_start" / "config.json").write_text("{}")
    if case == "out_exists":
        (workdir / "checkpoints" / "3").mkdir(parents=True)
        out.mkdir()
    proc = _run("--workdir", workdir, "--out", out)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert case == "out_exists" or not out.exists()

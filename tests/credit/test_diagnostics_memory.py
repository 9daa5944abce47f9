"""The credit diagnostics without [R, R] pair matrices, and the memory limit that covers them.

A long trajectory that keeps leaving one state is the diagnostics' worst case (every row pairs with
every other); the CLI must stay within its limit there, and refuse up front when the estimate is over."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
import sys
from pathlib import Path

import numpy as np
import pytest

from milegpo_jax.credit import diagnostics

ROOT = Path(__file__).resolve().parents[2]


def _dense_counts(src, action, success, graph, mix) -> tuple[int, int, int, int]:
    """The pair counts as one [R, R] computation (what the diagnostics did before blocking)."""
    upper = np.triu(np.ones((src.size, src.size), bool), k=1)
    pair = upper & (src[:, None] == src[None, :]) & (action[:, None] != action[None, :])
    tied = pair & (np.abs(graph[:, None] - graph[None, :]) <= diagnostics.TIE_TOLERANCE)
    opposite = tied & (success[:, None] != success[None, :])
    gap = np.where(success[:, None], mix[:, None] - mix[None, :], mix[None, :] - mix[:, None])
    return int(pair.sum()), int(tied.sum()), int(opposite.sum()), int((opposite & (gap > diagnostics.TIE_TOLERANCE)).sum())


@pytest.mark.parametrize("block_cells", [1, 7, 64, 1 << 19])
@pytest.mark.parametrize("seed", range(4))
def test_blocked_pair_counts_equal_the_dense_computation(monkeypatch, block_cells, seed):
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(2, 300))
    src = rng.integers(0, int(rng.integers(1, 12)), rows)
    action = rng.integers(0, 4, rows)
    success = rng.random(rows) < 0.5
    graph = rng.choice(np.float32([0.0, 0.25, 0.5, 1.0]), rows) + np.float32(rng.random(rows) < 0.1) * np.float32(5e-7)
    mix = rng.normal(size=rows).astype(np.float32)
    monkeypatch.setattr(diagnostics, "PAIR_BLOCK_CELLS", block_cells)
    assert diagnostics._same_state_pair_counts(src, action, success, graph, mix) == _dense_counts(src, action, success, graph, mix)


def _looping_rollouts(path: Path, steps: int, trajectories: int) -> str:
    """Every step leaves the same state, with one of three actions: all rows pair up."""
    trajs = [{"steps": [{"state": "s0", "action": f"a{(t + k) % 3}", "next_state": "s0",
                         "reward": 1.0 if k == 0 and t == steps - 1 else 0.0, "valid": True} for t in range(steps)]}
             for k in range(trajectories)]
    path.write_text(json.dumps({"groups": [{"trajectories": trajs}]}))
    return str(path)


PEAK_RSS = """
import resource, sys
from milegpo_jax.credit.__main__ import main
code = main(sys.argv[1:])
print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def _cli_peak_mib(*args: str) -> tuple[int, int, str]:
    done = subprocess.run([sys.executable, "-c", PEAK_RSS, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    code, peak = done.stdout.split()[-2:]
    return int(code), int(peak), done.stderr


@pytest.mark.slow
def test_the_cli_stays_near_its_baseline_where_the_pair_matrices_took_gigabytes(tmp_path):
    # 2 x 4,000 rows of one state: the dense pair matrices took ~2 GB here.
    tiny = _looping_rollouts(tmp_path / "tiny.json", 2, 2)
    big = _looping_rollouts(tmp_path / "big.json", 4000, 2)
    code, baseline, err = _cli_peak_mib("--input", tiny, "--estimator", "milegpo", "--output", str(tmp_path / "a.json"))
    assert code == 0, err
    code, peak, err = _cli_peak_mib("--input", big, "--estimator", "milegpo", "--max-memory-gb", "0.25",
                                    "--output", str(tmp_path / "b.json"))
    assert code == 0, err
    assert peak - baseline < 256, f"peak {peak} MiB against a baseline of {baseline} MiB"
    diag = json.loads((tmp_path / "b.json").read_text())["diagnostics"]
    per_action = Counter((t + k) % 3 for k in range(2) for t in range(4000))
    assert diag["same_state_action_pairs"] == 8000 * 7999 // 2 - sum(n * (n - 1) // 2 for n in per_action.values())


def test_over_the_limit_is_refused_up_front_in_one_line(tmp_path):
    # 4 x 20,000 steps: the diagnostics and output alone are estimated above 0.05 GiB.
    big = _looping_rollouts(tmp_path / "big.json", 20000, 4)
    code, peak, err = _cli_peak_mib("--input", big, "--estimator", "milegpo", "--max-memory-gb", "0.05",
                                    "--output", str(tmp_path / "adv.json"))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "above the limit of 0.05 GiB" in lines[0], err
    assert not (tmp_path / "adv.json").exists()

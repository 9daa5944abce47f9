"""experiments.bench.credit_versions: two checkouts side by side in one process (subprocesses here,
since the bench swaps the repository's modules in and out of sys.modules)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(baseline: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    return subprocess.run(
        [sys.executable, "-m", "experiments.bench.credit_versions", "--baseline", str(baseline), "--cases", "grpo",
         "--rounds", "2", "--seeds", "0", *extra],
        check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )


def test_a_checkout_against_itself_and_against_a_changed_copy(tmp_path):
    same = _run(REPO)
    assert same.returncode == 0, same.stderr[-3000:]
    figures = json.loads(same.stdout.strip().splitlines()[-1])
    assert figures["bench"] == "credit_versions" and figures["same_advantages"] is True
    assert list(figures["per_estimator"]) == ["grpo"]
    grpo = figures["per_estimator"]["grpo"]
    assert grpo["baseline_ms"] > 0 and grpo["current_ms"] > 0 and grpo["ratio"] > 0

    # A baseline whose GRPO doubles its advantages: the bench refuses to time different outputs.
    changed = tmp_path / "changed"
    for package in ("milegpo_jax", "experiments"):
        shutil.copytree(REPO / package, changed / package, ignore=shutil.ignore_patterns("__pycache__", "data"))
    estimators = changed / "milegpo_jax" / "credit" / "estimators" / "baselines.py"  # GRPO's program
    text = estimators.read_text()
    assert 'return {"adv_episode": adv_episode, "advantage": adv_episode}' in text
    estimators.write_text(text.replace('"advantage": adv_episode}', '"advantage": 2.0 * adv_episode}'))
    differ = _run(changed)
    assert differ.returncode != 0 and "grpo: the advantages differ on seed 0" in differ.stderr

    # One whose GRPO rounds differently (+1e-6): refused as it is, timed within --atol, the gap reported.
    estimators.write_text(text.replace('"advantage": adv_episode}', '"advantage": adv_episode + 1e-6}'))
    assert "the advantages differ on seed 0" in _run(changed).stderr
    nudged = _run(changed, "--atol", "1e-5")
    assert nudged.returncode == 0, nudged.stderr[-3000:]
    figures = json.loads(nudged.stdout.strip().splitlines()[-1])
    assert figures["same_advantages"] is False and figures["atol"] == 1e-5
    assert 5e-7 < figures["per_estimator"]["grpo"]["max_difference"] <= 1e-5
    # NaN advantages are never within a tolerance.
    estimators.write_text(text.replace('"advantage": adv_episode}', '"advantage": adv_episode * jnp.nan}'))
    nan = _run(changed, "--atol", "1")
    assert nan.returncode != 0 and "the advantages differ on seed 0 (max nan, --atol 1.0)" in nan.stderr

    missing = _run(tmp_path / "nowhere")
    assert missing.returncode == 2 and "no experiments/bench/credit.py there" in missing.stderr

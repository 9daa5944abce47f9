"""The credit CLI: the documented contract on good input, one-line errors and exit 2 on bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from milegpo_jax.credit.testing import reference
from milegpo_jax.credit.config import make_credit_config
from milegpo_jax.credit.rollouts import rollouts_to_json
from tests.credit.spec_vectors import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "milegpo_jax.credit", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def examples_file(tmp_path) -> Path:
    path = tmp_path / "rollouts.json"
    path.write_text(json.dumps(rollouts_to_json([example["group"] for example in EXAMPLES.values()])))
    return path


@pytest.mark.parametrize(
    ("args", "column"),
    [
        (["--estimator", "milegpo", "--recipe", "webshop", "--stage", "rcs"], "milegpo_webshop_advantage_rcs"),
        (["--estimator", "graphgpo", "--recipe", "webshop", "--set", "norm_mode=mean"], "graphgpo_total_mean_gamma02"),
        (["--estimator", "gigpo"], "gigpo_total_ms"),
    ],
)
def test_writes_advantages_and_diagnostics(examples_file, tmp_path, args, column):
    output = tmp_path / "adv.json"
    result = run_cli("--input", str(examples_file), "--output", str(output), *args)
    assert result.returncode == 0, result.stderr
    written = json.loads(output.read_text())
    for g, name in enumerate(EXAMPLES):
        flat = [value for traj in written["advantages"][g] for value in traj]
        assert flat == pytest.approx(EXAMPLES[name]["columns"][column], abs=1e-4)
    diagnostics = written["diagnostics"]
    assert 0.0 <= diagnostics["tie_share"] <= 1.0
    assert diagnostics["same_state_action_pairs"] > 0


def test_stdout_when_no_output_and_set_overrides_reach_the_estimator(examples_file):
    result = run_cli("--input", str(examples_file), "--estimator", "milegpo", "--set", "eta=0.7", "--set", "rho=0.25")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    cfg = make_credit_config("milegpo", overrides={"eta": 0.7, "rho": 0.25})
    groups = [example["group"] for example in EXAMPLES.values()]
    expected = reference.compute_advantages(groups, cfg)
    for got_group, want_group in zip(printed["advantages"], expected):
        for got, want in zip(got_group, want_group):
            assert got == pytest.approx(want, abs=1e-5)
    assert printed["config"]["eta"] == 0.7


def _bad_inputs():
    step = {"state": "a", "action": "x", "next_state": "b", "reward": 0.0, "valid": True}
    good = {"groups": [{"trajectories": [{"steps": [step]}]}]}

    def with_step(**changes):
        return {"groups": [{"trajectories": [{"steps": [step, {**step, **changes}]}]}]}

    missing = dict(step)
    del missing["reward"]
    return [
        ("{not json", "malformed JSON at line 1"),
        (json.dumps({"group": []}), "missing key 'groups'"),
        (json.dumps({"groups": []}), "input.groups: must not be empty"),
        (json.dumps({"groups": [{"trajectories": []}]}), "groups[0].trajectories: must not be empty"),
        (json.dumps({"groups": [{"trajectories": [{"steps": []}]}]}), "groups[0].trajectories[0].steps: must not be empty"),
        (json.dumps({"groups": [{"trajectories": [{"steps": [step, missing]}]}]}), "steps[1]: missing key 'reward'"),
        (json.dumps(with_step(reward="1")), "steps[1].reward: expected a number"),
        (json.dumps(with_step(valid=1)), "steps[1].valid: expected true/false"),
        (json.dumps(with_step(state=3)), "steps[1].state: expected a string"),
        (json.dumps(with_step(reward=math.inf)), "steps[1].reward: reward must be finite"),
        (json.dumps(with_step(reward=math.nan)), "steps[1].reward: reward must be finite"),
        (json.dumps(good), None),  # sanity: the base case is fine
    ]


@pytest.mark.parametrize(("text", "message"), _bad_inputs())
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, text, message):
    source, output = tmp_path / "in.json", tmp_path / "adv.json"
    source.write_text(text)
    result = run_cli("--input", str(source), "--estimator", "grpo", "--output", str(output))
    if message is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not output.exists() and list(tmp_path.iterdir()) == [source]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--estimator", "ppo"], "unknown estimator 'ppo'"),
        (["--estimator", "milegpo", "--recipe", "scienceworld"], "unknown recipe 'scienceworld'"),
        (["--estimator", "milegpo", "--stage", "pcc"], "unknown stage 'pcc'"),
        (["--estimator", "gigpo", "--stage", "rcs"], "--stage applies to milegpo only"),
        (["--estimator", "milegpo", "--set", "omgea=0.3"], "unknown credit option 'omgea'"),
        (["--estimator", "milegpo", "--set", "omega=fast"], "omega='fast': expected float"),
        (["--estimator", "milegpo", "--set", "omega=2"], "omega=2.0: must lie in (0, 1]"),
        (["--estimator", "milegpo", "--set", "norm_mode=z"], "norm_mode='z': must be one of"),
        (["--estimator", "milegpo", "--set", "eta"], "expected key=value"),
        (["--estimator"], "expected one argument"),
        (["--input", "missing.json", "--estimator", "grpo"], "missing.json: no such file"),
    ],
)
def test_bad_options_are_one_line_exit_2(examples_file, args, message):
    if "--input" not in args:
        args = ["--input", str(examples_file), *args]
    result = run_cli(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert result.stdout == ""


def test_family_estimator_by_name_and_beacon_needs_milestone_flags(tmp_path):
    """A family estimator runs by name; BEACON on rollouts without milestone flags is bad input."""
    from tests.credit.spec_vectors_family import FAMILY_GROUPS, TABLES

    flagged = tmp_path / "flagged.json"
    flagged.write_text(json.dumps(rollouts_to_json([FAMILY_GROUPS["A"]])))
    output = tmp_path / "adv.json"
    result = run_cli("--input", str(flagged), "--estimator", "beacon", "--recipe", "webshop", "--output", str(output))
    assert result.returncode == 0, result.stderr
    flat = [v for traj in json.loads(output.read_text())["advantages"][0] for v in traj]
    assert flat == pytest.approx(TABLES["A"]["beacon_webshop"], abs=1e-4)

    unflagged, output = tmp_path / "unflagged.json", tmp_path / "none.json"
    unflagged.write_text(json.dumps(rollouts_to_json([example["group"] for example in EXAMPLES.values()])))
    result = run_cli("--input", str(unflagged), "--estimator", "beacon", "--output", str(output))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "estimator beacon needs the per-step field 'milestone'" in lines[0], result.stderr
    assert "groups[0].trajectories[0].steps[0]" in lines[0] and not output.exists()

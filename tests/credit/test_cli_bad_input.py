"""Bad input to the credit tools (``python -m milegpo_jax.credit`` and ``experiments.replay``): each case
is one line on stderr naming the place, exit status 2, and nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import replay
from milegpo_jax.credit.__main__ import main as credit_main

ROOT = Path(__file__).resolve().parents[2]


def _rollouts(rewards_per_traj, states=None) -> dict:
    trajectories = []
    for k, rewards in enumerate(rewards_per_traj):
        steps = [{"state": f"s{k}-{t}" if states == "distinct" else f"s{t}", "action": "a",
                  "next_state": f"s{k}-{t + 1}" if states == "distinct" else f"s{t + 1}", "reward": r, "valid": True}
                 for t, r in enumerate(rewards)]
        trajectories.append({"steps": steps})
    return {"groups": [{"trajectories": trajectories}]}


GOOD = json.dumps(_rollouts([[0.0, 1.0], [0.0, 0.0]]))
DEEP = "[" * 3000 + "]" * 3000


def _file(tmp_path: Path, content: str | bytes) -> str:
    path = tmp_path / "in.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


# (name, file content or special path, extra args, expected fragment of the one-line message)
CASES = [
    ("utf16", GOOD.encode("utf-16"), [], "UTF-16"),
    ("utf32", GOOD.encode("utf-32"), [], "UTF-32"),
    ("latin1", GOOD.replace('"a"', '"caf\u00e9"').encode("latin-1"), [], "not UTF-8"),
    ("int_beyond_float", GOOD.replace("1.0", "1" + "0" * 400), [], "steps[1].reward: reward must be finite"),
    ("int_4401_digits", GOOD.replace("1.0", "7" * 4401), [], "steps[1].reward: reward must be finite"),
    ("nested_3000", DEEP, [], "nested too deeply"),
    ("nested_in_reward", GOOD.replace("1.0", DEEP), [], "nested too deeply"),
    ("nan_literal", GOOD.replace("1.0", "NaN"), [], "reward must be finite"),
    ("beyond_float32", GOOD.replace("1.0", "1e300"), [], "beyond float32's range"),
    ("sum_beyond_float32", json.dumps(_rollouts([[3e38, 3e38], [0.0, 0.0]])), [], "summed |reward|"),
    ("return_squares_overflow", json.dumps(_rollouts([[1e19], [0.0]])), [], "try --set precision=float64"),
    ("too_large_file", GOOD + " " * 2000, ["--max-input-bytes", "1000"], "larger than the input limit of 1000 bytes"),
    ("dev_zero", "/dev/zero", ["--max-input-bytes", "100000"], "larger than the input limit"),
    ("directory", "DIR", [], "is a directory"),
    ("missing", "MISSING", [], "no such file"),
    ("memory", json.dumps(_rollouts([[0.0] * 3000], states="distinct")), ["--max-memory-gb", "0.0005"], "above the limit of 0.0005 GiB"),
    ("bad_memory_limit", GOOD, ["--max-memory-gb", "nan"], "--max-memory-gb must be a positive number"),
    ("bad_input_limit", GOOD, ["--max-input-bytes", "0"], "--max-input-bytes must be > 0"),
]


def _input(tmp_path: Path, content) -> str:
    if content == "/dev/zero":
        return content
    if content == "DIR":
        return str(tmp_path)
    if content == "MISSING":
        return str(tmp_path / "nowhere.json")
    return _file(tmp_path, content)


def _assert_one_line(capsys, code: int, fragment: str) -> None:
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], err


@pytest.mark.parametrize(("name", "content", "extra", "fragment"), CASES, ids=[case[0] for case in CASES])
def test_credit_cli_refuses_bad_input(tmp_path, capsys, name, content, extra, fragment):
    output = tmp_path / "adv.json"
    path = _input(tmp_path, content)
    before = set(tmp_path.iterdir())
    code = credit_main(["--input", path, "--estimator", "grpo", "--output", str(output), *extra])
    _assert_one_line(capsys, code, fragment)
    assert set(tmp_path.iterdir()) == before  # nothing written


@pytest.mark.parametrize(("name", "content", "extra", "fragment"), CASES, ids=[case[0] for case in CASES])
def test_replay_refuses_bad_input(tmp_path, capsys, name, content, extra, fragment):
    path = _input(tmp_path, content)
    before = set(tmp_path.iterdir())
    code = replay.main(["--input", path, *extra])
    _assert_one_line(capsys, code, fragment)
    assert set(tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    ("place", "fragment"), [("missing/adv.json", "does not exist"), (".", "is a directory")]
)
def test_output_in_a_bad_place_is_refused_before_any_work(tmp_path, capsys, place, fragment):
    before = set(tmp_path.iterdir()) | {tmp_path / "in.json"}
    code = credit_main(["--input", _file(tmp_path, GOOD), "--estimator", "grpo", "--output", str(tmp_path / place)])
    _assert_one_line(capsys, code, fragment)
    assert set(tmp_path.iterdir()) == before and not (tmp_path / "missing").exists()


def test_float64_precision_computes_returns_float32_cannot(tmp_path):
    # 1e19 squared overflows float32 but not float64: the same input runs with precision=float64.
    path = _file(tmp_path, json.dumps(_rollouts([[1e19], [0.0]])))
    done = subprocess.run(
        [sys.executable, "-m", "milegpo_jax.credit", "--input", path, "--estimator", "grpo", "--set", "precision=float64"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    advantages = json.loads(done.stdout)["advantages"][0]
    assert advantages[0][0] > 0 > advantages[1][0]  # the rewarded trajectory ranks first

"""experiments.bench.envs: the --smoke run (TextWorldExpress) to its JSON line, and an environment that
cannot run here refused in one line when named, skipped when not (ALFWorld without its interpreter or
without games)."""

from __future__ import annotations

import math
import os
import subprocess

import pytest

from experiments.bench import envs
from tests.envs.alfworld.conftest import REPO_ROOT, alfworld_interpreter
from tests.experiments.bench_helpers import positive, refused, run_bench

TWX = "textworld_express"


def test_smoke_run(capsys):
    figures, printed = run_bench(envs.main, ["--smoke"], capsys)
    assert figures["bench"] == "envs" and figures["num_envs"] == 2
    for key in ("steps_per_s_in_process", "steps_per_s_pool", "pool_servers"):
        assert positive(figures[f"{key}_{TWX}"]), key
    for key in ("pool_overhead", "pool_overhead_1_server"):  # negative when the servers' parallelism pays
        assert math.isfinite(figures[f"{key}_{TWX}"]) and figures[f"{key}_{TWX}"] > -1
    assert 0 <= figures[f"repeated_state_share_{TWX}"] <= 1
    # the summary line goes to stderr (a loaded machine may add a server thread's report of a dropped connection)
    assert any(line.startswith(f"{TWX}: in-process ") for line in printed.err.splitlines())


def test_an_environment_that_cannot_run_here(monkeypatch, capsys):
    err = refused(envs.main, ["--smoke", "--envs", "nosuch"], capsys)
    assert err.startswith("error: --envs nosuch: unknown environment 'nosuch'")
    # not named: skipped with its reason, the others run
    monkeypatch.setattr(envs, "env_names", lambda: ["nosuch", TWX])
    assert envs.usable_envs(None) == [TWX]
    assert capsys.readouterr().err.startswith("skipping nosuch: unknown environment 'nosuch'")


def test_alfworld_outside_its_interpreter(capsys):
    try:
        import alfworld  # noqa: F401
    except ImportError:
        err = refused(envs.main, ["--smoke", "--envs", "alfworld"], capsys)
        assert "cannot be loaded in this interpreter" in err and "this benchmark runs under that interpreter" in err
    else:
        pytest.skip("alfworld imports in this interpreter")


def test_alfworld_without_games(tmp_path):
    python = alfworld_interpreter()
    if not os.path.exists(python):
        pytest.skip(f"no ALFWorld interpreter ({python})")
    environment = {**os.environ, "MILEGPO_ALFWORLD_GAMES": str(tmp_path)}
    environment.pop("ALFWORLD_DATA", None)  # official data would be found first
    result = subprocess.run(
        [python, "-m", "experiments.bench.envs", "--smoke", "--envs", "alfworld"], cwd=REPO_ROOT, env=environment,
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 2 and result.stdout == "", result.stderr[-2000:]
    assert result.stderr.startswith(f"error: --envs alfworld: no ALFWorld games in {tmp_path}: generate games with")
    assert len(result.stderr.strip().splitlines()) == 1

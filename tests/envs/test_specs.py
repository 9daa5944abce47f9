"""Adding an environment is one EnvSpec plus its adapter (docs/environments.md §9): a tiny one,
registered through $MILEGPO_ENV_SPECS, plays a rollout through a real EnvPool and env server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from envs_bridge import specs
from envs_bridge.client import EnvPool
from envs_bridge.groups import GroupPlan
from milegpo_jax.rollout.collector import PolicyResponse, collect
from milegpo_jax.rollout.prompts import build_prompt, project_action


class AlwaysUp:
    def generate(self, prompts: Sequence[str], *, temperature: float, seed: int) -> list[PolicyResponse]:
        self.prompts = list(prompts)
        return [PolicyResponse((1,), (2,), (-0.1,), "<think>more</think><action>up</action>") for _ in prompts]


@pytest.fixture
def tiny_registered(monkeypatch):
    monkeypatch.setenv(specs.SPEC_MODULES_VAR, "tests.envs.tiny_env")
    return specs.env_spec("tiny_counter")


def test_unregistered_until_named():
    assert "tiny_counter" not in specs.env_names()
    with pytest.raises(specs.UnknownEnvError, match="registered are textworld_express"):
        specs.env_spec("tiny_counter")


def test_a_tiny_spec_runs_one_rollout_through_the_pool(tiny_registered):
    assert "tiny_counter" in specs.env_names()
    # the spec's own prompt builder and projection rule
    assert "count to 2" in build_prompt("tiny_counter", "The counter shows 0.", ["up", "down"], task="count to 2")
    assert project_action("no tags, so the tail: down", "tiny_counter") == ("down", False)
    plan = GroupPlan("train", task_ids=(0, 2), seeds=(0, 1), group_size=2)
    policy = AlwaysUp()
    with EnvPool("tiny_counter", plan.num_envs, num_servers=1, env_options={"tasks": 3}) as pool:
        assert pool.num_tasks("train") == 3
        batch = collect(pool, policy, plan, env="tiny_counter", max_steps=5, history_length=1,
                        temperature=1.0, seed=0, reward_scale=tiny_registered.reward_scale)
    assert [e.steps for e in batch.episodes] == [1, 1, 3, 3] and all(e.won for e in batch.episodes)
    last = [r for r in batch.rows if r.group == 1 and r.trajectory == 0]
    assert [r.state for r in last] == ["count=0", "count=1", "count=2"] and last[-1].next_state == "count=3"
    assert [r.reward for r in last] == [0.0, 0.0, 10.0]  # the spec's reward scale
    assert "count to 3" in policy.prompts[0]


def test_a_pool_closed_at_interpreter_exit_stops_its_server_quietly(tiny_registered, tmp_path):
    """An ``atexit`` close (the arena's workers close their pools so) runs after concurrent.futures has
    shut every executor down; it must still stop the server, without a traceback."""
    script = tmp_path / "close_at_exit.py"
    script.write_text(
        "import atexit\n"
        "from envs_bridge.client import EnvPool\n"
        "pool = EnvPool('tiny_counter', 2, num_servers=1, env_options={'tasks': 3})\n"
        "pool.reset('train', [0, 1])\n"
        "print(pool.server_pids[0], flush=True)\n"
        "atexit.register(pool.close)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2], env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    pid = int(done.stdout.split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the server is gone

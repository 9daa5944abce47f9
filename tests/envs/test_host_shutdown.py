"""Requests that reach an env host after it began shutting down get a one-line 503 (which the pool
treats like any failed server: restart, or nothing when it is closing), never a Python traceback."""

from __future__ import annotations

import pytest

from envs_bridge import specs
from envs_bridge.host import EnvHost, HostError


@pytest.fixture
def host(monkeypatch):
    monkeypatch.setenv(specs.SPEC_MODULES_VAR, "tests.envs.tiny_env")
    host = EnvHost("tiny_counter", max_envs=4, threads=2)
    env_ids, _ = host.create(2, {"tasks": 3})
    host.reset(env_ids, "train", [0, 1], [0, 0])
    host.shutdown()
    return host, env_ids


@pytest.mark.parametrize(
    "call",
    [
        lambda host, ids: host.create(1, {"tasks": 3}),
        lambda host, ids: host.reset(ids, "train", [0, 1], [0, 0]),
        lambda host, ids: host.step(ids, ["up", "up"]),  # two envs: the thread-pool path
        lambda host, ids: host.step(ids[:1], ["up"]),
    ],
    ids=["create", "reset", "step", "step_one"],
)
def test_calls_after_shutdown_are_a_503(host, call):
    host, env_ids = host
    with pytest.raises(HostError) as caught:
        call(host, env_ids)
    assert caught.value.status == 503 and caught.value.message == "the env server is shutting down"

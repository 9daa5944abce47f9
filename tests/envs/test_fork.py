"""Forking an episode (docs/environments.md §7.1) on the real engines: TextWorldExpress (replay) and
WebShop (copy) in process through ``EnvHost``, and the HTTP side through a pool of real servers:
metrics, the cap, 4xx answers and a dead server. ALFWorld's forks are in tests/envs/alfworld/test_fork.py."""

from __future__ import annotations

import os
import signal

import pytest

from envs_bridge.client import EnvPool, EnvRequestError, EpisodeStatus
from envs_bridge.host import EnvHost, HostError

from .test_protocol import post

pytestmark = pytest.mark.timeout(180)

ENGINES = {"textworld_express": ({"game": "coin"}, 3), "webshop": ({}, 3)}


def _walk(host: EnvHost, env_id: int, actions: list[str]) -> list[dict]:
    return [host.step([env_id], [action])[0].to_json() for action in actions]


def check_fork_is_exact(host: EnvHost, options: dict, task: int) -> None:
    """Fork after two gold actions: the fork equals the parent now and under the same later actions;
    the parent plays as an env never forked does; two forks of one state evolve independently."""
    parent, reference, spare = host.create(3, options)[0]
    [start] = host.reset([parent, reference, spare], "train", [task] * 3, [0] * 3)[:1]
    gold = list(start.info["gold_actions"])
    assert len(gold) >= 4
    for action in gold[:2]:
        now = host.step([parent, reference], [action] * 2)
    (first, second), results = host.fork([parent, parent])
    assert [result.to_json() for result in results] == [now[0].to_json()] * 2
    other = next(a for a in sorted(results[0].admissible_actions) if a != gold[2])
    # fork 1 takes a detour, fork 2 the gold path: neither sees the other, the parent sees neither
    detour = _walk(host, first, [other])
    expected = _walk(host, reference, gold[2:])
    assert _walk(host, second, gold[2:]) == expected
    assert _walk(host, parent, gold[2:]) == expected
    _walk(host, spare, gold[:2])
    assert _walk(host, spare, [other]) == detour


@pytest.mark.parametrize("env", sorted(ENGINES))
def test_a_fork_equals_its_parent_and_changes_nothing(env):
    options, task = ENGINES[env]
    host = EnvHost(env, max_envs=8, threads=2)
    try:
        check_fork_is_exact(host, options, task)
    finally:
        host.shutdown()


def test_fork_refusals_are_4xx_with_a_message_and_change_nothing():
    host = EnvHost("textworld_express", max_envs=3, threads=2)
    try:
        fresh, running = host.create(2, {"game": "coin"})[0]
        start = host.reset([running], "train", [3], [0])[0]
        cases = [
            ([99], 404, "unknown env ids [99]"),
            ([fresh], 409, "no episode started"),
            ([running, running], 409, "would exceed this server's cap of 3"),
        ]
        for env_ids, status, message in cases:
            with pytest.raises(HostError) as error:
                host.fork(env_ids)
            assert error.value.status == status and message in error.value.message
        assert host.num_envs == 2
        host.fork([running])  # one more fits the cap exactly
        for action in start.info["gold_actions"]:
            result = host.step([running], [action])[0]
        assert result.done and result.won
        with pytest.raises(HostError, match="finished") as error:
            host.fork([running])
        assert error.value.status == 409
    finally:
        host.shutdown()


def test_pool_forks_over_http_count_them_and_abort_with_a_dead_server():
    with EnvPool("textworld_express", 4, num_servers=2, env_options={"game": "coin"}, max_envs_per_server=4) as pool:
        start = pool.reset("train", [3, 3], env_indices=[0, 1])
        gold = start[0].result.info["gold_actions"]
        parent = pool.step(gold[:1], env_indices=[0])[0].result
        replies = pool.fork([0, 0], [1, 3])  # env 3 lives on the other server: it moves to env 0's
        assert [reply.result for reply in replies] == [parent, parent]
        assert pool.server_of(3) == pool.server_of(0) == 0
        later = pool.step([gold[1]] * 3, env_indices=[0, 1, 3])
        assert later[0].result == later[1].result == later[2].result
        assert pool.metrics()["forks"] == 2

        # the server's own answers: 4xx with a message (the pool checks its side before any call)
        url = pool.server_urls[0]
        status, body = post(url, "/fork", {"env_ids": [999]})
        assert status == 404 and "unknown env ids [999]" in body["error"]
        status, body = post(url, "/fork", {"env_ids": []})
        assert status == 422
        with pytest.raises(EnvRequestError, match="cap of 4") as error:  # server 0 holds 4 envs now
            pool.fork([0], [2])
        assert error.value.status == 409
        with pytest.raises(ValueError, match="cannot be forked"):
            pool.fork([2], [1])  # env 2's episode was abandoned by the refused fork

        os.killpg(pool.server_pids[0], signal.SIGKILL)
        replies = pool.fork([0], [2])
        assert replies[0].status is EpisodeStatus.ABORTED and "server 0" in replies[0].error
        assert pool.fork([1], [2])[0].status is EpisodeStatus.ABORTED  # a fork of an aborted episode too
        metrics = pool.metrics()
        assert metrics["forks"] == 2 and metrics["server_restarts"] == 1
        assert metrics["aborted_episodes"] == 3 + 2  # envs 0, 1, 3 on the dead server, and both forks

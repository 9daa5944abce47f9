"""Fault tolerance of EnvPool with real servers: killed and stalled servers, start failures, shutdown."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from envs_bridge import env_vars, launcher
from envs_bridge.client import EnvPool, EnvRequestError, EpisodeStatus, PoolError
from envs_bridge.launcher import ServerProcess, _kill_leftovers, sweep_orphaned_log_dirs
from envs_bridge.transport import JsonConnection

pytestmark = pytest.mark.timeout(120)
NUM_ENVS = 4  # envs 0 and 2 on server 0, 1 and 3 on server 1


def group_alive(group_id: int) -> bool:
    """Whether any live (non-zombie) process is in the process group (a server and its JVM)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, process_group = fields[0], int(fields[2])
        if process_group == group_id and state not in ("Z", "X"):
            return True
    return False


def wait_until(predicate, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def start_episodes(pool: EnvPool) -> None:
    replies = pool.reset("train", [1, 2, 3, 4])
    assert all(reply.status is EpisodeStatus.OK for reply in replies)
    replies = pool.step(["look around"] * NUM_ENVS)
    assert all(reply.status is EpisodeStatus.OK for reply in replies)


def test_killed_server_is_restarted_and_its_episodes_aborted():
    with EnvPool("textworld_express", NUM_ENVS, num_servers=2, env_options={"game": "coin"}) as pool:
        start_episodes(pool)
        killed_pid = pool.server_pids[0]
        os.killpg(killed_pid, signal.SIGKILL)  # the server and its JVM, mid-rollout
        replies = pool.step(["look around"] * NUM_ENVS)

        assert [reply.status for reply in replies] == [EpisodeStatus.ABORTED, EpisodeStatus.OK] * 2
        assert replies[0].result is None and "server 0" in replies[0].error
        metrics = pool.metrics()
        assert metrics["aborted_episodes"] == 2 and metrics["server_restarts"] == 1 and metrics["call_timeouts"] == 0
        assert pool.server_pids[0] != killed_pid and not group_alive(killed_pid)

        # Aborted stays aborted (no server call) until reset; the healthy server's episodes go on.
        replies = pool.step(["look around"] * NUM_ENVS)
        assert [reply.status for reply in replies] == [EpisodeStatus.ABORTED, EpisodeStatus.OK] * 2
        assert pool.metrics()["aborted_episodes"] == 2  # counted once per episode

        replies = pool.reset("train", [1, 2, 3, 4])
        assert all(reply.status is EpisodeStatus.OK for reply in replies)
        replies = pool.step(["look around"] * NUM_ENVS)
        assert all(reply.status is EpisodeStatus.OK for reply in replies)


def test_stalled_server_times_out_and_is_handled_the_same_way():
    with EnvPool(
        "textworld_express",
        NUM_ENVS,
        num_servers=2,
        env_options={"game": "coin"},
        step_timeout_s=3.0,
        server_env={env_vars.DEBUG: "1"},
    ) as pool:
        start_episodes(pool)
        stalled_pid = pool.server_pids[1]
        JsonConnection(pool.server_urls[1]).post("/debug/stall", {"seconds": 60}, timeout_s=10)
        started = time.monotonic()
        replies = pool.step(["look around"] * NUM_ENVS)
        elapsed = time.monotonic() - started

        assert [reply.status for reply in replies] == [EpisodeStatus.OK, EpisodeStatus.ABORTED] * 2
        assert "timed out" in replies[1].error
        metrics = pool.metrics()
        assert metrics["call_timeouts"] == 1 and metrics["aborted_episodes"] == 2 and metrics["server_restarts"] == 1
        assert elapsed < 30, "the stall must be cut off by the step timeout, not waited out"
        assert pool.server_pids[1] != stalled_pid and not group_alive(stalled_pid)
        assert all(reply.status is EpisodeStatus.OK for reply in pool.reset("train", [1, 2, 3, 4]))


def test_reset_on_a_dead_server_is_retried_on_the_fresh_one():
    with EnvPool("textworld_express", NUM_ENVS, num_servers=2, env_options={"game": "coin"}) as pool:
        start_episodes(pool)
        os.killpg(pool.server_pids[1], signal.SIGKILL)
        replies = pool.reset("train", [5, 6, 7, 8])
        assert all(reply.status is EpisodeStatus.OK for reply in replies)
        # Resetting abandons the old episodes, so none of them counts as aborted.
        assert pool.metrics()["aborted_episodes"] == 0 and pool.metrics()["server_restarts"] == 1


def test_pool_usage_errors_are_raised_before_any_call():
    with EnvPool("textworld_express", 2, num_servers=1, env_options={"game": "coin", "max_steps": 1}) as pool:
        with pytest.raises(ValueError, match="reset it first"):
            pool.step(["look around", "look around"])
        with pytest.raises(ValueError, match="out of range"):
            pool.reset("train", [1000, 0])
        with pytest.raises(ValueError, match="unknown split"):
            pool.reset("test", [0, 0])
        pool.reset("train", [0, 1])
        assert all(reply.result.done for reply in pool.step(["look around", "look around"]))  # max_steps=1
        with pytest.raises(ValueError, match="finished"):
            pool.step(["look around"], [0])
        assert pool.metrics()["server_failures"] == 0


def test_bad_env_options_fail_at_start_and_leave_no_process(monkeypatch):
    started: list[ServerProcess] = []
    original_start = ServerProcess.start

    def recording_start(self, timeout_s):
        started.append(self)
        return original_start(self, timeout_s)

    monkeypatch.setattr(ServerProcess, "start", recording_start)
    with pytest.raises(EnvRequestError, match="unknown TextWorldExpress game"):
        EnvPool("textworld_express", 2, num_servers=2, env_options={"game": "zork"})
    assert len(started) == 2 and not any(process.alive() for process in started)


def test_a_server_that_cannot_start_raises_pool_error():
    with pytest.raises(PoolError, match="exited with code"):
        EnvPool("textworld_express", 1, python=sys.executable, server_args=["--no-such-flag"], start_timeout_s=60)


def test_sigterm_shuts_a_server_down_cleanly():
    process = ServerProcess("textworld_express", python=sys.executable, max_envs=2)
    url = process.start(timeout_s=60)
    JsonConnection(url).post("/create", {"count": 2, "options": {"game": "coin"}}, timeout_s=30)  # starts the JVM
    pid = process.pid
    assert process.stop(grace_s=15) == 0
    assert not group_alive(pid)  # the JVM went with it


def test_atexit_sweep_kills_leftover_servers():
    process = ServerProcess("textworld_express", python=sys.executable, max_envs=1)
    process.start(timeout_s=60)
    pid = process.pid
    _kill_leftovers()
    assert not process.alive() and not group_alive(pid)


def test_servers_exit_when_the_process_that_started_them_dies(tmp_path):
    # A trainer killed with SIGKILL runs no atexit: the servers notice their parent is gone.
    script = textwrap.dedent(
        """
        import os, sys
        from envs_bridge.client import EnvPool
        pool = EnvPool("textworld_express", 2, num_servers=1, env_options={"game": "coin"})
        print(pool._servers[0].process.log_dir, pool.server_pids[0], flush=True)
        os._exit(0)  # no cleanup at all
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=90, cwd=str(tmp_path),
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert completed.returncode == 0, completed.stderr
    log_dir, orphan_pid = completed.stdout.split()[-2:]
    orphan_pid = int(orphan_pid)
    try:
        assert wait_until(lambda: not group_alive(orphan_pid), timeout_s=20)
        # ... and take the temporary log folder their dead parent can no longer remove with them.
        assert wait_until(lambda: not os.path.exists(log_dir), timeout_s=10), f"{log_dir} left behind"
    finally:
        if group_alive(orphan_pid):
            os.killpg(orphan_pid, signal.SIGKILL)  # never leak it, even when the test fails
        shutil.rmtree(log_dir, ignore_errors=True)


def test_log_folders_of_dead_owners_are_swept(tmp_path):
    # Both the starting process and its server killed at once: the next start sweeps the folder.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f"milegpo-webshop-server-{int(dead.stdout)}-x1"
    mine = tmp_path / f"milegpo-webshop-server-{os.getpid()}-x2"
    unrelated = tmp_path / "milegpo-notes"
    for folder in (orphan, mine, unrelated):
        folder.mkdir()
        (folder / "server-1.log").write_text("log")
    assert sweep_orphaned_log_dirs(str(tmp_path)) == [str(orphan)]
    assert not orphan.exists() and mine.exists() and unrelated.exists()


def test_pool_over_given_urls_never_restarts_them():
    process = ServerProcess("textworld_express", python=sys.executable, max_envs=8)
    try:
        url = process.start(timeout_s=60)
        with EnvPool("textworld_express", 2, urls=[url], env_options={"game": "coin"}) as pool:
            assert pool.server_pids == [None]
            start = pool.reset("train", [0, 0])
            assert start[0].result.state_key == start[1].result.state_key
            assert all(reply.status is EpisodeStatus.OK for reply in pool.step(["look around"] * 2))
            process.kill()
            with pytest.raises(PoolError, match="does not answer /health"):
                pool.step(["look around"] * 2)
    finally:
        process.stop(grace_s=0)


def test_a_server_that_finds_its_port_taken_by_another_server_never_passes_for_it(monkeypatch):
    """A neighbouring run's server binding our port first must not pass our health check: the pool
    would drive that server's envs while ours had exited (reported after neighbouring runs were killed)."""
    neighbour = ServerProcess("textworld_express", python=sys.executable, max_envs=1)
    taken = int(neighbour.start(timeout_s=60).rsplit(":", 1)[1])
    ports = iter([taken])
    real_free_port = launcher.free_port
    monkeypatch.setattr(launcher, "free_port", lambda: next(ports, None) or real_free_port())
    ours = ServerProcess("textworld_express", python=sys.executable, max_envs=1)
    try:
        url = ours.start(timeout_s=60)
        assert not url.endswith(f":{taken}")
        assert JsonConnection(url).get("/health", timeout_s=10)["pid"] == ours.pid
    finally:
        ours.stop()
        neighbour.stop()

"""Starting and stopping env-server processes on 127.0.0.1.

Each server runs the contract command ``python -m envs_bridge.server --env E --host 127.0.0.1 --port N
--num-envs M`` under a chosen interpreter, in its own process group (so its JVM or other children go
with it), with output in a log file (a full pipe could block it) and the repository on PYTHONPATH (so
an interpreter without this project installed can run it). Every started process is also recorded
for an ``atexit`` sweep, so no server outlives the Python process that started it.

Log folders: a server without a given ``log_dir`` logs into a temporary folder
``milegpo-<env>-server-<pid>-*`` (``<pid>``: the starting process), removed when the server stops. If
the starting process is killed (no ``atexit``), the server, which exits when its parent is gone,
removes the folder itself; folders that still survive (both killed at once) are swept by the next
start of any server whose owner process no longer exists.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from envs_bridge import env_vars
from envs_bridge.transport import HttpStatusError, JsonConnection, TransportError

REPO_ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = "127.0.0.1"
_PORT_ATTEMPTS = 3

_live: set[ServerProcess] = set()
_live_lock = threading.Lock()


class ServerStartError(RuntimeError):
    pass


def _log_dir_prefix(env: str) -> str:
    return f"milegpo-{env}-server-{os.getpid()}-"


_LOG_DIR_PATTERN = re.compile(r"milegpo-[a-z_]+-server-(\d+)-")


def sweep_orphaned_log_dirs(temp_dir: str | None = None) -> list[str]:
    """Removes temporary server log folders whose starting process is gone; returns what it removed."""
    temp_dir = temp_dir or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(temp_dir)
    except OSError:
        return removed
    for name in names:
        match = _LOG_DIR_PATTERN.match(name)
        if match is None or _process_exists(int(match.group(1))):
            continue
        path = os.path.join(temp_dir, name)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def free_port() -> int:
    # The port is free now; another process could take it before the server binds, hence the retries.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


class ServerProcess:
    def __init__(
        self,
        env: str,
        *,
        python: str,
        max_envs: int,
        extra_env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        log_dir: str | None = None,
    ):
        self.env = env
        self.python = python
        self.max_envs = max_envs
        self.extra_env = dict(extra_env or {})
        self.extra_args = list(extra_args)
        self._owns_log_dir = log_dir is None  # a temporary directory is removed by stop()
        if log_dir is None:
            sweep_orphaned_log_dirs()
        self.log_dir = log_dir or tempfile.mkdtemp(prefix=_log_dir_prefix(env))
        self.url = ""
        self.log_path = ""
        self._process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float) -> str:
        """Starts the server and waits until ``/health`` answers for this env; returns its URL."""
        deadline = time.monotonic() + timeout_s
        for attempt in range(_PORT_ATTEMPTS):
            port = free_port()
            self._spawn(port)
            try:
                self._wait_healthy(deadline)
                return self.url
            except ServerStartError:
                port_taken = "address already in use" in self.log_tail().lower()
                self.kill()
                if not port_taken or attempt == _PORT_ATTEMPTS - 1:
                    self._remove_log_dir()  # the error carries the log's tail
                    raise
        raise AssertionError("unreachable")

    def stop(self, grace_s: float = 5.0) -> int | None:
        """SIGTERM to the server (graceful: envs closed), SIGKILL to its group after ``grace_s`` or once
        it exited; returns the server's exit code, or None if it had to be killed."""
        process = self._process
        exit_code = None
        if process is not None:
            exit_code = process.poll()
            if exit_code is None:
                process.send_signal(signal.SIGTERM)  # the server only: it shuts its JVM down itself
                try:
                    exit_code = process.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    pass
            self.kill()  # also reaps whatever the server left in its group
        self._remove_log_dir()
        return exit_code

    def kill(self) -> None:
        """SIGKILL to the server's process group (its JVM included); waits for the server to go."""
        process = self._process
        if process is None:
            return
        self._signal_group(signal.SIGKILL)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # unkillable (D state): nothing more we can do
            pass
        self._process = None
        with _live_lock:
            _live.discard(self)

    def _remove_log_dir(self) -> None:
        if self._owns_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def log_tail(self, max_chars: int = 3000) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - max_chars))
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def _spawn(self, port: int) -> None:
        self.url = f"http://{LOOPBACK}:{port}"
        self.log_path = os.path.join(self.log_dir, f"server-{port}.log")
        command = [
            self.python, "-m", "envs_bridge.server",
            "--env", self.env, "--host", LOOPBACK, "--port", str(port), "--num-envs", str(self.max_envs),
            *self.extra_args,
        ]
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), environment.get("PYTHONPATH")]))
        environment[env_vars.PARENT_PID] = str(os.getpid())
        if self._owns_log_dir:
            environment[env_vars.LOG_DIR] = self.log_dir
        environment.update(self.extra_env)
        os.makedirs(self.log_dir, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=environment, cwd=str(REPO_ROOT), start_new_session=True,
            )
        with _live_lock:
            _live.add(self)

    def _wait_healthy(self, deadline: float) -> None:
        connection = JsonConnection(self.url)
        try:
            while True:
                if not self.alive():
                    raise ServerStartError(
                        f"{self.env} server exited with code {self._process.returncode if self._process else '?'} "
                        f"before answering /health; its log ends with:\n{self.log_tail()}"
                    )
                try:
                    health = connection.get("/health", timeout_s=2.0)
                except (TransportError, HttpStatusError):
                    health = None
                # Another process's server on our port (it bound the port between free_port() and our
                # bind, and ours is about to exit "address already in use"): not ours, keep waiting.
                if health is not None and health.get("pid") not in (None, self._process.pid):
                    health = None
                if health is not None:
                    if health.get("env") != self.env:
                        raise ServerStartError(f"{self.url} answers for env {health.get('env')!r}, not {self.env!r}")
                    return
                if time.monotonic() > deadline:
                    raise ServerStartError(
                        f"{self.env} server at {self.url} not healthy in time; its log ends with:\n{self.log_tail()}"
                    )
                time.sleep(0.05)
        finally:
            connection.close()

    def _signal_group(self, signum: int) -> None:
        if self._process is None:
            return
        try:
            os.killpg(self._process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def exit_with_parent(parent: int, poll_s: float = 0.5) -> None:
    """Ends this process, and every server it started, within ``poll_s`` of the death of ``parent``
    (the pid of the process that started this one, as that process saw it: a worker whose parent died
    while it was starting up has been reparented already, so its own ``os.getppid()`` would not do).

    For worker processes (``experiments.arena --jobs N``): a SIGKILLed parent runs no clean-up, and
    its workers, reparented, would play on for nobody. A thread polls ``os.getppid()`` (portable,
    unlike prctl's parent-death signal, which fires when the parent's *thread* exits); the exit is
    ``os._exit``, as atexit handlers could wait on work in flight. A JVM the worker ran itself dies
    with it (py4j's launcher ties it to its parent)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        _kill_leftovers()
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


@atexit.register
def _kill_leftovers() -> None:
    with _live_lock:
        leftovers = list(_live)
    for server in leftovers:
        server.kill()
        server._remove_log_dir()

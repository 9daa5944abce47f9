"""``EnvPool``: N env instances spread over env-server processes, driven in lockstep batches.

    with EnvPool("textworld_express", num_envs=128, env_options={"game": "coin"}) as pool:
        plan = GroupPlan.sample("train", pool.num_tasks("train"), num_groups=16, group_size=8, seed=0)
        replies = pool.reset_groups(plan)                # env i plays task plan.task_ids[i // 8]
        replies = pool.step(["look around"] * 128)       # one reply per env, in env order

The pool starts its servers itself (``python -m envs_bridge.server ...`` on free 127.0.0.1 ports, under
the interpreter given by ``python=`` or ``$MILEGPO_PYTHON_<ENV>``, default this one) or connects to
given ``urls``. Env ``i`` lives on server ``i % num_servers``; one batched call goes to every server
involved at once, each bounded by a timeout.

Faults: a server that dies, hangs past the timeout or answers 5xx is killed and started afresh (its env
instances re-created). Every episode it held is then ABORTED: the reply says so (``status="aborted"``,
``result=None``, ``error`` says why), later steps of that env keep answering ABORTED without touching a
server until it is reset, and ``metrics()["aborted_episodes"]`` counts them. Such episodes must be left
out of training; nothing is silently replayed. A failed reset is retried once on the fresh server (a
reset holds no history). A 4xx answer is a caller bug and raises ``EnvRequestError``. Servers given
by URL cannot be restarted: a failure there re-creates the envs if the server still answers, else
raises ``PoolError``.

Not thread-safe: drive one pool from one thread. ``close()`` (or leaving the ``with`` block) stops every
server the pool started; an ``atexit`` sweep in ``launcher.py`` kills any that are left.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from envs_bridge.base import StepResult, check_split
from envs_bridge.groups import GroupPlan
from envs_bridge.launcher import ServerProcess
from envs_bridge.pool_records import (
    EnvReply,
    EnvRequestError,
    EpisodeStatus,
    PoolError,
    integers,
    interpreter_for,
    raise_first,
)
from envs_bridge.protocol import MAX_ACTION_CHARS, MAX_BATCH
from envs_bridge.transport import HttpStatusError, JsonConnection, TransportError


class _EpisodeState(enum.Enum):
    """Where the episode of one pool env stands, as the pool sees it."""

    IDLE = "no episode started"
    RUNNING = "running"
    DONE = "finished"
    ABORTED = "aborted"


@dataclasses.dataclass
class _Server:
    index: int
    url: str
    process: ServerProcess | None  # None when the pool connected to a given URL
    connection: JsonConnection
    slots: list[int]  # pool env indices on this server
    env_ids: dict[int, int] = dataclasses.field(default_factory=dict)  # pool env index -> server env id
    restarts: int = 0


class _ServerFailure(Exception):
    def __init__(self, message: str, timed_out: bool):
        super().__init__(message)
        self.timed_out = timed_out


class EnvPool:
    def __init__(
        self,
        env: str,
        num_envs: int,
        *,
        num_servers: int | None = None,
        urls: Sequence[str] | None = None,
        env_options: Mapping[str, Any] | None = None,
        python: str | None = None,
        step_timeout_s: float = 60.0,
        reset_timeout_s: float = 300.0,
        start_timeout_s: float = 120.0,
        max_restarts_per_server: int = 5,
        server_env: Mapping[str, str] | None = None,
        server_args: Sequence[str] = (),
        max_envs_per_server: int | None = None,
    ):
        """
        env: registry name; num_envs: env instances (indices 0..num_envs-1).
        num_servers: processes to start (default: one per CPU core, at most num_envs); or urls: use
            running servers instead (never restarted by the pool).
        env_options: adapter keyword arguments, the same for every instance.
        python: interpreter for the servers (default $MILEGPO_PYTHON_<ENV>, else this one); it needs the
            server stack (fastapi, uvicorn, pydantic) and the env's package, not this project installed.
        step_timeout_s / reset_timeout_s: bound on one batched call to one server (reset also bounds
            env creation); start_timeout_s: bound on a server becoming healthy.
        max_restarts_per_server: restarts of one server before the pool gives up with PoolError.
        server_env / server_args: extra environment variables / command-line flags for the servers.
        max_envs_per_server: the servers' --num-envs cap (default: the envs each one holds plus the
            pool's size, since forks may move envs onto one server).
        """
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if urls is not None and num_servers is not None and num_servers != len(urls):
            raise ValueError("give either urls or num_servers, not both")
        self.env = env
        self.num_envs = num_envs
        self.env_options = dict(env_options or {})
        self.step_timeout_s = step_timeout_s
        self.reset_timeout_s = reset_timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_restarts_per_server = max_restarts_per_server
        self._python = python or interpreter_for(env)
        self._server_env = dict(server_env or {})
        self._server_args = list(server_args)
        self._max_envs_per_server = max_envs_per_server
        count = len(urls) if urls is not None else (num_servers or min(num_envs, max(1, os.cpu_count() or 1)))
        if not 1 <= count <= num_envs:
            raise ValueError(f"need between 1 and num_envs={num_envs} servers, got {count}")
        self._state = [_EpisodeState.IDLE] * num_envs
        self._abort_reason = [""] * num_envs
        self._num_tasks: dict[str, int] = {}
        self._metrics = dict.fromkeys(
            ("steps", "resets", "forks", "server_failures", "call_timeouts", "server_restarts", "aborted_episodes"), 0
        )
        self._lock = threading.Lock()
        self._closed = False
        self._executor = ThreadPoolExecutor(max_workers=count, thread_name_prefix="env-pool")
        self._servers: list[_Server] = []
        self._location = [index % count for index in range(num_envs)]  # env index -> server index
        try:
            self._servers = self._start_servers(count, urls)
        except BaseException:
            self.close()
            raise

    # ----------------------------------------------------------------- public API

    @property
    def server_urls(self) -> list[str]:
        return [server.url for server in self._servers]

    @property
    def server_pids(self) -> list[int | None]:
        return [server.process.pid if server.process else None for server in self._servers]

    def server_of(self, env_index: int) -> int:
        """The server env ``env_index`` lives on: ``env_index % num_servers`` until a fork moves it to
        its parent's server (``fork``)."""
        return self._location[env_index]

    def num_tasks(self, split: str) -> int:
        check_split(split)
        return self._num_tasks[split]

    def metrics(self) -> dict[str, int]:
        return {"servers": len(self._servers), "envs": self.num_envs, **self._metrics}

    def reset(
        self,
        split: str,
        task_ids: Sequence[int],
        seeds: Sequence[int] | None = None,
        env_indices: Sequence[int] | None = None,
    ) -> list[EnvReply]:
        """Starts task ``task_ids[j]`` of ``split`` on env ``env_indices[j]`` (default: envs 0..len-1)."""
        check_split(split)
        task_ids = integers(task_ids, "task id")
        seeds = integers(seeds, "seed") if seeds is not None else [0] * len(task_ids)
        indices = self._indices(env_indices, len(task_ids))
        if len(seeds) != len(indices):
            raise ValueError(f"need one seed per env: {len(seeds)} seeds for {len(indices)} envs")
        limit = self._num_tasks[split]
        for task_id in task_ids:
            if not 0 <= task_id < limit:
                raise ValueError(f"task id {task_id} is out of range for split {split!r}: 0..{limit - 1}")
        task_of = dict(zip(indices, task_ids))
        seed_of = dict(zip(indices, seeds))
        with self._lock:
            self._check_open()
            for slot in indices:  # the caller abandons these envs' episodes: a failure now aborts none of them
                self._state[slot] = _EpisodeState.IDLE

            def body(server: _Server, slots: list[int]) -> dict:
                return {
                    "env_ids": [server.env_ids[slot] for slot in slots],
                    "split": split,
                    "task_ids": [task_of[slot] for slot in slots],
                    "seeds": [seed_of[slot] for slot in slots],
                }

            outcomes = self._fan_out("/reset", self._by_server(indices), body, self.reset_timeout_s)
            replies: dict[int, EnvReply] = {}
            rejected: list[EnvRequestError] = []
            for server, slots, outcome in outcomes:
                if isinstance(outcome, EnvRequestError):
                    rejected.append(outcome)
                    continue
                if isinstance(outcome, _ServerFailure):
                    self._recover(server, str(outcome), outcome.timed_out)
                    try:  # a reset carries no history, so once on the fresh server is safe
                        outcome = self._call(server, "/reset", body(server, slots), self.reset_timeout_s)
                    except _ServerFailure as again:
                        raise PoolError(f"reset failed on server {server.index} twice, last: {again}") from again
                for slot, result in zip(slots, self._parse_results(outcome, len(slots))):
                    replies[slot] = self._settled(slot, result)
            self._metrics["resets"] += len(replies)
            raise_first(rejected)
            return [replies[slot] for slot in indices]

    def _settled(self, slot: int, result) -> EnvReply:
        """The reply of a slot whose reset or fork succeeded: running (or done), no abort reason."""
        self._state[slot] = _EpisodeState.DONE if result.done else _EpisodeState.RUNNING
        self._abort_reason[slot] = ""
        return EnvReply(slot, EpisodeStatus.OK, result)

    def reset_groups(self, plan: GroupPlan) -> list[EnvReply]:
        """Resets envs 0..G*K-1 so that every env of group g plays (split, task_ids[g], seeds[g])."""
        if plan.num_envs > self.num_envs:
            raise ValueError(f"plan needs {plan.num_envs} envs, the pool has {self.num_envs}")
        return self.reset(plan.split, plan.env_task_ids(), plan.env_seeds(), range(plan.num_envs))

    def step(self, actions: Sequence[str], env_indices: Sequence[int] | None = None) -> list[EnvReply]:
        """Applies ``actions[j]`` to env ``env_indices[j]`` (default: envs 0..len-1); one reply each."""
        indices = self._indices(env_indices, len(actions))
        for action in actions:
            if not isinstance(action, str) or len(action) > MAX_ACTION_CHARS:
                raise ValueError(f"actions must be strings of at most {MAX_ACTION_CHARS} characters")
        action_of = dict(zip(indices, actions))
        with self._lock:
            self._check_open()
            replies: dict[int, EnvReply] = {}
            live = []
            for slot in indices:
                state = self._state[slot]
                if state is _EpisodeState.ABORTED:
                    replies[slot] = self._aborted(slot)
                elif state is not _EpisodeState.RUNNING:
                    raise ValueError(f"env {slot} cannot step: {state.value}; reset it first")
                else:
                    live.append(slot)

            def body(server: _Server, slots: list[int]) -> dict:
                return {"env_ids": [server.env_ids[slot] for slot in slots], "actions": [action_of[slot] for slot in slots]}

            rejected: list[EnvRequestError] = []
            for server, slots, outcome in self._fan_out("/step", self._by_server(live), body, self.step_timeout_s):
                if isinstance(outcome, EnvRequestError):
                    for slot in slots:  # the server may have stepped some: only a reset makes them usable
                        self._state[slot] = _EpisodeState.IDLE
                    rejected.append(outcome)
                    continue
                if isinstance(outcome, _ServerFailure):
                    self._recover(server, str(outcome), outcome.timed_out)
                    replies.update((slot, self._aborted(slot)) for slot in slots)
                    continue
                for slot, result in zip(slots, self._parse_results(outcome, len(slots))):
                    self._state[slot] = _EpisodeState.DONE if result.done else _EpisodeState.RUNNING
                    replies[slot] = EnvReply(slot, EpisodeStatus.OK, result)
                self._metrics["steps"] += len(slots)
            raise_first(rejected)
            return [replies[slot] for slot in indices]

    def fork(self, sources: Sequence[int], targets: Sequence[int]) -> list[EnvReply]:
        """Env ``targets[j]`` takes up the running episode of env ``sources[j]`` in its current state (a
        server-side fork, docs/environments.md §7.1); one reply per target, equal to the source's last
        one. A source may repeat; a target's own episode is abandoned. A fork lives on its source's
        server, so the target moves there. Forks of an aborted episode, or of one whose server fails
        during the fork, come back ABORTED and are counted in ``aborted_episodes``."""
        sources, targets = integers(sources, "env index"), self._indices(targets, len(sources))
        for slot in sources:
            if not 0 <= slot < self.num_envs:
                raise ValueError(f"env index {slot} out of range 0..{self.num_envs - 1}")
        if set(sources) & set(targets):
            raise ValueError("an env cannot be both a fork's source and a target in one call")
        with self._lock:
            self._check_open()
            for slot in sources:
                if self._state[slot] not in (_EpisodeState.RUNNING, _EpisodeState.ABORTED):
                    raise ValueError(f"env {slot} cannot be forked: {self._state[slot].value}")
            for slot in targets:  # the caller abandons these envs' episodes
                self._state[slot] = _EpisodeState.IDLE
            replies: dict[int, EnvReply] = {}
            by_source_server: dict[int, list[int]] = {}
            for source, target in zip(sources, targets):
                if self._state[source] is _EpisodeState.ABORTED:
                    replies[target] = self._abort_fork(target, self._abort_reason[source])
                else:
                    by_source_server.setdefault(self.server_of(source), []).append(target)
            source_of = dict(zip(targets, sources))

            def body(server: _Server, slots: list[int]) -> dict:
                return {"env_ids": [server.env_ids[source_of[slot]] for slot in slots]}

            rejected: list[EnvRequestError] = []
            for server, slots, outcome in self._fan_out("/fork", by_source_server, body, self.reset_timeout_s):
                if isinstance(outcome, EnvRequestError):
                    rejected.append(outcome)
                    continue
                if isinstance(outcome, _ServerFailure):
                    self._recover(server, str(outcome), outcome.timed_out)
                    replies.update((slot, self._abort_fork(slot, str(outcome))) for slot in slots)
                    continue
                new_ids = outcome.get("env_ids") if isinstance(outcome, dict) else None
                results = self._parse_results(outcome, len(slots))
                if not isinstance(new_ids, list) or len(new_ids) != len(slots):
                    raise PoolError(f"malformed fork answer from server {server.index}")
                self._move(slots, server, new_ids)
                for slot, result in zip(slots, results):
                    replies[slot] = self._settled(slot, result)
                self._metrics["forks"] += len(slots)
            raise_first(rejected)
            return [replies[slot] for slot in targets]

    def close(self) -> None:
        """Stops every server this pool started (SIGTERM, then SIGKILL) and closes connections."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        servers = self._servers
        processes = [server.process for server in servers if server.process is not None]
        try:
            stops = [self._executor.submit(process.stop) for process in processes]
        except RuntimeError:  # at interpreter exit (an atexit close) concurrent.futures has stopped every executor
            stops = []
            for process in processes:
                process.stop()
        for server in servers:
            if server.process is None and server.env_ids:
                try:
                    server.connection.post("/close", {"env_ids": list(server.env_ids.values())}, timeout_s=10.0)
                except (TransportError, HttpStatusError):
                    pass  # best effort: the envs die with that server anyway
        for stop in stops:
            stop.result()
        for server in servers:
            server.connection.close()
        self._executor.shutdown(wait=True)

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ----------------------------------------------------------------- internals

    def _start_servers(self, count: int, urls: Sequence[str] | None) -> list[_Server]:
        slots_of = [list(range(index, self.num_envs, count)) for index in range(count)]
        if urls is not None:
            servers = [_Server(i, url.rstrip("/"), None, JsonConnection(url), slots_of[i]) for i, url in enumerate(urls)]
            for server in servers:
                self._check_health(server)
        else:
            processes = [self._new_process(len(slots)) for slots in slots_of]
            try:
                started = list(self._executor.map(self._start, processes))
            except BaseException:
                for process in processes:
                    process.stop(grace_s=0)
                raise
            servers = [
                _Server(i, url, process, JsonConnection(url), slots_of[i])
                for i, (process, url) in enumerate(zip(processes, started))
            ]
        self._servers = servers  # so close() cleans up if env creation fails below
        for server, outcome in zip(servers, self._executor.map(self._create_envs, servers)):
            if outcome is not None:
                raise outcome
        return servers

    def _new_process(self, num_slots: int) -> ServerProcess:
        return ServerProcess(
            self.env,
            python=self._python,
            # room for every env of the pool, since forks move envs to their parent's server
            max_envs=self._max_envs_per_server or num_slots + self.num_envs,
            extra_env=self._server_env,
            extra_args=self._server_args,
        )

    def _start(self, process: ServerProcess) -> str:
        try:
            return process.start(self.start_timeout_s)
        except Exception as error:
            raise PoolError(f"could not start a {self.env} server: {error}") from error

    def _check_health(self, server: _Server) -> None:
        try:
            health = server.connection.get("/health", timeout_s=10.0)
        except (TransportError, HttpStatusError) as error:
            raise PoolError(f"env server {server.url} does not answer /health: {error}") from error
        if health.get("env") != self.env:
            raise PoolError(f"env server {server.url} serves {health.get('env')!r}, not {self.env!r}")

    def _create_envs(self, server: _Server) -> Exception | None:
        try:
            answer = server.connection.post(
                "/create", {"count": len(server.slots), "options": self.env_options}, timeout_s=self.reset_timeout_s
            )
        except HttpStatusError as error:
            if error.status >= 500:
                return PoolError(f"creating {self.env} envs on {server.url} crashed the env: {error}")
            return EnvRequestError(error.status, f"creating {self.env} envs failed: {error}")
        except TransportError as error:
            return PoolError(f"creating {self.env} envs on {server.url} failed: {error}")
        env_ids = answer["env_ids"]
        if len(env_ids) != len(server.slots):
            return PoolError(f"{server.url} created {len(env_ids)} envs, asked for {len(server.slots)}")
        server.env_ids = dict(zip(server.slots, env_ids))
        self._num_tasks = dict(answer["num_tasks"])
        return None

    def _indices(self, env_indices: Sequence[int] | None, count: int) -> list[int]:
        indices = list(range(count)) if env_indices is None else integers(env_indices, "env index")
        if len(indices) != count:
            raise ValueError(f"{count} values for {len(indices)} envs")
        if len(set(indices)) != len(indices):
            raise ValueError("env indices contain duplicates")
        for index in indices:
            if not 0 <= index < self.num_envs:
                raise ValueError(f"env index {index} out of range 0..{self.num_envs - 1}")
        return indices

    def _by_server(self, slots: Sequence[int]) -> dict[int, list[int]]:
        grouped: dict[int, list[int]] = {}
        for slot in slots:
            grouped.setdefault(self.server_of(slot), []).append(slot)
        for server_slots in grouped.values():
            if len(server_slots) > MAX_BATCH:
                raise ValueError(f"more than {MAX_BATCH} envs on one server in one call")
        return grouped

    def _fan_out(
        self,
        path: str,
        slots_by_server: dict[int, list[int]],
        body: Callable[[_Server, list[int]], dict],
        timeout_s: float,
    ) -> list[tuple[_Server, list[int], Any]]:
        """One request per server, concurrently; outcome = decoded answer, ``_ServerFailure`` (dead,
        hung or 5xx) or ``EnvRequestError`` (4xx), so every server's answer is seen before any raise."""
        jobs = [(self._servers[index], slots) for index, slots in sorted(slots_by_server.items())]

        def run(job: tuple[_Server, list[int]]) -> Any:
            server, slots = job
            try:
                return self._call(server, path, body(server, slots), timeout_s)
            except (_ServerFailure, EnvRequestError) as failure:
                return failure

        outcomes = [run(jobs[0])] if len(jobs) == 1 else list(self._executor.map(run, jobs))
        return [(server, slots, outcome) for (server, slots), outcome in zip(jobs, outcomes)]

    def _call(self, server: _Server, path: str, payload: dict, timeout_s: float) -> Any:
        if server.process is not None and not server.process.alive():
            raise _ServerFailure(f"server {server.index} ({server.url}) is not running", timed_out=False)
        try:
            return server.connection.post(path, payload, timeout_s)
        except TransportError as error:
            raise _ServerFailure(f"server {server.index}: {error}", timed_out=error.timed_out) from error
        except HttpStatusError as error:
            if error.status >= 500:
                raise _ServerFailure(f"server {server.index}: {error}", timed_out=False) from error
            raise EnvRequestError(error.status, str(error)) from error

    def _recover(self, server: _Server, reason: str, timed_out: bool) -> None:
        """Aborts every episode ``server`` held, then gives it fresh env instances (restarting it)."""
        self._metrics["server_failures"] += 1
        self._metrics["call_timeouts"] += int(timed_out)
        for slot in server.slots:
            if self._state[slot] is _EpisodeState.RUNNING:
                self._state[slot] = _EpisodeState.ABORTED
                self._abort_reason[slot] = reason
                self._metrics["aborted_episodes"] += 1
            elif self._state[slot] is _EpisodeState.DONE:
                self._state[slot] = _EpisodeState.IDLE
        if server.process is None:
            self._check_health(server)  # a dead URL server cannot be brought back from here
        else:
            if server.restarts >= self.max_restarts_per_server:
                raise PoolError(
                    f"server {server.index} failed again after {server.restarts} restarts: {reason}\n"
                    f"its log ends with:\n{server.process.log_tail()}"
                )
            server.process.kill()
            server.connection.close()
            server.restarts += 1
            self._metrics["server_restarts"] += 1
            server.url = self._start(server.process)
            server.connection = JsonConnection(server.url)
        failure = self._create_envs(server)
        if failure is not None:
            raise PoolError(f"server {server.index} could not re-create its envs after a failure: {failure}") from failure

    def _move(self, slots: list[int], server: _Server, new_ids: list[int]) -> None:
        """Envs ``slots`` are now the server's envs ``new_ids``: their old instances are closed (best
        effort: a server that fails here is recovered by its next call) so no server holds more than
        the pool's envs."""
        old: dict[int, list[int]] = {}
        for slot, new_id in zip(slots, new_ids):
            before = self._servers[self.server_of(slot)]
            old.setdefault(before.index, []).append(before.env_ids.pop(slot))
            before.slots.remove(slot)
            server.slots.append(slot)
            server.env_ids[slot] = new_id
            self._location[slot] = server.index
        for index, env_ids in old.items():
            try:
                self._call(self._servers[index], "/close", {"env_ids": env_ids}, self.step_timeout_s)
            except (_ServerFailure, EnvRequestError):
                pass

    def _abort_fork(self, slot: int, reason: str) -> EnvReply:
        self._state[slot], self._abort_reason[slot] = _EpisodeState.ABORTED, reason
        self._metrics["aborted_episodes"] += 1
        return self._aborted(slot)

    def _aborted(self, slot: int) -> EnvReply:
        return EnvReply(slot, EpisodeStatus.ABORTED, None, self._abort_reason[slot])

    @staticmethod
    def _parse_results(answer: Any, expected: int) -> list[StepResult]:
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list) or len(results) != expected:
            raise PoolError(f"malformed server answer: expected {expected} results")
        return [
            StepResult(**{**item, "admissible_actions": tuple(item["admissible_actions"])}) for item in results
        ]

    def _check_open(self) -> None:
        if self._closed:
            raise PoolError("the pool is closed")

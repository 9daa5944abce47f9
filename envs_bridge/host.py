"""The env instances one server holds, and batched reset/step over them (no HTTP here).

A batch is validated as a whole before any env runs (unknown or duplicate ids, bad split, task id
out of range, step without a running episode), so a rejected request changes nothing. The envs of a
valid batch then run concurrently on a thread pool: TextWorldExpress's calls wait on its JVM over
py4j sockets and release the GIL, so one request with many env ids keeps the JVM busy on all cores;
for pure-Python adapters the threads cost little.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from envs_bridge.base import SPLITS, EnvAdapter, EnvError, StepResult, check_split
from envs_bridge.fork import EpisodeRecord, fork_episode
from envs_bridge.registry import make_adapter


class HostError(Exception):
    """A request the host refuses; ``status`` is the HTTP status the server answers with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class _Episode(enum.Enum):
    NONE = "no episode started"
    RUNNING = "running"
    DONE = "finished"


class _HostedEnv:
    """One environment instance of the host and the state of its episode."""

    __slots__ = ("adapter", "options", "episode", "busy", "record", "last")

    def __init__(self, adapter: EnvAdapter, options: dict[str, Any]):
        self.adapter = adapter
        self.options = options  # the adapter's options, for its forks
        self.episode = _Episode.NONE
        self.busy = False  # an operation on this env is in flight (guards concurrent requests)
        # how the running episode started and what it did since, and its last result (for forks)
        self.record: EpisodeRecord | None = None
        self.last: StepResult | None = None


class EnvHost:
    def __init__(self, env_name: str, max_envs: int, threads: int = 8):
        if max_envs < 1:
            raise ValueError(f"max_envs must be >= 1, got {max_envs}")
        self.env_name = env_name
        self.max_envs = max_envs
        self._slots: dict[int, _HostedEnv] = {}
        self._next_id = 0
        self._lock = threading.Lock()  # guards _slots, _next_id and slot flags
        self._executor = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="env")
        self._shut_down = False

    @property
    def num_envs(self) -> int:
        return len(self._slots)

    def create(self, count: int, options: dict[str, Any]) -> tuple[list[int], dict[str, int]]:
        with self._lock:
            self._check_open()
            self._check_room(count, "creating")
        adapters: list[EnvAdapter] = []
        try:
            for _ in range(count):
                adapters.append(make_adapter(self.env_name, **options))
            num_tasks = {split: adapters[0].num_tasks(split) for split in SPLITS}
        except EnvError as error:
            self._close_adapters(adapters)
            raise HostError(400, str(error)) from error
        except BaseException:
            self._close_adapters(adapters)
            raise
        with self._lock:
            if len(self._slots) + count > self.max_envs:  # a concurrent create or fork won the race
                self._close_adapters(adapters)
                raise HostError(409, f"this server's cap of {self.max_envs} envs was reached meanwhile")
            env_ids = list(range(self._next_id, self._next_id + count))
            self._next_id += count
            for env_id, adapter in zip(env_ids, adapters):
                self._slots[env_id] = _HostedEnv(adapter, dict(options))
        return env_ids, num_tasks

    def reset(self, env_ids: Sequence[int], split: str, task_ids: Sequence[int], seeds: Sequence[int]) -> list[StepResult]:
        try:
            check_split(split)
        except EnvError as error:
            raise HostError(400, str(error)) from error

        def validate(env_id: int, slot: _HostedEnv, position: int) -> None:
            task_id = task_ids[position]
            num_tasks = slot.adapter.num_tasks(split)
            if not 0 <= task_id < num_tasks:
                raise HostError(
                    400, f"task id {task_id} (env {env_id}) is out of range for split {split!r}: 0..{num_tasks - 1}"
                )

        def run(slot: _HostedEnv, position: int) -> StepResult:
            result = slot.adapter.reset(split, task_ids[position], seeds[position])
            slot.record, slot.last = EpisodeRecord(split, task_ids[position], seeds[position]), result
            return result

        return self._run_batch(env_ids, validate, run)

    def step(self, env_ids: Sequence[int], actions: Sequence[str]) -> list[StepResult]:
        def validate(env_id: int, slot: _HostedEnv, position: int) -> None:
            if slot.episode is not _Episode.RUNNING:
                raise HostError(409, f"env {env_id} cannot step: {slot.episode.value}; reset it first")

        def run(slot: _HostedEnv, position: int) -> StepResult:
            result = slot.adapter.step(actions[position])
            slot.record.actions.append(actions[position])
            slot.last = result
            return result

        return self._run_batch(env_ids, validate, run)

    def fork(self, env_ids: Sequence[int]) -> tuple[list[int], list[StepResult]]:
        """One new env per entry of ``env_ids`` (an id may repeat: several forks of one state), each in
        the state that env's running episode is in now (docs/environments.md §7.1). Forks count against
        ``max_envs`` like created envs; the parents are only read."""
        with self._lock:
            self._check_open()
            unknown = sorted({env_id for env_id in env_ids if env_id not in self._slots})
            if unknown:
                raise HostError(404, f"unknown env ids {unknown[:20]}: create them first (or they were closed)")
            parents = {env_id: self._slots[env_id] for env_id in env_ids}
            busy = [env_id for env_id, slot in parents.items() if slot.busy]
            if busy:
                raise HostError(409, f"envs {busy[:20]} are busy with another request")
            for env_id, slot in parents.items():
                if slot.episode is not _Episode.RUNNING:
                    raise HostError(409, f"env {env_id} cannot be forked: {slot.episode.value}; only a running episode can")
            self._check_room(len(env_ids), "forking")
            for slot in parents.values():
                slot.busy = True

        def run(position: int) -> tuple[EnvAdapter, StepResult] | Exception:
            parent = parents[env_ids[position]]
            try:
                child = make_adapter(self.env_name, **parent.options)
            except Exception as error:  # returned, not raised, so every fork of the batch finishes first
                return error
            try:
                return child, fork_episode(parent.adapter, child, parent.record, parent.last)
            except Exception as error:
                self._close_adapters([child])
                return error

        outcomes: list[tuple[EnvAdapter, StepResult] | Exception] = []
        try:
            outcomes = self._map(run, len(env_ids))
        finally:
            with self._lock:
                for slot in parents.values():
                    slot.busy = False
        forks = [outcome for outcome in outcomes if not isinstance(outcome, Exception)]
        failures = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
        if failures:
            self._close_adapters([child for child, _ in forks])
            raise failures[0]  # the parents were running and stay so: a fork failing is the engine's fault (500)
        with self._lock:
            try:
                self._check_room(len(forks), "forking")  # a concurrent create or fork won the race
            except HostError:
                self._close_adapters([child for child, _ in forks])
                raise
            new_ids = list(range(self._next_id, self._next_id + len(forks)))
            self._next_id += len(forks)
            for new_id, env_id, (child, result) in zip(new_ids, env_ids, forks):
                parent = parents[env_id]
                hosted = _HostedEnv(child, parent.options)
                hosted.episode, hosted.record, hosted.last = _Episode.RUNNING, parent.record.copy(), result
                self._slots[new_id] = hosted
        return new_ids, [result for _, result in forks]

    def close(self, env_ids: Sequence[int]) -> list[int]:
        with self._lock:
            self._check_ids(env_ids)
            busy = [env_id for env_id in env_ids if self._slots[env_id].busy]
            if busy:
                raise HostError(409, f"envs {busy} are busy with another request")
            slots = [self._slots.pop(env_id) for env_id in env_ids]
        self._close_adapters([slot.adapter for slot in slots])
        return list(env_ids)

    def shutdown(self) -> None:
        with self._lock:
            self._shut_down = True
            slots = list(self._slots.values())
            self._slots.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._close_adapters([slot.adapter for slot in slots])

    def _check_open(self) -> None:
        """A request that arrives, or was in flight, when the server shuts down: 503, one line."""
        if self._shut_down:
            raise HostError(503, "the env server is shutting down")

    def _check_room(self, count: int, doing: str) -> None:
        """409 when ``count`` more envs would pass the cap (call with the lock held)."""
        if len(self._slots) + count > self.max_envs:
            raise HostError(
                409,
                f"{doing} {count} envs would exceed this server's cap of {self.max_envs} "
                f"({len(self._slots)} live); close some or start the server with a larger --num-envs",
            )

    def _map(self, run: Callable[[int], Any], count: int) -> list[Any]:
        """``run(0..count-1)`` on the thread pool (inline for one), in order."""
        if count == 1:
            return [run(0)]
        try:
            return list(self._executor.map(run, range(count)))
        except RuntimeError:  # "cannot schedule new futures after shutdown": shut down meanwhile
            self._check_open()
            raise

    def _check_ids(self, env_ids: Sequence[int]) -> None:
        if len(set(env_ids)) != len(env_ids):
            raise HostError(400, "env_ids contains duplicates")
        unknown = [env_id for env_id in env_ids if env_id not in self._slots]
        if unknown:
            raise HostError(404, f"unknown env ids {unknown[:20]}: create them first (or they were closed)")

    def _run_batch(
        self,
        env_ids: Sequence[int],
        validate: Callable[[int, _HostedEnv, int], None],
        run: Callable[[_HostedEnv, int], StepResult],
    ) -> list[StepResult]:
        with self._lock:
            self._check_open()
            self._check_ids(env_ids)
            slots = [self._slots[env_id] for env_id in env_ids]
            busy = [env_id for env_id, slot in zip(env_ids, slots) if slot.busy]
            if busy:
                raise HostError(409, f"envs {busy[:20]} are busy with another request")
            for position, (env_id, slot) in enumerate(zip(env_ids, slots)):
                validate(env_id, slot, position)
            for slot in slots:
                slot.busy = True
        outcomes: list[StepResult | Exception] = []
        try:
            outcomes = self._map(lambda position: _attempt(run, slots[position], position), len(slots))
        finally:
            with self._lock:
                for slot, outcome in zip(slots, outcomes):
                    if isinstance(outcome, StepResult):
                        slot.episode = _Episode.DONE if outcome.done else _Episode.RUNNING
                    else:
                        slot.episode = _Episode.NONE  # its state is unknown now: it must be reset
                for slot in slots:
                    slot.busy = False
        results: list[StepResult] = []
        env_errors: list[str] = []
        for env_id, outcome in zip(env_ids, outcomes):
            if isinstance(outcome, StepResult):
                results.append(outcome)
            elif isinstance(outcome, EnvError):
                env_errors.append(f"env {env_id}: {outcome}")
            else:
                raise outcome  # an adapter crash: the server answers 500 and the pool restarts it
        if env_errors:
            raise HostError(400, "; ".join(env_errors))
        return results

    @staticmethod
    def _close_adapters(adapters: Sequence[EnvAdapter]) -> None:
        for adapter in adapters:
            try:
                adapter.close()
            except Exception:  # closing is best effort: the process may be going down anyway
                pass


def _attempt(run: Callable[[_HostedEnv, int], StepResult], slot: _HostedEnv, position: int) -> StepResult | Exception:
    try:
        return run(slot, position)
    except Exception as error:  # returned, not raised, so every env of the batch finishes first
        return error

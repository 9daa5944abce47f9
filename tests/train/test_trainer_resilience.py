"""Issue 6 through the real trainer and CLI (``python -m experiments.train``) on TextWorldExpress with
the tiny policy of test_trainer.py: SIGTERM saves, exits 0, leaves no env server behind and resumes;
a run killed with SIGKILL right after a checkpoint (and with a half-written one next to it) resumes to
the same parameters and metrics, bit for bit, as an unbroken run; an unreadable newest checkpoint is
set aside and the run resumes from the one before; a changed hashed setting is refused unless
``run.allow_config_change``, and so is a ``run.iterations`` below the checkpoint's.

One unbroken 3-iteration run (module fixture ``straight``) is the reference; every other run starts
from a copy of its warm start (TextWorldExpress's gold paths, the SFT data, are not reproducible across
JVM starts) or of its whole work directory.
"""

from __future__ import annotations

import gc
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from experiments.train import build_config
from milegpo_jax.train.checkpoint import CORRUPT_DIR, ConfigMismatchError
from milegpo_jax.train.logging import read_metrics
from milegpo_jax.train.trainer import Trainer
from tests.train.test_trainer import TINY

try:
    import psutil
except ImportError:  # not a project dependency: fall back to /proc
    psutil = None

# A failed orbax read (the corrupt-checkpoint test) abandons tensorstore futures whose callbacks later
# find their event loop closed ("Exception ignored in ..."): noise after an error provoked on purpose.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process checks read /proc"),
]

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO)}
ITERATIONS = 3  # the reference run's length
# A hashed setting changed on resume, and how the refusal must name it (from the demo's own value).
_LR = build_config("experiments/configs/demo.py", TINY).optim.learning_rate
CHANGED_LR = 2 * _LR
LR_CHANGE = f"optim.learning_rate: {_LR} -> {CHANGED_LR}"
RUN_TIMEOUT_S = 300
# Metrics that legitimately differ between two runs of the same iterations.
UNSTABLE = ("wall_time", "time/")


# ---------------------------------------------------------------------------------------- processes


def _proc_stat(pid: int) -> tuple[str, int, str] | None:
    """(state, parent pid, start time) of a process from /proc, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as file:
            stat = file.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # the name may hold spaces and parentheses
    return fields[0], int(fields[1]), fields[19]


def _descendants(pid: int) -> set[tuple[int, str]]:
    """Every live process below ``pid``, as (pid, start time): the identity survives pid reuse."""
    if psutil is not None:
        try:
            return {(p.pid, str(p.create_time())) for p in psutil.Process(pid).children(recursive=True)}
        except psutil.NoSuchProcess:
            return set()
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _proc_stat(int(entry))) is not None:
            children.setdefault(stat[1], []).append((int(entry), stat[2]))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child[0])
    return found


def _alive(processes: set[tuple[int, str]]) -> set[tuple[int, str]]:
    """Those still running (a zombie waiting for a reaper has exited)."""
    alive = set()
    for pid, start in processes:
        if psutil is not None:
            try:
                process = psutil.Process(pid)
                if str(process.create_time()) == start and process.status() != psutil.STATUS_ZOMBIE:
                    alive.add((pid, start))
            except psutil.NoSuchProcess:
                pass
        elif (stat := _proc_stat(pid)) is not None and stat[2] == start and stat[0] != "Z":
            alive.add((pid, start))
    return alive


def _is_env_server(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return b"envs_bridge.server" in file.read()
    except OSError:
        return False


def _wait_gone(processes: set[tuple[int, str]], timeout_s: float) -> set[tuple[int, str]]:
    deadline = time.monotonic() + timeout_s
    while (alive := _alive(processes)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def _kill_all(processes: set[tuple[int, str]]) -> None:
    """SIGKILL to each process's group (env servers run in their own, with their JVM) and to itself."""
    for pid, _ in _alive(processes):
        try:
            group = os.getpgid(pid)
            if group != os.getpgrp():  # never this test process's own group
                os.killpg(group, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class Cli:
    """``python -m experiments.train`` in its own session, output in files (a full pipe would block
    it), every process it starts recorded while it runs."""

    def __init__(self, workdir: Path, *overrides: str):
        self.workdir = workdir
        logs = workdir.parent / f"{workdir.name}-logs"
        logs.mkdir(exist_ok=True)
        runs = len(list(logs.glob("*.out")))
        self.out_path, self.err_path = logs / f"{runs}.out", logs / f"{runs}.err"
        command = [
            sys.executable, "-m", "experiments.train", "--config", "experiments/configs/demo.py",
            "--workdir", str(workdir), *(f"--config.{o}" for o in [*TINY, *overrides]),
        ]
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=REPO, env=ENV,
                                            start_new_session=True)
        self.spawned: set[tuple[int, str]] = set()

    def watch(self, until: Callable[[], bool] = lambda: False, timeout_s: float = RUN_TIMEOUT_S, poll_s: float = 0.01) -> bool:
        """Polls until ``until()`` (True) or the process exits (False), noting its descendants."""
        deadline = time.monotonic() + timeout_s
        last_scan = 0.0
        while True:
            if time.monotonic() - last_scan > 0.2:
                self.spawned |= _descendants(self.process.pid)
                last_scan = time.monotonic()
            if until():
                return True
            if self.process.poll() is not None:
                return False
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s}s; stderr ends with:\n{self.stderr[-3000:]}")
            time.sleep(poll_s)

    def finish(self, timeout_s: float = RUN_TIMEOUT_S) -> int:
        self.watch(timeout_s=timeout_s)
        return self.process.returncode

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def summary(self) -> dict:
        lines = self.out_path.read_text().strip().splitlines()
        assert lines, f"no output; stderr ends with:\n{self.stderr[-3000:]}"
        return json.loads(lines[-1])

    def kill(self) -> None:
        """SIGKILL to the run's process group and to everything it started (cleanup)."""
        if self.process.poll() is None:
            self.spawned |= _descendants(self.process.pid)
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait(timeout=30)
        _kill_all(self.spawned)


@pytest.fixture
def cli_runs():
    """Starts CLI runs; whatever is left of them is killed after the test, pass or fail."""
    runs: list[Cli] = []

    def start(workdir: Path, *overrides: str) -> Cli:
        runs.append(Cli(workdir, *overrides))
        return runs[-1]

    yield start
    for run in runs:
        run.kill()


# ---------------------------------------------------------------------------------------- runs


def _in_process(workdir: Path, iterations: int, *overrides: str) -> tuple[Trainer, dict]:
    config = build_config("experiments/configs/demo.py", [*TINY, f"run.iterations={iterations}", *overrides])
    trainer = Trainer(config, workdir)
    return trainer, trainer.run()


def _params(trainer: Trainer) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(trainer.model, nnx.Param))]


def _stable(record: dict) -> dict:
    return {k: v for k, v in record.items() if not k.startswith(UNSTABLE)}


def _trained(workdir: Path) -> dict[int, dict]:
    """The iteration records that trained (iteration 0 is the evaluation before training)."""
    return {r["iteration"]: r for r in read_metrics(workdir) if "actor/loss" in r}


def _steps(workdir: Path) -> list[int]:
    directory = workdir / "checkpoints"
    return sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit()) if directory.exists() else []


def _from_warm_start(source: Path, target: Path) -> Path:
    for name in ("warm_start", "tokenizer"):
        shutil.copytree(source / name, target / name)
    return target


def _assert_refused_in_process(workdir: Path, overrides, message: str) -> None:
    """Trainer.run refuses to resume WORKDIR under OVERRIDES (ConfigMismatchError naming MESSAGE) and
    stops the env servers its Trainer started before raising."""
    before = {p for p in _descendants(os.getpid()) if _is_env_server(p[0])}
    trainer = Trainer(build_config("experiments/configs/demo.py", [*TINY, *overrides]), workdir)
    servers = {p for p in _descendants(os.getpid()) if _is_env_server(p[0])} - before
    assert servers
    with pytest.raises(ConfigMismatchError, match=re.escape(message)):
        trainer.run()
    try:
        assert not _wait_gone(servers, timeout_s=5), "Trainer.run raised and left its env servers running"
    finally:
        trainer.pool.close()


def _assert_same_params(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The unbroken reference run: ITERATIONS iterations, a checkpoint after each (the last 2 kept)."""
    workdir = tmp_path_factory.mktemp("straight") / "run"
    trainer, summary = _in_process(workdir, ITERATIONS)
    assert summary["resumed_from"] == 0
    trained = _trained(workdir)
    assert sorted(trained) == list(range(1, ITERATIONS + 1))
    assert all(np.isfinite(r["actor/loss"]) for r in trained.values())
    assert _steps(workdir) == [ITERATIONS - 1, ITERATIONS]
    return {"workdir": workdir, "params": _params(trainer), "records": trained}


# ---------------------------------------------------------------------------------------- tests


def test_sigterm_saves_the_last_iteration_exits_zero_without_orphans_and_resumes(straight, cli_runs, tmp_path):
    workdir = _from_warm_start(straight["workdir"], tmp_path / "run")
    # save_every far off: only the signal makes it save (no evaluations: they only cost time here)
    run = cli_runs(workdir, "run.iterations=50", "run.save_every=1000", "run.eval_before_training=false", "run.eval_every=0")
    metrics = workdir / "metrics.jsonl"
    assert run.watch(until=lambda: metrics.exists() and 1 in _trained(workdir), poll_s=0.1), run.stderr[-3000:]
    servers = set(run.spawned)
    assert any(_is_env_server(pid) for pid, _ in servers), "the env servers were not seen running"
    run.process.send_signal(signal.SIGTERM)  # to the trainer alone, as a scheduler's preemption does
    assert run.finish(timeout_s=120) == 0, run.stderr[-3000:]

    summary = run.summary()
    assert summary["stopped_by_signal"] is True and summary["resumed_from"] == 0
    last = max(_trained(workdir))
    assert 1 <= last < 50
    assert _steps(workdir) == [last]  # the iteration it was in when signalled, finished and saved
    assert not _wait_gone(servers, timeout_s=5), "env server processes outlived the stopped run"
    assert not _alive(run.spawned)

    _, summary = _in_process(workdir, last + 1)
    assert summary["resumed_from"] == last and "stopped_by_signal" not in summary
    assert [r["iteration"] for r in read_metrics(workdir)] == list(range(1, last + 2))  # nothing lost or repeated
    assert _steps(workdir)[-1] == last + 1
    if last + 1 <= ITERATIONS:  # the same iteration as the reference run's, from the signalled save
        # (both evaluate there: the reference at eval_every=2 and at its end, this run at its end)
        assert _stable(_trained(workdir)[last + 1]) == _stable(straight["records"][last + 1])


def test_sigkill_after_a_checkpoint_resumes_bitwise(straight, cli_runs, tmp_path):
    workdir = _from_warm_start(straight["workdir"], tmp_path / "run")
    checkpoints = workdir / "checkpoints"
    run = cli_runs(workdir, f"run.iterations={ITERATIONS}", "run.eval_before_training=false")  # TINY saves every iteration
    # orbax writes a step to "<step>.orbax-checkpoint-tmp" and renames it when complete
    assert run.watch(until=lambda: (checkpoints / "1").is_dir()), f"ended before its first checkpoint:\n{run.stderr[-3000:]}"
    servers = _descendants(run.process.pid)
    assert any(_is_env_server(pid) for pid, _ in servers)
    run.kill()  # SIGKILL to its process group; the env servers (own sessions, with their JVM) too
    assert run.process.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert not _wait_gone(servers, timeout_s=5), "env servers left running"
    committed = _steps(workdir)
    assert committed and committed[0] == 1 and committed[-1] < ITERATIONS

    # A save cut off mid-write, next to the committed one (unless the kill left one itself).
    partial = checkpoints / f"{committed[-1] + 1}.orbax-checkpoint-tmp"
    if not any(checkpoints.glob("*.orbax-checkpoint-tmp*")):
        shutil.copytree(checkpoints / str(committed[-1]), partial)
        for file in glob.glob(f"{partial}/state/**/d/*", recursive=True):
            os.truncate(file, os.path.getsize(file) // 2)
        (partial / "commit_success.txt").unlink(missing_ok=True)

    resumed, summary = _in_process(workdir, ITERATIONS)
    assert summary["resumed_from"] == committed[-1]
    _assert_same_params(_params(resumed), straight["params"])
    trained = _trained(workdir)
    assert _stable(trained[ITERATIONS]) == _stable(straight["records"][ITERATIONS])
    assert [r["iteration"] for r in read_metrics(workdir)] == list(range(1, ITERATIONS + 1))  # lines of the killed run dropped
    assert not list(checkpoints.glob("*.orbax-checkpoint-tmp*"))
    assert not (workdir / CORRUPT_DIR).exists()  # an unfinished save is not a corrupt checkpoint


def _truncate_arrays(step_dir: Path) -> None:
    files = [f for f in glob.glob(f"{step_dir}/state/**/d/*", recursive=True) if os.path.isfile(f)]
    assert files
    for file in files:
        os.truncate(file, os.path.getsize(file) // 2)


def test_corrupt_latest_checkpoint_is_set_aside_and_the_run_resumes_from_the_one_before(straight, tmp_path):
    workdir = tmp_path / "run"
    shutil.copytree(straight["workdir"], workdir)
    _truncate_arrays(workdir / "checkpoints" / str(ITERATIONS))
    with pytest.warns(RuntimeWarning, match=f"could not be read .*resuming from iteration {ITERATIONS - 1}"):
        resumed, summary = _in_process(workdir, ITERATIONS)
    assert summary["resumed_from"] == ITERATIONS - 1
    assert [p.name.split("-")[0] for p in (workdir / CORRUPT_DIR).iterdir()] == [str(ITERATIONS)]
    assert _steps(workdir) == [ITERATIONS - 1, ITERATIONS]  # the iteration was trained and saved again
    _assert_same_params(_params(resumed), straight["params"])
    assert _stable(_trained(workdir)[ITERATIONS]) == _stable(straight["records"][ITERATIONS])
    del resumed
    for _ in range(3):  # let the reads the failed restore abandoned finish here (see pytestmark)
        time.sleep(0.1)
        gc.collect()


def test_changed_hashed_setting_is_refused_unless_allowed(straight, cli_runs, tmp_path):
    workdir = tmp_path / "run"
    shutil.copytree(straight["workdir"], workdir)
    changed = (f"optim.learning_rate={CHANGED_LR}", f"run.iterations={ITERATIONS + 1}")

    refused = cli_runs(workdir, *changed)
    code = refused.finish()
    assert code == 2
    # one line, the last on stderr, naming the change and the way out (was a 21-line traceback)
    tail = refused.stderr.strip().splitlines()[-1]
    assert tail.startswith("error: the checkpoint of iteration") and LR_CHANGE in tail and "allow_config_change" in tail, tail
    assert "Traceback" not in refused.stderr
    assert _steps(workdir) == [ITERATIONS - 1, ITERATIONS] and not (workdir / CORRUPT_DIR).exists()
    assert max(_trained(workdir)) == ITERATIONS  # nothing logged or truncated
    assert refused.spawned and not _wait_gone(refused.spawned, timeout_s=5), "env servers outlived the refused run"

    # In-process (a sweep or notebook), Trainer.run refusing must stop its env servers too, not
    # leave them to the interpreter's exit.
    _assert_refused_in_process(workdir, changed, LR_CHANGE)

    # allowed: the same overrides plus the flag (in-process: a CLI start is the slow part of this test)
    with pytest.warns(RuntimeWarning, match=re.escape(LR_CHANGE)):
        _, summary = _in_process(workdir, ITERATIONS + 1, f"optim.learning_rate={CHANGED_LR}", "run.allow_config_change=true")
    assert summary["resumed_from"] == ITERATIONS
    assert _steps(workdir)[-1] == ITERATIONS + 1 and ITERATIONS + 1 in _trained(workdir)


def test_resuming_with_fewer_iterations_than_the_checkpoint_is_refused(straight, tmp_path):
    """A resumed run whose run.iterations is below its checkpoint's iteration would run nothing and
    report success; it is refused (the CLI exits 2 on ConfigMismatchError) and stops its env servers."""
    workdir = tmp_path / "run"
    shutil.copytree(straight["workdir"], workdir)
    _assert_refused_in_process(workdir, [f"run.iterations={ITERATIONS - 1}"],
                               f"is of iteration {ITERATIONS}, past run.iterations={ITERATIONS - 1}")
    assert _steps(workdir) == [ITERATIONS - 1, ITERATIONS] and max(_trained(workdir)) == ITERATIONS

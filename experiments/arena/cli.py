"""``python -m experiments.arena`` command line: every credit estimator on the same real environment, with seeds.

    python -m experiments.arena --env textworld_express --game coin --seeds 5 --work runs/arena-coin
    python -m experiments.arena --env alfworld --groups 8 --contestants all --work runs/arena-alfworld

How to read and extend it: docs/arena.md. The last line printed is one JSON object
``{"job": "arena", "env": ..., "results": {...}, "time": {...}, "wall_s": ...}``; bad input prints one
line and exits 2.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

from envs_bridge.base import EnvError
from envs_bridge.registry import EnvUnavailableError
from envs_bridge.specs import env_spec
from experiments.arena import inputs, output, stats, summary
from experiments.arena.contestants import PAPER_CONTESTANTS, parse_contestants
from experiments.arena.envs import ArenaEnv, make_arena_env, make_backend
from experiments.arena.inputs import ArenaInputError
from experiments.arena.policy import UPDATES
from experiments.arena.run import RunSettings
from milegpo_jax.config import parse_credit_options
from milegpo_jax.credit.config import CreditConfigError


def make_parser(prog: str = "python -m experiments.arena", description: str = __doc__.split("\n")[0]) -> argparse.ArgumentParser:
    """The arena's options (the study command adds its own to these)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--env", default="textworld_express")
    parser.add_argument("--game", default=None, help="TextWorldExpress preset (experiments/arena/envs.py)")
    parser.add_argument("--env-set", action="append", default=[], metavar="KEY=VALUE", help="adapter option (JSON value or string)")
    parser.add_argument("--max-steps", type=int, default=None, help="actions per episode (default: the adapter's)")
    parser.add_argument("--backend", default="auto", help="inprocess | pool | auto (pool for alfworld)")
    parser.add_argument("--servers", type=int, default=2, help="env servers of the pool backend")
    parser.add_argument("--contestants", nargs="+", default=list(PAPER_CONTESTANTS), metavar="SPEC",
                        help="estimator[:stage][@key=value...], random, or all")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="credit option for every contestant")
    parser.add_argument("--recipe", default=None, help="credit recipe (default: webshop for webshop, else alfworld)")
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=None, help="training task set per seed (default: --groups)")
    parser.add_argument("--train-tasks", default=None, metavar="ID,ID...",
                        help="fixed training task ids for every seed (instead of each seed drawing --tasks)")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--lr-grid", default=None, help="comma list: per contestant, the rate with the best mean AUC")
    parser.add_argument("--update", default="pg", help="pg | ppo")
    parser.add_argument("--ppo-epochs", type=int, default=4)
    parser.add_argument("--clip", type=float, default=0.2)
    parser.add_argument("--branching", default=None, metavar="ROOTS,BRANCHES,FORK_AT",
                        help="play each group as a tree of --group-size leaves (env.branching's fields), e.g. 2,3,uniform")
    parser.add_argument("--env-steps", type=int, default=None, metavar="N",
                        help="each run plays until its training rollouts spent N env steps (instead of --iterations)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs in parallel processes")
    parser.add_argument("--work", required=True, help="work directory (resumable: finished runs are skipped)")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return make_parser().parse_args(argv)


def env_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def env_options(assignments) -> dict:
    """``--env-set key=value`` assignments as adapter options (values parsed as JSON where they are)."""
    extra = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            raise ArenaInputError(f"--env-set {assignment!r}: expected key=value")
        extra[key] = env_value(value)
    return extra


COUNTS = ("groups", "group_size", "tasks", "iterations", "seeds", "ppo_epochs", "max_steps", "jobs", "servers", "env_steps")


def build(args: argparse.Namespace) -> tuple[ArenaEnv, list, RunSettings, list[float], str]:
    inputs.check_counts(args, COUNTS)  # every bound before anything is allocated (docs/arena.md, "Bounds")
    inputs.check_episodes("--groups x --group-size", args.groups * args.group_size)
    inputs.positive_number("--lr", args.lr)
    inputs.positive_number("--clip", args.clip)
    try:
        train_tasks = tuple(int(x) for x in args.train_tasks.split(",")) if args.train_tasks else ()
    except ValueError:
        raise ArenaInputError(f"--train-tasks {args.train_tasks!r}: expected comma-separated task ids") from None
    if len(set(train_tasks)) != len(train_tasks) or any(task < 0 for task in train_tasks):
        raise ArenaInputError(f"--train-tasks {args.train_tasks!r}: task ids must be distinct and >= 0")
    inputs.check_episodes("--train-tasks", len(train_tasks))
    if args.update not in UPDATES:
        raise ArenaInputError(f"--update {args.update!r}: choose one of {', '.join(UPDATES)}")
    rates = inputs.parse_rates(args.lr_grid) if args.lr_grid else [args.lr]
    branching = inputs.parse_branching(args.branching, args.group_size)
    spec = make_arena_env(args.env, args.game, args.max_steps, args.backend, args.servers, env_options(args.env_set))
    env_defaults = env_spec(args.env)  # make_arena_env has refused an unknown env already
    recipe = args.recipe or env_defaults.credit_recipe
    contestants = parse_contestants(args.contestants, recipe, parse_credit_options(args.set), env_defaults.milestone_flags)
    settings = RunSettings(
        groups=args.groups, group_size=args.group_size, tasks=len(train_tasks) or args.tasks or args.groups,
        train_tasks=train_tasks, iterations=args.iterations,
        update=args.update, ppo_epochs=args.ppo_epochs, clip=args.clip, reward_scale=env_defaults.reward_scale,
        branching=branching, max_env_steps=None if branching is None else episode_cap(spec), env_steps=args.env_steps,
    )
    return spec, contestants, settings, rates, recipe


def episode_cap(spec: ArenaEnv) -> int:
    """The actions an episode of ``spec`` may take: ``--max-steps`` or the preset's cap, else the adapter's default."""
    import inspect

    options = dict(spec.options)
    if "max_steps" in options:
        return int(options["max_steps"])
    return inspect.signature(env_spec(spec.env).adapter_class().__init__).parameters["max_steps"].default


# ------------------------------------------------------------------------- one run (any process)

_backends: dict = {}  # ArenaEnv -> backend, one per process, reused by its runs
_caches: dict = {}  # ArenaEnv -> TransitionCache over that backend, shared by the process's runs
# A worker's cached states before its next run starts afresh, about 1.9 GB: a state costs about 1.9 KB
# (measured on twc-2rooms, 65,000 new states a run), and unbounded, the two workers of a twc-2rooms
# study each passed 6.5 GB after 80 runs and filled the 24 GB machine.
MAX_CACHED_STATES = 1_000_000


def _backend(spec: ArenaEnv, slots: int):
    if spec not in _backends:
        _backends[spec] = make_backend(spec, slots)
    return _backends[spec]


def _cache(spec: ArenaEnv, slots: int):
    """The process's transition cache for ``spec``: exact answers, so a run may reuse what an earlier
    run (another contestant or seed) made the engine answer; only the engine counters and env time
    depend on which runs went before (docs/arena.md)."""
    from experiments.arena.play import PlayStats, TransitionCache

    if spec not in _caches:
        _caches[spec] = TransitionCache(_backend(spec, slots))
    cache = _caches[spec]
    cache.forget_if_over(MAX_CACHED_STATES)
    cache.stats = PlayStats()  # env/* counters per run
    return cache


def _close_backends() -> None:
    _caches.clear()
    for backend in _backends.values():
        backend.close()
    _backends.clear()


def _init_worker(cache_dir: str, parent: int) -> None:
    import atexit

    from envs_bridge.launcher import exit_with_parent

    exit_with_parent(parent)  # a SIGKILLed main process leaves no worker, env server or JVM behind
    _configure_jax(cache_dir)
    atexit.register(_close_backends)


def compilation_cache_dir() -> str:
    """``$JAX_COMPILATION_CACHE_DIR``, else ``$XDG_CACHE_HOME/milegpo-jax/jax-compilation`` (~/.cache/...).

    Shared by every arena: a credit program is compiled once per (config, padded batch shape), and
    on a busy 2-core machine compiling costs more than all steady-state credit of an arena together.
    """
    configured = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if configured:
        return configured
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "milegpo-jax", "jax-compilation")


def _configure_jax(cache_dir: str) -> None:
    import jax

    # Credit estimators compile once per config and batch shape; workers share the compiled programs.
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def execute(job: dict) -> dict:
    """Runs one (contestant, seed, lr) and writes its metrics.jsonl and done.json."""
    from experiments.arena.run import run_once
    from milegpo_jax.train.logging import MetricsLogger

    spec, contestant, settings = job["spec"], job["contestant"], job["settings"]
    directory = Path(job["dir"])
    cache = _cache(spec, max(settings.groups * settings.group_size, settings.tasks))
    greedy: list[float] = []
    credit: list[dict] = []

    with MetricsLogger(directory, 0, tensorboard=False, enabled=True) as logger:
        def log(iteration: int, metrics: dict) -> None:
            greedy.append(metrics["greedy_success_rate"])
            credit.append({stats.CREDIT_PREFIX + key: value for key, value in metrics["credit"].items()})
            logger.log(iteration, metrics)

        outcome = run_once(contestant, job["seed"], job["lr"], settings, cache, log)
    # the run's raw record (results.jsonl): curves and every credit diagnostic per iteration
    done = {"contestant": contestant.name, "seed": job["seed"], "lr": job["lr"], "update": settings.update,
            "success": outcome["success"], "greedy": greedy, "credit": output.credit_columns(credit), "time": outcome["time"]}
    if settings.counts_env_steps():  # the tree facts; a default run's record stays as it was (docs/arena.md)
        branching = settings.branching
        done["branching"] = None if branching is None else dict(zip(("roots", "branches", "fork_at"), branching))
        done.update({key: outcome[key] for key in output.TREE_FIELDS[1:] if key in outcome})
    output.write_json_atomic(directory / output.DONE_FILE, done)
    return done


# ------------------------------------------------------------------------- orchestration


def run_all(jobs: list[dict], workers: int, cache_dir: str, progress: bool) -> list[dict]:
    from tqdm.auto import tqdm

    finished = []
    bar = tqdm(total=len(jobs), desc="arena runs", unit="run", disable=not progress, dynamic_ncols=True)
    if workers == 1:
        _configure_jax(cache_dir)
        for job in jobs:
            finished.append(execute(job))
            bar.update(1)
    else:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked JVM or XLA threads
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(cache_dir, os.getpid())) as pool:
            for future in concurrent.futures.as_completed([pool.submit(execute, job) for job in jobs]):
                finished.append(future.result())
                bar.update(1)
    bar.close()
    return finished


def prepare(args: argparse.Namespace, study: dict | None = None):
    """Validates the input and the work directory: (spec, contestants, settings, rates, work, the settings
    to record in arena.json). Raises one of INPUT_ERRORS before anything is written."""
    spec, contestants, settings, rates, recipe = build(args)
    seeds = len(study["select_seeds"]) + len(study["eval_seeds"]) if study else args.seeds
    inputs.check_runs(seeds * len(contestants) * len(rates) * (len(study["updates"]) if study else 1))
    work = Path(args.work)
    recorded = {"env": spec.label, "env_options": dict(spec.options), "recipe": recipe, "credit_set": args.set,
                "settings": settings.recorded()}
    if study is not None:
        recorded["study"] = {**study, "lr_grid": rates}
    if work.exists() and not work.is_dir():
        raise ArenaInputError(f"--work {work}: not a directory")
    settings_path = work / output.SETTINGS_FILE
    if settings_path.exists() and inputs.read_json(settings_path, ArenaInputError) != json.loads(json.dumps(recorded)):
        raise ArenaInputError(f"{settings_path}: this work directory holds an arena with other settings; use a new --work")
    probe = _backend(spec, max(settings.groups * settings.group_size, settings.tasks))
    if probe.num_tasks("train") < 1:
        raise ArenaInputError(f"{spec.label}: the train split holds no tasks")
    if settings.train_tasks and max(settings.train_tasks) >= probe.num_tasks("train"):
        raise ArenaInputError(f"--train-tasks: the train split of {spec.label} holds task ids 0..{probe.num_tasks('train') - 1}")
    return spec, contestants, settings, rates, work, recorded


INPUT_ERRORS = (ArenaInputError, CreditConfigError, EnvError, EnvUnavailableError)


def plan(work: Path, spec: ArenaEnv, settings: RunSettings, runs: list[tuple]) -> tuple[list[dict], list[dict]]:
    """``runs``: (seed, contestant, lr, update) in the order to run them -> (jobs still to run, runs done)."""
    jobs, done = [], []
    for seed, contestant, rate, update in runs:
        directory = output.run_dir(work, contestant.name, seed, rate, update)
        previous = output.run_record(directory, settings.update)
        if previous is not None and settings.finished(previous):
            done.append(previous)
        else:
            jobs.append({"spec": spec, "contestant": contestant, "settings": dataclasses.replace(settings, update=update),
                         "seed": seed, "lr": rate, "dir": str(directory)})
    return jobs, done


def run_planned(jobs: list[dict], workers: int, progress: bool) -> list[dict]:
    if workers > 1:
        _close_backends()  # the workers build their own
    try:
        return run_all(jobs, min(workers, max(len(jobs), 1)), compilation_cache_dir(), progress)
    finally:
        _close_backends()


def save_results(work: Path, records: list[dict], names: list[str]) -> None:
    """results.jsonl: the runs in contestant order, then update, rate and seed (summary reads only this)."""
    order = {name: index for index, name in enumerate(names)}
    ordered = sorted(records, key=lambda r: (order[r["contestant"]], r["update"], r["lr"], r["seed"]))
    fields = (*output.RECORD_FIELDS, "time", *output.TREE_FIELDS)
    output.write_results(work, [{key: record[key] for key in fields if key in record} for record in ordered])


def compact_line(analysed: dict, label: str, records: list[dict], ran: int, started: float, job: str = "arena", **extra) -> str:
    time_split = {key: round(sum(r["time"][key] for r in records), 2) for key in ("env_s", "credit_s", "update_s")}
    compact = {name: {"last": entry["summary"]["last"]["mean"], "auc": entry["summary"]["auc"]["mean"], "lr": entry["lr"]}
               for name, entry in analysed["results"].items()}
    return json.dumps({"job": job, "env": label, "results": compact, "time": time_split, "runs": len(records),
                       "ran": ran, "wall_s": round(time.time() - started, 2), **extra})


def main(argv: list[str] | None = None) -> int:
    started = time.time()
    args = parse_args(argv)
    try:
        spec, contestants, settings, rates, work, recorded = prepare(args)
    except INPUT_ERRORS as error:
        _close_backends()
        print(f"experiments.arena: {error}", file=sys.stderr)
        return 2
    output.write_json_atomic(work / output.SETTINGS_FILE, recorded)
    # seed-major: parallel workers start on different contestants, so each credit program is compiled
    # once (the compilation cache on disk serves the other seeds)
    runs = [(seed, contestant, rate, settings.update) for seed in range(args.seeds) for contestant in contestants for rate in rates]
    jobs, done = plan(work, spec, settings, runs)
    done += run_planned(jobs, args.jobs, not args.no_progress)
    save_results(work, done, [contestant.name for contestant in contestants])
    analysed = summary.summarize(work)
    print(compact_line(analysed, spec.label, done, len(jobs), started))
    return 0

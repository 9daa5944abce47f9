"""Env-pool benchmark: steps/s of N envs through ``EnvPool`` (HTTP servers) against the same adapters
called in this process, per environment registered in ``envs_bridge.registry`` and importable here.

Every side runs the same lockstep loop: each env takes a uniformly random admissible action each tick,
and envs whose episode ended are reset to the next task (reset time included, as in training). The
in-process side steps its N adapters one after another, as a single-process collector would; a pool
side sends one batched step per server per tick. The sides are measured in alternating windows
(``--rounds`` of them, median taken) so that a load change on the machine hits all of them alike.

``pool_overhead_<env>`` is the extra wall time per env step the pool costs, as a fraction (0.15 = 15 %
slower; negative when the servers' parallelism more than pays for HTTP and JSON), with one server per
core; ``pool_overhead_1_server_<env>`` is the same with a single server, i.e. the protocol's own cost.
``repeated_state_share_<env>`` is the share of steps whose state at least two random-policy rollouts
of the same group visit (16 groups x 8). Ends with one JSON line. Run:

    python -m experiments.bench.envs [--num-envs 128] [--seconds 12] [--envs textworld_express webshop]

ALFWorld imports only in its own interpreter, so its figures come from running this there (both sides
then use it): ``.venv-alfworld/bin/python -m experiments.bench.envs --envs alfworld``, over the games of
docs/alfworld-games.md. An environment named in ``--envs`` that cannot run here (not importable in this
interpreter, no games) is refused in one line with exit 2; without ``--envs`` it is skipped with that line.
``--smoke``: TextWorldExpress in miniature (``SMOKE``: 2 envs, a few ticks, one round).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence

from envs_bridge.base import EnvAdapter, EnvError, StepResult
from envs_bridge.client import EnvPool
from envs_bridge.groups import GroupPlan
from envs_bridge.random_play import play_random_groups
from envs_bridge.registry import EnvUnavailableError, env_names, make_adapter

# Options per environment for the benchmark (the adapters' defaults otherwise).
BENCH_OPTIONS: dict[str, dict] = {
    "textworld_express": {"game": "twc", "max_steps": 50},
    "alfworld": {"max_steps": 50},  # games: $ALFWORLD_DATA or the generated cache (envs_bridge/alfworld/games.py)
}
WARMUP_TICKS = 3
# --smoke: defaults for a run in seconds (explicit flags still win)
SMOKE = dict(envs=["textworld_express"], num_envs=2, seconds=0.3, rounds=1, max_ticks=3, share_groups=1,
             share_group_size=2)


class _Loop:
    """Random-admissible lockstep play with auto-reset over some batched reset/step functions."""

    def __init__(
        self,
        num_envs: int,
        num_tasks: int,
        reset: Callable[[list[int], list[int]], list[StepResult | None]],
        step: Callable[[list[str], list[int]], list[StepResult | None]],
        seed: int,
    ):
        self.num_envs = num_envs
        self.num_tasks = num_tasks
        self._reset = reset
        self._step = step
        self._rng = random.Random(seed)
        self._next_task = 0
        self.current: list[StepResult | None] = [None] * num_envs
        self._reset_envs(list(range(num_envs)))
        for _ in range(WARMUP_TICKS):
            self.tick()

    def tick(self) -> int:
        """One lockstep step of every env; returns the number of env steps taken."""
        indices = list(range(self.num_envs))
        actions = [self._rng.choice(result.admissible_actions) if result and result.admissible_actions else "look" for result in self.current]
        finished = []
        for index, result in zip(indices, self._step(actions, indices)):
            self.current[index] = result
            if result is None or result.done:  # None: aborted by a server failure
                finished.append(index)
        if finished:
            self._reset_envs(finished)
        return len(indices)

    def steps_per_second(self, seconds: float, max_ticks: int) -> float:
        steps = ticks = 0
        started = time.perf_counter()
        while ticks < max_ticks and time.perf_counter() - started < seconds:
            steps += self.tick()
            ticks += 1
        return steps / (time.perf_counter() - started)

    def _reset_envs(self, indices: list[int]) -> None:
        task_ids = [(self._next_task + offset) % self.num_tasks for offset in range(len(indices))]
        self._next_task += len(indices)
        for index, result in zip(indices, self._reset(task_ids, indices)):
            self.current[index] = result


@contextlib.contextmanager
def in_process_loop(env: str, num_envs: int, seed: int) -> Iterator[_Loop]:
    adapters: list[EnvAdapter] = [make_adapter(env, **BENCH_OPTIONS.get(env, {})) for _ in range(num_envs)]
    try:
        def reset(task_ids: Sequence[int], indices: Sequence[int]) -> list[StepResult | None]:
            return [adapters[index].reset("train", task_id, 0) for task_id, index in zip(task_ids, indices)]

        def step(actions: Sequence[str], indices: Sequence[int]) -> list[StepResult | None]:
            return [adapters[index].step(action) for action, index in zip(actions, indices)]

        yield _Loop(num_envs, adapters[0].num_tasks("train"), reset, step, seed)
    finally:
        for adapter in adapters:
            adapter.close()


@contextlib.contextmanager
def pool_loop(env: str, num_envs: int, num_servers: int | None, seed: int) -> Iterator[tuple[_Loop, EnvPool]]:
    with EnvPool(env, num_envs, num_servers=num_servers, env_options=BENCH_OPTIONS.get(env, {})) as pool:
        def reset(task_ids: Sequence[int], indices: Sequence[int]) -> list[StepResult | None]:
            return [reply.result for reply in pool.reset("train", list(task_ids), env_indices=list(indices))]

        def step(actions: Sequence[str], indices: Sequence[int]) -> list[StepResult | None]:
            return [reply.result for reply in pool.step(list(actions), list(indices))]

        yield _Loop(num_envs, pool.num_tasks("train"), reset, step, seed), pool


def repeated_state_share(env: str, num_groups: int, group_size: int, seed: int) -> float:
    """Share of steps in a state that >= 2 of the group's random-policy rollouts visit (envs_bridge.groups)."""
    with EnvPool(env, num_groups * group_size, env_options=BENCH_OPTIONS.get(env, {})) as pool:
        plan = GroupPlan.sample("train", pool.num_tasks("train"), num_groups, group_size, seed)
        return play_random_groups(pool, plan, random.Random(seed)).repeated_state_share


def unusable(env: str) -> str | None:
    """Why ``env`` cannot be benchmarked in this interpreter (one line), or None: unknown, not importable
    here, options refused, or no training task (ALFWorld without games); one adapter is built to tell."""
    try:
        adapter = make_adapter(env, **BENCH_OPTIONS.get(env, {}))
    except EnvUnavailableError as error:  # both sides need it in process
        return f"{error}; this benchmark runs under that interpreter"
    except EnvError as error:
        return str(error)
    try:
        return None if adapter.num_tasks("train") > 0 else f"environment {env!r} has no training task here"
    finally:
        adapter.close()


def usable_envs(named: list[str] | None) -> list[str]:
    """The environments to run: those named (one that cannot run here exits 2 with its reason), else
    every registered one that can (the others skipped, each with its reason on stderr)."""
    names = []
    for name in named if named is not None else env_names():
        problem = unusable(name)
        if problem is None:
            names.append(name)
        elif named is not None:
            print(f"error: --envs {name}: {problem}", file=sys.stderr)
            sys.exit(2)
        else:
            print(f"skipping {name}: {problem}", file=sys.stderr)
    return names


def bench_env(env: str, args: argparse.Namespace) -> dict:
    with contextlib.ExitStack() as stack:
        in_process = stack.enter_context(in_process_loop(env, args.num_envs, args.seed))
        pooled, pool = stack.enter_context(pool_loop(env, args.num_envs, args.num_servers, args.seed))
        single, single_pool = stack.enter_context(pool_loop(env, args.num_envs, 1, args.seed))
        loops = {"in_process": in_process, "pool": pooled, "pool_1_server": single}
        rates: dict[str, list[float]] = {name: [] for name in loops}
        window = args.seconds / args.rounds
        for _ in range(args.rounds):
            for name, loop in loops.items():
                rates[name].append(loop.steps_per_second(window, args.max_ticks))
        aborted = pool.metrics()["aborted_episodes"] + single_pool.metrics()["aborted_episodes"]
        servers = pool.metrics()["servers"]
    median = {name: statistics.median(values) for name, values in rates.items()}
    overhead = median["in_process"] / median["pool"] - 1.0
    single_overhead = median["in_process"] / median["pool_1_server"] - 1.0
    share = repeated_state_share(env, args.share_groups, args.share_group_size, args.seed)
    print(
        f"{env}: in-process {median['in_process']:,.0f} steps/s; pool with {servers} servers "
        f"{median['pool']:,.0f} steps/s (overhead {overhead:+.1%}), with 1 server {median['pool_1_server']:,.0f} "
        f"steps/s (overhead {single_overhead:+.1%}); aborted episodes {aborted}; repeated-state share {share:.1%}",
        file=sys.stderr,
    )
    return {
        f"steps_per_s_in_process_{env}": round(median["in_process"], 1),
        f"steps_per_s_pool_{env}": round(median["pool"], 1),
        f"pool_servers_{env}": servers,
        f"pool_overhead_{env}": round(overhead, 4),
        f"pool_overhead_1_server_{env}": round(single_overhead, 4),
        f"repeated_state_share_{env}": round(share, 4),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="*", default=None, help="default: every registered env importable here")
    parser.add_argument("--num-envs", type=int, default=128)
    parser.add_argument("--num-servers", type=int, default=None, help="default: one per CPU core")
    parser.add_argument("--seconds", type=float, default=12.0, help="measuring time per side and env")
    parser.add_argument("--rounds", type=int, default=4, help="alternating measurement windows per side")
    parser.add_argument("--max-ticks", type=int, default=400, help="lockstep ticks per window at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--share-groups", type=int, default=16, help="groups for the repeated-state share")
    parser.add_argument("--share-group-size", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="a miniature run (SMOKE), to check the code path")
    if parser.parse_known_args(argv)[0].smoke:
        parser.set_defaults(**SMOKE)
    args = parser.parse_args(argv)

    figures: dict = {"bench": "envs", "num_envs": args.num_envs}
    for env in usable_envs(args.envs):
        figures.update(bench_env(env, args))
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

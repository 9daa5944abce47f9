"""``python -m experiments.arena uniform``: how often the arena's starting policy (uniform over the
admissible actions) wins a game setting. An arena learns only from episodes that policy happens to
win, so this is the first thing to measure for a new setting (docs/arena.md):

    python -m experiments.arena uniform --game coin-hard --tasks 32 --rollouts 4

plays ``--rollouts`` episodes of each of ``--tasks`` training tasks (drawn as arena seed ``--seed``
draws its task set) through the arena's own backend and transition cache, so every option of the
arena (``--env``, ``--game``, ``--max-steps``, ``--env-set``, ``--backend``) means the same here.
The last line on stdout is one JSON object (``"job": "arena-uniform"``): wins, success with a Wilson
95 % interval, mean episode length and engine steps per second; bad input is one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from envs_bridge.base import EnvError
from envs_bridge.registry import EnvUnavailableError
from experiments.arena import inputs, stats
from experiments.arena.cli import env_options
from experiments.arena.inputs import ArenaInputError
from experiments.arena.envs import make_arena_env, make_backend
from experiments.arena.play import TransitionCache, sampling_chooser
from experiments.arena.policy import TabularPolicy
from experiments.arena.run import training_tasks


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.arena uniform", description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="textworld_express")
    parser.add_argument("--game", default=None)
    parser.add_argument("--env-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--rollouts", type=int, default=4, help="episodes per task")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    backend = None
    try:
        # the arena's own bounds (docs/arena.md, "Bounds"), --servers included: the arena refuses 0 too
        inputs.check_counts(args, ("tasks", "rollouts", "max_steps", "servers"))
        inputs.check_episodes("--tasks x --rollouts", args.tasks * args.rollouts)
        inputs.check_seed("--seed", args.seed)
        spec = make_arena_env(args.env, args.game, args.max_steps, args.backend, args.servers,
                              env_options(args.env_set))
        backend = make_backend(spec, args.tasks * args.rollouts)
        tasks = training_tasks(backend.num_tasks("train"), args.tasks, args.seed)
    except (ArenaInputError, EnvError, EnvUnavailableError) as error:
        if backend is not None:
            backend.close()
        print(f"experiments.arena uniform: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        cache = TransitionCache(backend)
        task_ids = [task for task in tasks for _ in range(args.rollouts)]
        streams = [np.random.SeedSequence([args.seed, 9, r]) for r in range(len(task_ids))]
        episodes = cache.play(task_ids, sampling_chooser(TabularPolicy(), streams))
    finally:
        backend.close()
    seconds = time.perf_counter() - started
    wins = sum(episode.won for episode in episodes)
    tasks_won = len({episode.task_id for episode in episodes if episode.won})
    low, high = stats.wilson_interval(wins, len(episodes))
    print(json.dumps({"job": "arena-uniform", "env": spec.label, "options": dict(spec.options), "tasks": len(tasks),
                      "episodes": len(episodes), "wins": wins, "tasks_won": tasks_won, "success": wins / len(episodes),
                      "ci95": [round(low, 4), round(high, 4)],
                      "mean_steps": float(np.mean([len(episode.actions) for episode in episodes])),
                      "engine_steps": cache.stats.engine_steps, "wall_s": round(seconds, 2),
                      "engine_steps_per_s": round(cache.stats.engine_steps / seconds, 1) if seconds else None}))
    return 0

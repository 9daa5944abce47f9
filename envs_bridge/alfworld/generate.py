"""Builds playable ALFWorld games offline from what the alfworld wheel ships (docs/alfworld-games.md).

    python -m envs_bridge.alfworld.generate --out DIR --train 240 --eval-id 60 --eval-ood 60 --seed 0

Writes ALFWorld's own layout, ``DIR/{train,valid_seen,valid_unseen}/<task>-<obj>-None-<recep>-<scene>/
trial_*/{game.tw-pddl,traj_data.json}``, plus ``DIR/manifest.json`` (arguments and statistics), so the
unmodified ``AlfredTWEnv`` and ``envs_bridge.alfworld.adapter`` both load it. Game i of a split has task
type i mod 6 (ALFWorld's order), so every type is present once a split has six games; ``--task-types``
restricts the cycle to the types named (game i: the (i mod n)-th of them). Rooms follow
``--room-split`` (``layouts.ROOM_SPLITS``): by default ALFWorld's released split, ``valid_unseen`` only in
rooms 10, 219, 308 and 424 and those rooms never in ``train`` or ``valid_seen``; ``alfred`` uses ALFRED's
24 generation-time test rooms for ``valid_unseen`` instead.

A candidate's walkthrough is ALFWorld's hand-coded expert's winning run (its tie-breaks seeded per
game) within ``--max-steps`` actions, or else a Fast Downward plan of at most that length. The game is
kept only when that walkthrough, replayed in ALFWorld's unmodified ``AlfredTWEnv``, wins; otherwise the
next candidate of that slot is drawn. ``traj_data.json["generator"]["verified"]`` records the check.
The manifest reports, per task type, how often the live expert wins the kept games over
``--tie-break-seeds`` other tie-break seeds on the first ``TIE_BREAK_GAMES_PER_TYPE`` kept games
(it can loop on pick-two games): the guarantee is the stored
walkthrough, not the live expert. Everything is a function of ``--seed``: the same command writes the
same games. Needs the alfworld interpreter (``bash envs_bridge/alfworld/bootstrap.sh``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import sys
import tempfile
import time
from importlib.metadata import version

from alfworld.agents.utils.misc import add_task_to_grammar
from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH
from tqdm import tqdm

from envs_bridge.alfworld import games, layouts, problem, solver
from envs_bridge.base import check_split

ALFWORLD_VERSION = version("alfworld")

MAX_ATTEMPTS = 40  # candidates drawn for one game slot before giving up on the whole run
DEFAULT_MAX_STEPS = 50  # the adapter's episode cap: a kept game is winnable within it
# The manifest's live-expert win rates: this many other tie-break seeds on each of the first
# TIE_BREAK_GAMES_PER_TYPE kept games of a task type (an expert run takes ~10 s; a looping one longer).
DEFAULT_TIE_BREAK_SEEDS = 3
TIE_BREAK_GAMES_PER_TYPE = 4


class GenerationError(RuntimeError):
    pass


def scenes_by_task_type(scenes: tuple[int, ...]) -> dict[str, list[int]]:
    """Rooms of ``scenes`` that support at least one task of each type."""
    supported = {}
    for task_type in games.TASK_TYPES:
        supported[task_type] = [scene for scene in scenes if problem.candidate_tasks(layouts.load_scene(scene), task_type)]
    return supported


def _grammar_with_task(traj_data: dict, seed: str) -> str:
    # add_task_to_grammar draws the task sentence's template from the global `random`: seed it per game.
    state = random.getstate()
    random.seed(seed)
    try:
        with open(ALFRED_TWL2_PATH) as handle:
            return add_task_to_grammar(handle.read(), traj_data)
    finally:
        random.setstate(state)


def _write_game(folder: str, game: problem.Game, traj_data: dict, grammar: str, walkthrough: list[str] | None) -> str:
    os.makedirs(folder, exist_ok=True)
    with open(ALFRED_PDDL_PATH) as handle:
        domain = handle.read()
    with open(os.path.join(folder, "traj_data.json"), "w") as handle:
        json.dump(traj_data, handle, indent=2)
    gamefile = os.path.join(folder, "game.tw-pddl")
    with open(gamefile, "w") as handle:
        json.dump(
            {
                "pddl_domain": domain,
                "grammar": grammar,
                "pddl_problem": game.problem(),
                "solvable": walkthrough is not None,
                "walkthrough": walkthrough,
            },
            handle,
        )
    return gamefile


class Generator:
    def __init__(
        self, out_dir: str, seed: int, max_steps: int, use_planner: bool, planner_timeout_s: float,
        room_split: str = layouts.DEFAULT_ROOM_SPLIT, tie_break_seeds: int = DEFAULT_TIE_BREAK_SEEDS,
        task_types: tuple[str, ...] = games.TASK_TYPES,
    ):
        self.out_dir = out_dir
        self.task_types = task_types
        self.room_split = room_split
        self.tie_break_seeds = tie_break_seeds
        self.seed = seed
        self.max_steps = max_steps
        self.use_planner = use_planner
        self.planner_timeout_s = planner_timeout_s
        self.expert = solver.ExpertSolver()
        self.stats: dict[str, collections.Counter] = {task_type: collections.Counter() for task_type in games.TASK_TYPES}
        self._scenes = {split: scenes_by_task_type(scenes) for split, scenes in layouts.ROOM_SPLITS[room_split].items()}

    def make_game(self, split: str, index: int) -> str:
        """Writes game ``index`` of ``split``; returns its game file."""
        task_type = self.task_types[index % len(self.task_types)]
        scenes = self._scenes[split][task_type]
        if not scenes:
            raise GenerationError(f"no {split} room supports {task_type}")
        counter = self.stats[task_type]
        for attempt in range(MAX_ATTEMPTS):
            slot_seed = f"{self.seed}/{split}/{index}/{attempt}"  # str seeds hash the same in every process
            rng = random.Random(slot_seed)
            layout = layouts.load_scene(rng.choice(scenes))
            task = rng.choice(problem.candidate_tasks(layout, task_type))
            game = problem.build_game(layout, task, rng)
            traj_data = game.traj_data()
            traj_data["task_id"] = f"{games.SPLIT_DIRS[split]}-{index:05d}"
            grammar = _grammar_with_task(traj_data, slot_seed)
            folder = os.path.join(
                self.out_dir, games.SPLIT_DIRS[split], task.directory_name(layout.scene), f"trial_s{self.seed}_{index:05d}"
            )
            gamefile = _write_game(folder, game, traj_data, grammar, walkthrough=None)
            counter["attempts"] += 1
            walkthrough, how = self.expert.solve(gamefile, self.max_steps, seed=slot_seed), "handcoded"
            if walkthrough is None and self.use_planner:
                plan = solver.plan(gamefile, timeout_s=self.planner_timeout_s)
                walkthrough, how = (plan, "planner") if plan is not None and len(plan) <= self.max_steps else (None, "")
            if walkthrough is None:
                counter["unsolved"] += 1
                shutil.rmtree(folder)
                continue
            _write_game(folder, game, traj_data, grammar, walkthrough)
            won_at = solver.replay_in_alfredtwenv(gamefile, walkthrough, self.max_steps)
            if won_at is None:
                counter["walkthrough_lost_in_alfredtwenv"] += 1
                shutil.rmtree(folder)
                continue
            counter[f"solved_{how}"] += 1
            counter["kept"] += 1
            for k in range(self.tie_break_seeds if counter["kept"] <= TIE_BREAK_GAMES_PER_TYPE else 0):
                counter["expert_tie_break_runs"] += 1
                counter["expert_tie_break_wins"] += self.expert.solve(gamefile, self.max_steps, seed=f"{slot_seed}/tie-break/{k}") is not None
            traj_data["generator"] = {
                "seed": self.seed, "split": split, "index": index, "attempt": attempt, "solver": how,
                "room_split": self.room_split,
                "verified": {"check": solver.UNMODIFIED_CHECK, "won_at_step": won_at, "max_steps": self.max_steps,
                             "alfworld_version": ALFWORLD_VERSION},
            }
            with open(os.path.join(folder, "traj_data.json"), "w") as handle:
                json.dump(traj_data, handle, indent=2)
            return gamefile
        raise GenerationError(f"{split} game {index} ({task_type}): no solvable candidate in {MAX_ATTEMPTS} attempts")


def _type_stats(counter: collections.Counter) -> dict:
    stats = dict(sorted(counter.items()))
    runs = counter["expert_tie_break_runs"]
    # How often ALFWorld's live hand-coded expert wins a kept game under other tie-break seeds.
    stats["expert_win_rate_over_tie_breaks"] = round(counter["expert_tie_break_wins"] / runs, 4) if runs else None
    return stats


def generate(
    out_dir: str,
    counts: dict[str, int],
    seed: int,
    max_steps: int = DEFAULT_MAX_STEPS,
    use_planner: bool = True,
    planner_timeout_s: float = solver.PLANNER_TIMEOUT_S,
    force: bool = False,
    progress: bool = True,
    room_split: str = layouts.DEFAULT_ROOM_SPLIT,
    tie_break_seeds: int = DEFAULT_TIE_BREAK_SEEDS,
    task_types: tuple[str, ...] = games.TASK_TYPES,
) -> dict:
    """Generates the games into ``out_dir`` (built in a staging folder, moved in place when complete)."""
    for split, count in counts.items():
        check_split(split)
        if count < 0:
            raise ValueError(f"--{split.replace('_', '-')} must be >= 0, got {count}")
    if room_split not in layouts.ROOM_SPLITS:
        raise ValueError(f"--room-split must be one of {', '.join(layouts.ROOM_SPLITS)}, got {room_split!r}")
    unknown = [task_type for task_type in task_types if task_type not in games.TASK_TYPES]
    if unknown or not task_types:
        raise ValueError(f"--task-types: unknown {unknown or 'empty list'}; choose from {', '.join(games.TASK_TYPES)}")
    if tie_break_seeds < 0:
        raise ValueError(f"--tie-break-seeds must be >= 0, got {tie_break_seeds}")
    if sum(counts.values()) == 0:
        raise ValueError("nothing to generate: give --train, --eval-id and/or --eval-ood a positive count")
    out_dir = os.path.abspath(out_dir)
    if os.path.exists(out_dir) and os.listdir(out_dir) and not force:
        raise FileExistsError(f"{out_dir} is not empty: pass --force to replace it")
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".alfworld-games-", dir=parent)
    started = time.perf_counter()
    try:
        generator = Generator(staging, seed, max_steps, use_planner, planner_timeout_s, room_split, tie_break_seeds, tuple(task_types))
        total = sum(counts.values())
        made = {split: 0 for split in counts}
        with tqdm(total=total, desc="alfworld games", unit="game", disable=not progress, file=sys.stderr) as bar:
            for split, count in counts.items():
                for index in range(count):
                    generator.make_game(split, index)
                    made[split] += 1
                    bar.update(1)
                    attempts = sum(counter["attempts"] for counter in generator.stats.values())
                    bar.set_postfix(split=split, attempts=attempts)
        elapsed = time.perf_counter() - started
        manifest = {
            "generator": "envs_bridge.alfworld.generate",
            "seed": seed,
            "max_steps": max_steps,
            "room_split": room_split,
            "rooms": {games.SPLIT_DIRS[split]: list(scenes) for split, scenes in layouts.ROOM_SPLITS[room_split].items()},
            "kept_if": solver.UNMODIFIED_CHECK + " wins within max_steps",
            "tie_break_seeds": tie_break_seeds,
            **({"task_types": list(task_types)} if tuple(task_types) != games.TASK_TYPES else {}),
            "games": {games.SPLIT_DIRS[split]: made[split] for split in counts},
            "seconds": round(elapsed, 1),
            "games_per_minute": round(60.0 * total / elapsed, 2),
            "per_task_type": {task_type: _type_stats(counter) for task_type, counter in generator.stats.items()},
        }
        with open(os.path.join(staging, "manifest.json"), "w") as handle:
            json.dump(manifest, handle, indent=2)
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.replace(staging, out_dir)
        # The staging folder was made private by mkdtemp; games are data anyone may read.
        os.chmod(out_dir, 0o755)
        return manifest
    finally:
        if os.path.exists(staging):
            shutil.rmtree(staging)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=games.default_games_dir(), help="output folder (default: %(default)s)")
    parser.add_argument("--train", type=int, default=0, help="training games (training rooms)")
    parser.add_argument("--eval-id", type=int, default=0, help="in-distribution eval games (valid_seen: training rooms)")
    parser.add_argument("--eval-ood", type=int, default=0, help="out-of-distribution eval games (valid_unseen: held-out rooms)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--max-steps", type=int, default=DEFAULT_MAX_STEPS, help="a kept game is won within this many actions"
    )
    parser.add_argument("--room-split", choices=sorted(layouts.ROOM_SPLITS), default=layouts.DEFAULT_ROOM_SPLIT,
                        help="alfworld: valid_unseen in ALFWorld's rooms 10/219/308/424 (default); "
                             "alfred: in ALFRED's 24 test rooms")
    parser.add_argument("--tie-break-seeds", type=int, default=DEFAULT_TIE_BREAK_SEEDS,
                        help="live-expert reruns per sampled kept game, for the manifest's win rates (default: %(default)s)")
    parser.add_argument("--task-types", nargs="+", default=list(games.TASK_TYPES), metavar="TYPE",
                        help="task types to cycle through (default: all six, in ALFWorld's order)")
    parser.add_argument("--no-planner", action="store_true", help="keep only games the hand-coded expert wins")
    parser.add_argument("--planner-timeout", type=float, default=solver.PLANNER_TIMEOUT_S, help="seconds per plan")
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.max_steps < 1:
        parser.error("--max-steps must be >= 1")
    if args.planner_timeout <= 0:
        parser.error("--planner-timeout must be > 0")
    counts = {"train": args.train, "eval_id": args.eval_id, "eval_ood": args.eval_ood}
    try:
        manifest = generate(
            args.out, counts, args.seed, max_steps=args.max_steps, use_planner=not args.no_planner,
            planner_timeout_s=args.planner_timeout, force=args.force, progress=not args.quiet,
            room_split=args.room_split, tie_break_seeds=args.tie_break_seeds, task_types=tuple(args.task_types),
        )
    except (ValueError, FileExistsError, GenerationError) as error:
        print(f"envs_bridge.alfworld.generate: {error}", file=sys.stderr)
        return 2
    print(json.dumps(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())

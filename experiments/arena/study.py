"""``python -m experiments.arena study``: held-out choice of each contestant's learning rate and update rule.

    python -m experiments.arena study --game coin --select-seeds 0-4 --eval-seeds 5-14 \\
        --lr-grid 0.3,1,3,10 --updates pg,ppo --margin 0.01 --work runs/study-coin

Every contestant runs every (rate, update) of the grid on the selection seeds; the one with its best
mean AUC there is then run on the evaluation seeds, and only those are scored (table, claims). Each
contestant gets the same grid and the same number of runs; nothing is chosen on the seeds it is
scored on. The margin is recorded with the settings before any run. ``--matched`` also runs both
arms of each chain link at their shared option; ``--reuse DIR`` takes an earlier study's selection
and evaluation runs (docs/arena.md, "Studies"). Takes every arena option
(``--seeds`` excepted); the last line on stdout is one JSON object (``"job": "arena-study"``).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from experiments.arena import analysis, cli, crossgame, family, inputs, output, stats, summary
from experiments.arena.policy import UPDATES


def parse_study(argv: list[str] | None):
    parser = cli.make_parser("python -m experiments.arena study", __doc__.split("\n")[0])
    parser.add_argument("--select-seeds", required=True, help="seeds the rate and update are chosen on, e.g. 0-4")
    parser.add_argument("--eval-seeds", required=True, help="fresh seeds the chosen setting is scored on, e.g. 5-14")
    parser.add_argument("--updates", default="pg", help=f"comma list of update rules to choose from ({', '.join(UPDATES)})")
    parser.add_argument("--margin", type=float, default=analysis.DEFAULT_MARGIN,
                        help="equivalence margin in AUC, fixed before the runs (default %(default)s)")
    parser.add_argument("--matched", action="store_true",
                        help="also run both arms of each chain link at one shared option on the evaluation seeds")
    parser.add_argument("--reuse", default=None, metavar="DIR",
                        help="take the selection-seed runs of an earlier study with the same arena settings from DIR")
    parser.set_defaults(seeds=None, update=None)  # None: not given (a study takes --seeds and --update in other forms)
    return parser.parse_args(argv)


def study_settings(args) -> dict:
    if args.seeds is not None:
        raise cli.ArenaInputError("--seeds: a study takes --select-seeds and --eval-seeds instead")
    if args.update is not None:  # was silently replaced by the first of --updates
        raise cli.ArenaInputError(f"--update {args.update}: a study takes --updates (the rules to choose from) instead")
    args.seeds = 1  # unused; keeps cli.build's checks
    select = inputs.parse_seeds(args.select_seeds, "--select-seeds")
    evaluate = inputs.parse_seeds(args.eval_seeds, "--eval-seeds")
    if set(select) & set(evaluate):
        raise cli.ArenaInputError(f"--eval-seeds: seeds {sorted(set(select) & set(evaluate))} are selection seeds too")
    updates = inputs.parse_choices(args.updates, "--updates", UPDATES)
    if not (math.isfinite(args.margin) and args.margin >= 0):
        raise cli.ArenaInputError(f"--margin {args.margin}: must be a finite number >= 0")
    args.update = updates[0]  # the recorded base setting; each run gets its own
    settings = {"select_seeds": select, "eval_seeds": evaluate, "updates": updates, "margin": args.margin}
    return settings | ({"matched": True} if args.matched else {})  # older studies' arena.json stay as they were


def matched_arms(records: list[dict], names: list[str], select: set[int]) -> list[tuple[str, tuple]]:
    """(contestant, option) of both arms of every chain link at the pair's shared option (family.matched_option)."""
    means = {name: crossgame.option_means(records, name, select) for name in names}
    order = sorted({(r["lr"], r["update"]) for r in records}, key=lambda option: (option[1], option[0]))
    arms = []
    for a, b in stats.PAPER_CHAIN:
        if a in means and b in means:
            shared = family.matched_option(means[a], means[b], order)
            arms += [(a, shared), (b, shared)]
    return list(dict.fromkeys(arms))


def reuse_runs(source: Path, work: Path, recorded: dict, names: list[str]) -> int:
    """Writes the runs of the study in ``source`` on this study's selection and evaluation seeds (same
    arena settings; runs are pure functions of their seed and option, so these are runs this study
    would make, and only those it makes are read) as done.json files of ``work``; returns how many.
    ArenaInputError if the settings differ."""
    try:
        earlier = summary.read_settings(source)
        records = output.read_results(source)
    except output.ResultsError as error:
        raise cli.ArenaInputError(f"--reuse: {error}") from None
    if {k: v for k, v in earlier.items() if k != "study"} != json.loads(json.dumps({k: v for k, v in recorded.items() if k != "study"})):
        raise cli.ArenaInputError(f"--reuse {source}: its arena settings differ from this study's")
    seeds = {*recorded["study"]["select_seeds"], *recorded["study"]["eval_seeds"]}
    count = 0
    for record in records:
        if record["contestant"] in names and record["seed"] in seeds:
            directory = output.run_dir(work, record["contestant"], record["seed"], record["lr"], record["update"])
            if output.read_done(directory) is None:
                output.write_json_atomic(directory / output.DONE_FILE, record)
                count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    started = time.time()
    args = parse_study(argv)
    try:
        spec, contestants, settings, rates, work, recorded = cli.prepare(args, study_settings(args))
    except cli.INPUT_ERRORS as error:
        cli._close_backends()
        print(f"experiments.arena study: {error}", file=sys.stderr)
        return 2
    names = [contestant.name for contestant in contestants]
    if args.reuse:
        try:
            reuse_runs(Path(args.reuse), work, recorded, names)
        except cli.ArenaInputError as error:
            print(f"experiments.arena study: {error}", file=sys.stderr)
            return 2
    output.write_json_atomic(work / output.SETTINGS_FILE, recorded)
    study = recorded["study"]
    grid = [(rate, update) for update in study["updates"] for rate in rates]
    selection = [(seed, c, rate, update) for seed in study["select_seeds"] for c in contestants for rate, update in grid]
    jobs, done = cli.plan(work, spec, settings, selection)
    done += cli.run_planned(jobs, args.jobs, not args.no_progress)
    ran = len(jobs)
    scored = summary.as_scored(done, recorded["settings"])  # chosen as summarize will read them (over env steps)
    chosen, _ = analysis.choose_options(scored, names, set(study["select_seeds"]))
    arms = [(c.name, chosen[c.name]) for c in contestants]
    if study.get("matched"):
        arms = list(dict.fromkeys(arms + matched_arms(scored, names, set(study["select_seeds"]))))
    by_name = {c.name: c for c in contestants}
    evaluation = [(seed, by_name[name], *option) for seed in study["eval_seeds"] for name, option in arms]
    jobs, evaluated = cli.plan(work, spec, settings, evaluation)
    evaluated += cli.run_planned(jobs, args.jobs, not args.no_progress)
    cli.save_results(work, done + evaluated, names)
    analysed = summary.summarize(work)
    print(cli.compact_line(analysed, spec.label, done + evaluated, ran + len(jobs), started, job="arena-study",
                           chosen=analysed["chosen"], claims={row["claim"]: row["verdict"] for row in analysed["claims"]}))
    return 0

"""``python -m experiments.arena study``: held-out choice of each contestant's learning rate and update rule.

    python -m experiments.arena study --game coin --select-seeds 0-4 --eval-seeds 5-14 \\
        --lr-grid 0.3,1,3,10 --updates pg,ppo --margin 0.01 --work runs/study-coin

Every contestant runs every (rate, update) of the grid on the selection seeds; the one with its best
mean AUC there is then run on the evaluation seeds, and only those are scored (table, claims). Each
contestant gets the same grid and the same number of runs; nothing is chosen on the seeds it is
scored on. The margin is recorded with the settings before any run. Takes every arena option
(``--seeds`` excepted); the last line on stdout is one JSON object (``"job": "arena-study"``).
"""

from __future__ import annotations

import math
import sys
import time

from experiments.arena import analysis, cli, inputs, output, summary
from experiments.arena.policy import UPDATES


def parse_study(argv: list[str] | None):
    parser = cli.make_parser("python -m experiments.arena study", __doc__.split("\n")[0])
    parser.add_argument("--select-seeds", required=True, help="seeds the rate and update are chosen on, e.g. 0-4")
    parser.add_argument("--eval-seeds", required=True, help="fresh seeds the chosen setting is scored on, e.g. 5-14")
    parser.add_argument("--updates", default="pg", help=f"comma list of update rules to choose from ({', '.join(UPDATES)})")
    parser.add_argument("--margin", type=float, default=analysis.DEFAULT_MARGIN,
                        help="equivalence margin in AUC, fixed before the runs (default %(default)s)")
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
    return {"select_seeds": select, "eval_seeds": evaluate, "updates": updates, "margin": args.margin}


def main(argv: list[str] | None = None) -> int:
    started = time.time()
    args = parse_study(argv)
    try:
        spec, contestants, settings, rates, work, recorded = cli.prepare(args, study_settings(args))
    except cli.INPUT_ERRORS as error:
        cli._close_backends()
        print(f"experiments.arena study: {error}", file=sys.stderr)
        return 2
    output.write_json_atomic(work / output.SETTINGS_FILE, recorded)
    names = [contestant.name for contestant in contestants]
    study = recorded["study"]
    grid = [(rate, update) for update in study["updates"] for rate in rates]
    selection = [(seed, c, rate, update) for seed in study["select_seeds"] for c in contestants for rate, update in grid]
    jobs, done = cli.plan(work, spec, settings, selection)
    done += cli.run_planned(jobs, args.jobs, not args.no_progress)
    ran = len(jobs)
    chosen, _ = analysis.choose_options(done, names, set(study["select_seeds"]))
    evaluation = [(seed, c, *chosen[c.name]) for seed in study["eval_seeds"] for c in contestants]
    jobs, evaluated = cli.plan(work, spec, settings, evaluation)
    evaluated += cli.run_planned(jobs, args.jobs, not args.no_progress)
    cli.save_results(work, done + evaluated, names)
    analysed = summary.summarize(work)
    print(cli.compact_line(analysed, spec.label, done + evaluated, ran + len(jobs), started, job="arena-study",
                           chosen=analysed["chosen"], claims={row["claim"]: row["verdict"] for row in analysed["claims"]}))
    return 0

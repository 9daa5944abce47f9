"""``python -m experiments.arena compare``: tree groups against independent rollouts, judged across the
two arms' studies of each game (docs/results/branching.md, item 5; docs/arena.md, "Tree against
independent rollouts").

    python -m experiments.arena compare \\
        --baseline runs/branching-twc3-independent --treatment runs/branching-twc3-tree \\
        --baseline runs/branching-mapreader-independent --treatment runs/branching-mapreader-tree \\
        --margin 0.04 --out runs/branching-compare

Each ``--baseline`` (a study of independent rollouts) is paired with the ``--treatment`` given in the
same position (the study of the same game with ``--branching``). Both are read as ``summarize`` reads
them (summary.read_analysed: arena.json and results.jsonl alone, curves over env steps); each arm's
contestant is scored at the option its own study chose on its selection seeds. Per game and
contestant, the claim "tree > independent" is the paired difference tree - independent of the AUC
over env steps per evaluation seed; every claim given is judged in one family by the code the
``family`` command uses (family.judge_family: paired t, every interval at 0.05/m, verdicts read off
it against ``--margin``). The second outcome (success at the budget, the greedy policy's success
there) stands beside with plain 95 % intervals, outside the family. Writes compare.md and
compare.json; bad input is one line naming the flag, exit status 2, nothing written.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from experiments.arena import family, output, stats, summary

CLAIM = "tree > independent"
# what a tree arm's arena.json holds beyond an independent arm's at the same budget (cli.build)
TREE_SETTINGS = ("branching", "max_env_steps")
SECOND = (("last", "success at the budget"), ("greedy_last", "greedy success at the budget"))


class CompareError(ValueError):
    """Bad input: one line naming the flag, exit status 2."""


def read_arm(work: Path, flag: str) -> dict:
    """One arm's study: its settings and analysis (summary.read_analysed), checked for this command."""
    where = f"{flag} {work}"
    if not work.is_dir():
        raise CompareError(f"{where}: not a directory (a study's work directory)")
    try:
        recorded, _, result = summary.read_analysed(work)
    except output.ResultsError as error:
        raise CompareError(f"{flag}: {error}") from None
    study, settings = recorded.get("study"), recorded["settings"]
    if not study:
        raise CompareError(f"{where}: not a study (each arm is a held-out study: rates chosen on its selection seeds)")
    if settings.get("env_steps") is None:
        raise CompareError(f"{where}: no --env-steps budget (the claims are on AUC over env steps)")
    tree = settings.get("branching") is not None
    if flag == "--baseline" and tree:
        raise CompareError(f"{where}: a tree arm (--branching {','.join(map(str, settings['branching']))}); "
                           "the baseline is independent rollouts")
    if flag == "--treatment" and not tree:
        raise CompareError(f"{where}: independent rollouts; the treatment is a tree arm (--branching)")
    for name, per_seed in result["per_seed"].items():
        if sorted(per_seed) != study["eval_seeds"]:
            raise CompareError(f"{where}: {name} has evaluation runs at its chosen option on seeds "
                               f"{_seeds(per_seed)}, its study's evaluation seeds are {_seeds(study['eval_seeds'])}")
    if len(study["eval_seeds"]) < 2:
        raise CompareError(f"{where}: a paired t interval needs >= 2 evaluation seeds")
    return {"work": work, "recorded": recorded, "result": result}


def _seeds(seeds) -> str:
    return summary._ranges(seeds)


def _without(mapping: dict, keys) -> dict:
    return {key: value for key, value in mapping.items() if key not in keys}


def check_pair(baseline: dict, treatment: dict) -> None:
    """The two arms of one game differ only in the tree: the same game, budget, search and seeds."""
    where = f"--treatment {treatment['work']}"
    base, tree = baseline["recorded"], treatment["recorded"]
    if (base["env"], base["env_options"]) != (tree["env"], tree["env_options"]):
        raise CompareError(f"{where}: game {tree['env']}, --baseline {baseline['work']} is {base['env']} "
                           "(or other env options); pair the arms of one game")
    budgets = [(r["settings"]["env_steps"], r["settings"]["iterations"]) for r in (base, tree)]
    if budgets[0] != budgets[1]:
        raise CompareError(f"{where}: budget {budgets[1][0]} env steps on {budgets[1][1]} cells, --baseline "
                           f"{baseline['work']} has {budgets[0][0]} on {budgets[0][1]}")
    if base["study"]["eval_seeds"] != tree["study"]["eval_seeds"]:
        raise CompareError(f"{where}: evaluation seeds {_seeds(tree['study']['eval_seeds'])}, --baseline "
                           f"{baseline['work']} has {_seeds(base['study']['eval_seeds'])} (a claim pairs them)")
    names = [baseline["result"]["names"], treatment["result"]["names"]]
    for flag, arm, mine, other in (("--treatment", treatment, names[1], names[0]), ("--baseline", baseline, names[0], names[1])):
        missing = [name for name in other if name not in mine]
        if missing:
            raise CompareError(f"{flag} {arm['work']}: no {', '.join(missing)} (the other arm ran it; "
                               "every contestant is judged in both arms)")
    differ = [key for key in ("recipe", "credit_set") if base.get(key) != tree.get(key)]
    differ += [key for key, drop in (("settings", TREE_SETTINGS), ("study", ("matched",)))
               if _without(base[key], drop) != _without(tree[key], drop)]
    if differ:
        raise CompareError(f"{where}: its {differ[0]} differ from --baseline {baseline['work']}'s "
                           "(the arms differ only in --branching)")


def claim_rows(pairs: list[tuple[dict, dict]], margin: float) -> tuple[list[dict], list[dict]]:
    """(rows for family.judge_family: per game and contestant, the AUC differences tree - independent
    per evaluation seed; the second outcome's rows, plain 95 % intervals)."""
    rows, second = [], []
    for baseline, treatment in pairs:
        game = baseline["recorded"]["env"]
        for name in baseline["result"]["names"]:
            base, tree = baseline["result"]["per_seed"][name], treatment["result"]["per_seed"][name]
            seeds = sorted(base)
            differences = [tree[s]["auc"] - base[s]["auc"] for s in seeds]
            rows.append({"game": game, "contestant": name, "claim": f"{name}: {CLAIM}", "seeds": len(seeds),
                         "options": [baseline["result"]["chosen"][name], treatment["result"]["chosen"][name]],
                         "auc": [stats.mean_std([base[s]["auc"] for s in seeds])[0],
                                 stats.mean_std([tree[s]["auc"] for s in seeds])[0]],
                         "per_seed": [[s, base[s]["auc"], tree[s]["auc"]] for s in seeds], "units": "AUC",
                         "margin": margin, "test": lambda level, d=differences: stats.paired_t(d, level)})
            second.append({"game": game, "contestant": name, "seeds": len(seeds)} | {
                key: stats.paired_interval([tree[s][key] - base[s][key] for s in seeds]) for key, _ in SECOND})
    return rows, second


def _arm_line(baseline: dict, treatment: dict) -> dict:
    settings = treatment["recorded"]["settings"]
    return {"game": baseline["recorded"]["env"], "baseline": baseline["work"].name, "treatment": treatment["work"].name,
            "branching": settings["branching"], "env_steps": settings["env_steps"], "cells": settings["iterations"],
            "eval_seeds": treatment["recorded"]["study"]["eval_seeds"],
            "select_seeds": treatment["recorded"]["study"]["select_seeds"]}


def markdown(arms: list[dict], judged: list[dict], second: list[dict], alpha: float, margin: float) -> str:
    m = len(judged)
    lines = [f"### Tree groups against independent rollouts: {m} claims \"{CLAIM}\", every interval at {alpha:g}/{m} "
             f"(confidence {1 - alpha / m:.4g})", "",
             "AUC over env steps per evaluation seed (a seed draws the same tasks in both arms), each arm at the option "
             f"its own study chose on its selection seeds; Δ = tree − independent. Margin ±{margin:g} AUC. The verdict "
             "reads the Bonferroni interval; p Holm beside it is never larger.", ""]
    for arm in arms:
        lines.append(f"* {arm['game']}: independent `{arm['baseline']}`, tree `{arm['treatment']}` (roots {arm['branching'][0]}, "
                     f"branches {arm['branching'][1]}, fork at {arm['branching'][2]}); {arm['env_steps']} env steps per run "
                     f"on {arm['cells']} cells; selection seeds {_seeds(arm['select_seeds'])}, evaluation seeds "
                     f"{_seeds(arm['eval_seeds'])}")
    lines += ["", "| game | contestant | option indep. / tree | seeds | AUC indep. | AUC tree | Δ AUC [CI] | p | p Bonf. "
              "| p Holm | verdict |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in judged:
        lines.append(f"| {row['game']} | {row['contestant']} | {' / '.join(row['options'])} | {row['seeds']} "
                     f"| {row['auc'][0]:.3f} | {row['auc'][1]:.3f} | {output._interval(row)} | {output._p(row['p'])} "
                     f"| {output._p(row['p_bonferroni'])} | {output._p(row['p_holm'])} | **{row['verdict']}** |")
    lines += ["", "### Second outcome (not in the family): Δ tree − independent, plain 95 % intervals", "",
              "Read on the evaluation seeds at each arm's chosen option, on the last cell of the env-step budget.", "",
              "| game | contestant | seeds | " + " | ".join(f"Δ {label} [95 % CI]" for _, label in SECOND) + " |",
              "|---|---|---|" + "---|" * len(SECOND)]
    for row in second:
        lines.append(f"| {row['game']} | {row['contestant']} | {row['seeds']} | "
                     + " | ".join(output._interval(row[key]) for key, _ in SECOND) + " |")
    return "\n".join(lines) + "\n"


def compare(baselines: list[Path], treatments: list[Path], margin: float, out: Path, alpha: float = 0.05) -> dict:
    """Checks every input, then writes out/compare.md and out/compare.json; returns what the JSON holds."""
    if len(baselines) != len(treatments):
        raise CompareError(f"--treatment: {len(treatments)} given for {len(baselines)} --baseline "
                           "(one of each per game, in the same order)")
    if not (math.isfinite(margin) and margin >= 0):
        raise CompareError(f"--margin {margin}: must be a finite number >= 0")
    if out.exists() and not out.is_dir():
        raise CompareError(f"--out {out}: not a directory")
    pairs, games = [], set()
    for base_work, tree_work in zip(baselines, treatments):
        baseline, treatment = read_arm(base_work, "--baseline"), read_arm(tree_work, "--treatment")
        check_pair(baseline, treatment)
        if baseline["recorded"]["env"] in games:
            raise CompareError(f"--baseline {base_work}: game {baseline['recorded']['env']} is given twice")
        games.add(baseline["recorded"]["env"])
        for arm in (baseline, treatment):
            recorded = arm["recorded"]["study"]["margin"]
            if recorded != margin:
                raise CompareError(f"--margin {margin:g}: the study in {arm['work']} recorded {recorded:g} before its runs")
        pairs.append((baseline, treatment))
    rows, second = claim_rows(pairs, margin)
    judged = family.judge_family(rows, alpha)
    arms = [_arm_line(*pair) for pair in pairs]
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(markdown(arms, judged, second, alpha, margin))
    result = {"claim": CLAIM, "alpha": alpha, "margin": margin, "arms": arms, "claims": judged, "second": second}
    output.write_json_atomic(out / "compare.json", result)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.arena compare", description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", action="append", required=True, metavar="DIR",
                        help="a study of independent rollouts at an env-step budget (once per game)")
    parser.add_argument("--treatment", action="append", required=True, metavar="DIR",
                        help="the study of the same game with --branching (in the same order as --baseline)")
    parser.add_argument("--margin", type=float, required=True, help="equivalence margin in AUC, as the studies recorded it")
    parser.add_argument("--out", required=True, help="directory for compare.md and compare.json")
    args = parser.parse_args(argv)
    try:
        result = compare([Path(p) for p in args.baseline], [Path(p) for p in args.treatment], args.margin, Path(args.out))
    except CompareError as error:
        print(f"experiments.arena compare: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"job": "arena-compare", "claims": {f"{row['game']}: {row['claim']}": row["verdict"]
                                                         for row in result["claims"]}}))
    return 0

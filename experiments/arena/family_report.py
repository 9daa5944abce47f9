"""``python -m experiments.arena family DIR... --out DIR``: several studies read together.

    python -m experiments.arena family docs/results/arena/{mapreader,twc-2rooms,twc3,webshop-instruction} \\
        --plan twc3,mapreader --out docs/results/arena

Reads each study's arena.json and results.jsonl(.gz), judges one family over every claim with a
verdict (each pooled over the games, then each game's own; Bonferroni: every interval at alpha/m),
lists the matched-rate comparisons the records hold, and with ``--plan`` the evaluation seeds a
next study needs on those games. Writes family.md and family.json; bad input is one line, exit 2.
Rules and definitions: docs/arena.md, "Reading several studies together".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from experiments.arena import crossgame, family, output, summary

DELTA = 0.02  # AUC a per-game claim of a planned study must resolve
PLAN_FAMILY = 12  # a planned study's claims: 4 chain links x (pooled, and each of 2 games), at matched options


def load_game(work: Path) -> dict:
    recorded = summary.read_settings(work)
    study = recorded.get("study")
    if not study:
        raise output.ResultsError(f"{work / output.SETTINGS_FILE}: not a study (the family reads held-out studies)")
    if recorded["settings"].get("env_steps") is not None:  # its AUC is over iterations, a budgeted run's over env steps
        raise output.ResultsError(f"{work}: a study at an env-step budget (--env-steps); compare reads those")
    return {"name": work.name, "records": output.read_results(work), "select_seeds": study["select_seeds"],
            "margin": study["margin"]}


def _option(option) -> str:
    return "—" if option is None else output.rate_label(*option)


def _interval(row) -> str:
    return f"{row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"


def family_table(judged, alpha: float, relative_margin: float, matched: bool) -> str:
    m = len(judged)
    arms = "both arms at the pair's matched option" if matched else "each arm at its own chosen option"
    lines = [f"### The family: {m} claims, every interval at {alpha:g}/{m} (confidence {1 - alpha / m:.4g})", "",
             f"Paired Δ AUC per evaluation seed, {arms}. Pooled rows: the mean over games of each game's mean "
             f"difference divided by its scale (GiGPO's learning gain on the selection seeds), Welch t, margin "
             f"±{relative_margin:g} of the scale; game rows: in AUC, the margin the study recorded. The verdict reads "
             "the interval (Bonferroni); p Holm beside it is never larger.", "",
             "| scope | claim | seeds | Δ [CI] | units | margin | p | p Bonf. | p Holm | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in judged:
        lines.append(f"| {row['scope']} | {row['claim']} | {row['seeds']} | {_interval(row)} | {row['units']} "
                     f"| ±{row['margin']:g} | {output._p(row['p'])} | {output._p(row['p_bonferroni'])} "
                     f"| {output._p(row['p_holm'])} | **{row['verdict']}** |")
    return "\n".join(lines) + "\n"


def matched_table(rows) -> str:
    lines = ["### Matched-rate comparisons (exploratory)", "",
             "Per chain link, the option both arms share: the best mean of their two selection-seed AUCs. "
             "Δ: evaluation seeds where both ran it (plain 95 % interval); spread: s.d. of the paired "
             "difference over every seed with both arms at it.", "",
             "| game | claim | tuned A / B | matched | Δ AUC at matched, eval seeds | spread (seeds) |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        tuned = " / ".join(_option(o) for o in row["tuned"]) + (" (= matched)" if row["same_as_tuned"] else "")
        evaluated = _interval(row["eval"]) + f" ({row['eval_seeds']})" if row["eval"] else "not run"
        spread = "—" if row["spread"] is None else f"{row['spread']:.3f} ({row['spread_seeds']})"
        lines.append(f"| {row['game']} | {row['claim']} | {tuned} | {_option(row['matched'])} | {evaluated} | {spread} |")
    return "\n".join(lines) + "\n"


def plan_table(rows, games, alpha: float, relative_margin: float) -> str:
    lines = [f"### Evaluation seeds to resolve each chain link at its matched option ({', '.join(games)})", "",
             f"80 % power to find a true difference of ±{DELTA:g} AUC (per game) or ±{relative_margin:g} of the scale "
             f"(pooled), and 80 % to show a true 0 within that margin; level {alpha:g}/{PLAN_FAMILY}; spreads raised to "
             "their 80 % upper confidence bounds (experiments/arena/power.py).", "",
             "| claim | planning s.d. | seeds per game, per-game claim | seeds per game, pooled claim |", "|---|---|---|---|"]
    for row in rows:
        sds = ", ".join(f"{g} {row['planning_sd'][g]:.3f}" for g in games)
        per_game = ", ".join(f"{g} {row['per_game'][g]}" for g in games)
        lines.append(f"| {row['claim']} | {sds} | {per_game} | {row['pooled_per_game']} |")
    return "\n".join(lines) + "\n"


def _jsonable(value):
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return {key: _jsonable(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def report(works: list[Path], out: Path, plan_games: list[str], matched: bool, relative_margin: float,
           alpha: float = 0.05) -> dict:
    games = [load_game(work) for work in works]
    try:
        rows, views = crossgame.family_rows(games, relative_margin, matched)
        judged = family.judge_family(rows, alpha)
        matched_rows = crossgame.matched_rows(games)
        scales = {name: view["scale"] for name, view in views.items()}
        planned = crossgame.plan(matched_rows, scales, plan_games, DELTA, relative_margin, PLAN_FAMILY, alpha) if plan_games else []
    except ValueError as error:
        raise output.ResultsError(str(error)) from None
    scale_line = "Scales (GiGPO's learning gain on the selection seeds): " + ", ".join(f"{g} {s:.3f}" for g, s in scales.items()) + ".\n"
    text = family_table(judged, alpha, relative_margin, matched) + "\n" + scale_line + "\n" + matched_table(matched_rows)
    if planned:
        text += "\n" + plan_table(planned, plan_games, alpha, relative_margin)
    out.mkdir(parents=True, exist_ok=True)
    (out / "family.md").write_text(text)
    result = {"games": [game["name"] for game in games], "alpha": alpha, "relative_margin": relative_margin,
              "matched_arms": matched, "scales": scales, "claims": judged, "matched": matched_rows, "plan": planned}
    output.write_json_atomic(out / "family.json", _jsonable(result))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.arena family", description=__doc__.split("\n")[0])
    parser.add_argument("works", nargs="+", help="study work directories (their names label the games)")
    parser.add_argument("--out", required=True, help="directory for family.md and family.json")
    parser.add_argument("--plan", default="", help="comma list of games to size a next study on")
    parser.add_argument("--matched", action="store_true", help="judge the chain links at matched options")
    parser.add_argument("--relative-margin", type=float, default=crossgame.RELATIVE_MARGIN)
    args = parser.parse_args(argv)
    works = [Path(work) for work in args.works]
    plan_games = [game for game in args.plan.split(",") if game]
    try:
        if len({work.name for work in works}) != len(works):
            raise output.ResultsError("two work directories share a name (it labels the game)")
        unknown = [game for game in plan_games if game not in {work.name for work in works}]
        if unknown:
            raise output.ResultsError(f"--plan {','.join(unknown)}: not among the work directories")
        if not args.relative_margin > 0:
            raise output.ResultsError(f"--relative-margin {args.relative_margin}: must be > 0")
        result = report(works, Path(args.out), plan_games, args.matched, args.relative_margin)
    except output.ResultsError as error:
        print(f"experiments.arena family: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"job": "arena-family", "games": result["games"],
                      "claims": {f"{row['scope']}: {row['claim']}": row["verdict"] for row in result["claims"]}}))
    return 0

"""Every table and figure of an arena, rebuilt from its work directory without rerunning anything:

    python -m experiments.arena summarize DIR

reads ``DIR/arena.json`` (the settings, a study's seeds and margin) and ``DIR/results.jsonl`` (every
run's per-iteration record) and writes table.md/json, curves.png, diagnostics.md/json, claims.md/json
and, for a study, selection.md/json. An arena run ends by calling the same ``summarize``. Bad input
(a missing or unreadable file) is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from pathlib import Path

from experiments.arena import analysis, budget, inputs, output


def title_of(recorded: dict, seeds: int) -> str:
    settings = recorded["settings"]
    updates = recorded.get("study", {}).get("updates") or [settings["update"]]
    return (f"{recorded['env']}: G={settings['groups']} K={settings['group_size']}, {settings['tasks']} tasks, "
            f"{seeds} seeds, {'/'.join(updates)}")


def read_settings(work: Path) -> dict:
    if work.exists() and not work.is_dir():
        raise output.ResultsError(f"{work}: not a directory (an arena work directory)")
    path = work / output.SETTINGS_FILE
    try:
        recorded = inputs.read_json(path, output.ResultsError)
    except FileNotFoundError:
        raise output.ResultsError(f"{path}: no such file (not an arena work directory)") from None
    problem = inputs.settings_problem(recorded)
    if problem:
        raise output.ResultsError(f"{path}: {problem}")
    return recorded


def read_records(work: Path) -> list[dict]:
    """``output.read_results`` with every record's values checked (inputs.record_problem)."""
    path = work / output.RESULTS_FILE
    if not path.exists():
        path = path.with_suffix(".jsonl.gz")
    try:
        records = output.read_results(work)
    except zlib.error as error:  # corrupt deflate data behind a valid gzip header: not an OSError
        raise output.ResultsError(f"{path}: not readable ({error})") from None
    except TypeError:  # read_results compares the lengths of success and greedy
        raise output.ResultsError(f"{path}: a run record's success and greedy must be lists") from None
    for number, record in enumerate(records, 1):
        problem = inputs.record_problem(record)
        if problem:
            raise output.ResultsError(f"{path}: run record {number}: {problem}")
    return records


def as_scored(records: list[dict], settings: dict) -> list[dict]:
    """The records as the analysis reads them: curves over env steps on ``iterations`` cells where the
    arena has an env-step budget (budget.py), else as played. The study chooses its options on these too."""
    if settings.get("env_steps") is None:
        return records
    return budget.on_budget(records, settings["env_steps"], settings["iterations"])


def read_analysed(work: Path) -> tuple[dict, list[dict], dict]:
    """``work``'s settings, its records (curves read over env steps where it has a budget) and their
    analysis (analysis.analyse), from arena.json and results.jsonl alone; writes nothing."""
    recorded = read_settings(work)
    study = recorded.get("study")
    records = read_records(work)
    margin = study["margin"] if study else analysis.DEFAULT_MARGIN
    settings = recorded["settings"]
    try:
        records = as_scored(records, settings)
        result = analysis.analyse(records, study["select_seeds"] if study else None, margin)
    except ValueError as error:
        raise output.ResultsError(f"{work / output.RESULTS_FILE}: {error}") from None
    return recorded, records, result


def summarize(work: Path) -> dict:
    """Writes every table and figure of ``work``; returns the analysis (analysis.analyse)."""
    recorded, records, result = read_analysed(work)
    study = recorded.get("study")
    margin = result["margin"]
    title = title_of(recorded, len(result["scored_seeds"]))
    if any("env_steps" in record for record in records):
        _tree_facts(work, recorded, records, result)
    if study:
        title += f" (evaluation seeds {_ranges(study['eval_seeds'])}; rates chosen on seeds {_ranges(study['select_seeds'])})"
    (work / "table.md").write_text(output.markdown_table(title, result["results"]))
    output.write_json_atomic(work / "table.json", {"title": title, "results": result["results"]})
    output.plot_curves(work / "curves.png", title, result["curves"], "success rate (training rollouts)")
    diagnostics = result["diagnostics"]
    (work / "diagnostics.md").write_text(output.diagnostics_table(title + ": credit diagnostics, mean over iterations and seeds", diagnostics))
    output.write_json_atomic(work / "diagnostics.json", diagnostics)
    choice = "chosen on the selection seeds" if study else "chosen on these same seeds (post hoc)"
    claims_title = f"{title}: the claims, rates {choice}; best contestant outside the paper's six: {result['best_outsider'] or 'none ran'}"
    (work / "claims.md").write_text(output.claims_table(claims_title, result["claims"], diagnostics, margin) if result["claims"]
                                    else f"### {claims_title}\n\nNo claim could be judged (a claim needs both contestants on >= 2 common seeds).\n")
    output.write_json_atomic(work / "claims.json", {"title": claims_title, "margin": margin, "best_outsider": result["best_outsider"],
                                                    "claims": result["claims"]})
    if result["grid"] is not None:
        selection_title = f"{recorded['env']}: mean AUC ± std on the selection seeds {_ranges(study['select_seeds'])} (bold: chosen)"
        (work / "selection.md").write_text(output.selection_table(selection_title, result["grid"], result["chosen"]))
        output.write_json_atomic(work / "selection.json", {"grid": result["grid"], "chosen": result["chosen"]})
    return result


def _tree_facts(work: Path, recorded: dict, records: list[dict], result: dict) -> None:
    """branching.md/json: env steps, forks and shared steps per contestant (its scored runs), with the
    same-state sibling share and the tie-correction rate (docs/arena.md, "Tree groups")."""
    scored = set(result["scored_seeds"])
    runs = [r for r in records if r["seed"] in scored and analysis.option_label(r["lr"], r["update"]) == result["chosen"][r["contestant"]]]
    facts = budget.tree_facts(runs, recorded["settings"]["groups"] * recorded["settings"]["group_size"])
    shape = recorded["settings"].get("branching")
    arm = "independent rollouts" if shape is None else "tree groups: roots {}, branches {}, fork at {}".format(*shape)
    spent = recorded["settings"].get("env_steps")
    title = f"{recorded['env']}: {arm}" + (f", {spent} env steps per run" if spent else "")
    (work / "branching.md").write_text(budget.facts_table(title, facts, result["diagnostics"]))
    output.write_json_atomic(work / "branching.json", {"title": title, "branching": shape, "env_steps": spent, "facts": facts})


def _ranges(seeds) -> str:
    seeds = sorted(seeds)
    return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)) else ",".join(map(str, seeds))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.arena summarize", description=__doc__.split("\n")[0])
    parser.add_argument("work", help="an arena or study work directory")
    args = parser.parse_args(argv)
    try:
        result = summarize(Path(args.work))
    except output.ResultsError as error:
        print(f"experiments.arena summarize: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"job": "arena-summary", "work": args.work, "contestants": result["names"],
                      "claims": {row["claim"]: row["verdict"] for row in result["claims"]}}))
    return 0

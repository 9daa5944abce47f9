"""From run records to the arena's results (pure): each contestant's chosen (rate, update), its scores
over seeds, the paired comparison to GiGPO, the credit diagnostics and the claim family.

A run record is one line of results.jsonl: ``contestant``, ``seed``, ``lr``, ``update``, the
``success`` and ``greedy`` curves and ``credit`` (per diagnostic, its value at every iteration).

Where the (rate, update) is chosen: a plain arena chooses, per contestant, the option with the best
mean AUC on the seeds it is then scored on (post hoc). A study (``select_seeds`` given) chooses on
the selection seeds and scores only the evaluation seeds, so the choice cannot fit their noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from experiments.arena import stats
from experiments.arena.contestants import BASELINE, PAPER_CONTESTANTS, RANDOM

DEFAULT_MARGIN = 0.01  # AUC: a smaller difference does not matter (stated before the runs; docs/arena.md)


def option_label(lr: float, update: str) -> str:
    return f"lr {lr:g}" + ("" if update == "pg" else f" {update}")


def contestant_order(records: Sequence[Mapping]) -> list[str]:
    return list(dict.fromkeys(record["contestant"] for record in records))


def _scores(records: Sequence[Mapping]) -> dict[int, dict]:
    return {record["seed"]: stats.run_scores(record["success"], record["greedy"]) for record in records}


def _options(records: Sequence[Mapping], name: str, seeds: set[int] | None) -> dict[tuple[float, str], list[Mapping]]:
    """(lr, update) -> that contestant's records on ``seeds`` (all seeds: None), in (update, lr) order."""
    grouped: dict[tuple[float, str], list[Mapping]] = {}
    for record in sorted(records, key=lambda r: (r["update"], r["lr"], r["seed"])):
        if record["contestant"] == name and (seeds is None or record["seed"] in seeds):
            grouped.setdefault((record["lr"], record["update"]), []).append(record)
    return grouped


def choose_options(records: Sequence[Mapping], names: Sequence[str], seeds: set[int] | None) -> tuple[dict, dict]:
    """Per contestant the (lr, update) with the best mean AUC over ``seeds`` (ties: the first in
    (update, lr) order), and the grid of summaries it was chosen from."""
    chosen, grid = {}, {}
    for name in names:
        options = _options(records, name, seeds)
        if not options:
            raise ValueError(f"contestant {name!r} has no run on the selection seeds")
        summaries = {option: stats.contestant_summary(_scores(runs)) for option, runs in options.items()}
        chosen[name] = max(summaries, key=lambda option: summaries[option]["auc"]["mean"])
        grid[name] = {option_label(*option): summary["auc"] for option, summary in summaries.items()}
    return chosen, grid


def best_outsider(names: Sequence[str], mean_auc: Mapping[str, float]) -> str | None:
    """The contestant outside the paper's six (and the random control) with the best mean AUC."""
    outsiders = [name for name in names if name not in PAPER_CONTESTANTS and name != RANDOM]
    return max(outsiders, key=lambda name: mean_auc[name]) if outsiders else None


def analyse(records: Sequence[Mapping], select_seeds: Sequence[int] | None, margin: float) -> dict:
    """Everything the tables and figures show, from the records alone."""
    names = contestant_order(records)
    selection = set(select_seeds) if select_seeds else None
    chosen, grid = choose_options(records, names, selection)
    scored = {name: [r for r in _options(records, name, None).get(chosen[name], [])
                     if selection is None or r["seed"] not in selection] for name in names}
    missing = [name for name, runs in scored.items() if not runs]
    if missing:
        raise ValueError(f"no evaluation run of {', '.join(missing)} at its chosen rate")
    per_seed = {name: _scores(runs) for name, runs in scored.items()}
    results = {}
    for name in names:
        lr, update = chosen[name]
        entry = {"lr": lr, "update": update, "summary": stats.contestant_summary(per_seed[name])}
        if BASELINE in names and name != BASELINE:
            entry["paired_vs_gigpo"] = stats.paired_against(per_seed[name], per_seed[BASELINE])
        results[name] = entry
    diagnostics = {name: stats.diagnostics_means([row for run in scored[name] for row in _credit_rows(run["credit"])])
                   for name in names}
    # the outsider is picked where the rates are: on the selection seeds in a study
    picking_auc = {name: max(option["mean"] for option in grid[name].values()) for name in names}
    outsider = best_outsider(names, picking_auc)
    auc = {name: {seed: scores["auc"] for seed, scores in per_seed[name].items()} for name in names}
    # a claim needs a paired t test: both contestants on >= 2 common seeds (the others are left out of the family)
    pairs = [(a, b) for a, b in stats.claim_family(names, outsider) if len(set(auc[a]) & set(auc[b])) >= 2]
    claims = stats.judge_claims(auc, pairs, margin) if pairs else []
    return {"names": names, "results": results, "curves": {name: [run["success"] for run in scored[name]] for name in names},
            "diagnostics": diagnostics, "claims": claims, "best_outsider": outsider, "margin": margin,
            "grid": grid if selection is not None else None,
            "chosen": {name: option_label(*chosen[name]) for name in names}, "per_seed": per_seed,
            "scored_seeds": sorted({r["seed"] for runs in scored.values() for r in runs})}


def _credit_rows(columns: Mapping[str, Sequence]) -> list[dict]:
    length = max((len(values) for values in columns.values()), default=0)
    return [{stats.CREDIT_PREFIX + key: values[i] for key, values in columns.items()} for i in range(length)]

"""Arenas with an env-step budget or tree groups (docs/arena.md, "Tree groups"): curves read over env
steps, and the tree facts of each contestant (pure).

A run with ``--env-steps N`` plays until its training rollouts spent N env steps, so its per-iteration
curves differ in length (a tree spends fewer steps per iteration and plays more of them). ``over_env_steps``
reads every curve on ``cells`` equal intervals of [0, N]: a cell's value is the env-step-weighted mean of
the iterations that spent its steps, so the mean over the cells is the area under success against env
steps divided by N (the AUC over env steps), exactly, whatever the iterations' lengths. The arena's
tables then read these cells as they read iterations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from experiments.arena import stats


def over_env_steps(values: Sequence[float], spent: Sequence[int], budget: int, cells: int) -> list[float]:
    """``values`` (one per iteration, which spent ``spent`` env steps) on ``cells`` equal cells of [0, budget]."""
    edges = np.concatenate([[0], np.cumsum(spent, dtype=np.float64)])
    if len(values) != len(spent) or edges[-1] < budget:
        raise ValueError(f"a run of {len(values)} iterations spent {int(edges[-1])} env steps, the budget is {budget}")
    bounds = np.linspace(0.0, budget, cells + 1)
    # overlap[j, i]: the env steps of iteration i that fall in cell j
    overlap = np.clip(np.minimum(edges[None, 1:], bounds[1:, None]) - np.maximum(edges[None, :-1], bounds[:-1, None]), 0, None)
    return [round(float(x), 9) for x in overlap @ np.asarray(values, np.float64) / (budget / cells)]


def on_budget(records: Sequence[Mapping], budget: int, cells: int) -> list[dict]:
    """Every record with its success and greedy curves read over env steps (``over_env_steps``)."""
    read = []
    for record in records:
        if "env_steps" not in record:
            raise ValueError(f"run {record['contestant']} seed {record['seed']}: no env_steps (an --env-steps arena records them)")
        curves = {key: over_env_steps(record[key], record["env_steps"], budget, cells) for key in ("success", "greedy")}
        read.append({**record, **curves})
    return read


def tree_facts(records: Sequence[Mapping], group_leaves: int) -> dict[str, dict]:
    """Per contestant, over its runs (mean over runs of each run's totals): iterations played, env steps per
    leaf, forks per group and the share of recorded steps that two or more leaves share."""
    facts: dict[str, dict] = {}
    for name in dict.fromkeys(r["contestant"] for r in records):
        runs = [r for r in records if r["contestant"] == name]
        leaves = [len(r["env_steps"]) * group_leaves for r in runs]  # success may be read over env steps
        row = {"runs": len(runs), "iterations": _mean([len(r["env_steps"]) for r in runs]),
               "env_steps": _mean([sum(r["env_steps"]) for r in runs]),
               "env_steps_per_leaf": _mean([sum(r["env_steps"]) / n for r, n in zip(runs, leaves)])}
        if all("forks" in r for r in runs):
            row["forks_per_leaf"] = _mean([sum(r["forks"]) / n for r, n in zip(runs, leaves)])
            row["shared_step_share"] = _mean([sum(r["shared_steps"]) / sum(r["env_steps"]) for r in runs])
        facts[name] = row
    return facts


def _mean(values: Sequence[float]) -> float:
    return stats.mean_std(values)[0]


FACT_COLUMNS = ("runs", "iterations", "env_steps", "env_steps_per_leaf", "forks_per_leaf", "shared_step_share")


def facts_table(title: str, facts: Mapping[str, Mapping], diagnostics: Mapping[str, Mapping]) -> str:
    """The tree facts with the two diagnostics item 5 reports per arm: the same-state sibling share
    (``shared_state_fraction``) and the pooled tie-correction rate."""
    head = [*FACT_COLUMNS, "same-state sibling share", "tie corr. (pooled)"]
    lines = [f"### {title}", "", "| contestant | " + " | ".join(c.replace("_", " ") for c in head) + " |",
             "|---|" + "---|" * len(head)]
    for name, row in facts.items():
        values = [row.get(c) for c in FACT_COLUMNS]
        values += [diagnostics.get(name, {}).get("shared_state_fraction"), diagnostics.get(name, {}).get("pooled_tie_correction_rate")]
        lines.append(f"| {name} | " + " | ".join("—" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.3f}") for v in values) + " |")
    return "\n".join(lines) + "\n"

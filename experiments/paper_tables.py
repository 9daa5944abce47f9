"""The paper's result tables from the final evaluations of training runs (pure; I/O in report.py).

Input per run: its method (the sweep variant), its seed and the last evaluation record of its
``metrics.jsonl`` (``eval/<split>/success_rate``, ``eval/<split>/score``, and for ALFWorld
``eval/<split>/success_rate/<task type>``). Output, every figure as mean ± std over seeds:

* Table 1: success per task type and overall (in-distribution split), plus score (WebShop's reward);
* Table 2: in-distribution and out-of-distribution success and the ID - OOD gap (per seed, then
  averaged);
* Table 3: the ablation rows in the paper's order (MileGPO, w/o PCC, w/o PCC and RCS, GraphGPO,
  GiGPO, GRPO), with the difference of each to full MileGPO.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

ID, OOD = "eval_id", "eval_ood"
# The ablation sweep's variant names (experiments/sweeps/ablation.py), in the paper's order.
ABLATION_ORDER = ("milegpo", "milegpo-no-pcc", "milegpo-no-pcc-rcs", "graphgpo", "gigpo", "grpo")
REFERENCE = "milegpo"


@dataclasses.dataclass(frozen=True)
class RunResult:
    method: str
    seed: int
    iteration: int  # of the evaluation used
    evaluation: Mapping[str, float]  # "<split>/success_rate", "<split>/score", "<split>/success_rate/<type>"


def mean_std(values: Sequence[float]) -> dict[str, float | int]:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return {"mean": mean, "std": std, "n": len(values)}


def _by_method(runs: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    grouped: dict[str, list[RunResult]] = {}
    for run in sorted(runs, key=lambda r: (r.method, r.seed)):
        grouped.setdefault(run.method, []).append(run)
    order = [m for m in ABLATION_ORDER if m in grouped] + sorted(m for m in grouped if m not in ABLATION_ORDER)
    return {method: grouped[method] for method in order}


def _column(runs: Sequence[RunResult], key: str) -> dict | None:
    values = [run.evaluation[key] for run in runs if run.evaluation.get(key) is not None]
    return mean_std(values) if values else None


def task_types(runs: Sequence[RunResult], split: str = ID) -> list[str]:
    prefix = f"{split}/success_rate/"
    return sorted({key[len(prefix):] for run in runs for key in run.evaluation if key.startswith(prefix)})


def table1(runs: Sequence[RunResult]) -> dict[str, dict]:
    """Per method: success per task type, overall success and score (ID split)."""
    types = task_types(runs)
    table = {}
    for method, members in _by_method(runs).items():
        row = {f"success/{t}": _column(members, f"{ID}/success_rate/{t}") for t in types}
        row["success/all"] = _column(members, f"{ID}/success_rate")
        row["score"] = _column(members, f"{ID}/score")
        table[method] = row
    return table


def table2(runs: Sequence[RunResult]) -> dict[str, dict]:
    """Per method: ID and OOD success and the per-seed ID - OOD gap."""
    table = {}
    for method, members in _by_method(runs).items():
        gaps = [
            run.evaluation[f"{ID}/success_rate"] - run.evaluation[f"{OOD}/success_rate"]
            for run in members
            if run.evaluation.get(f"{ID}/success_rate") is not None and run.evaluation.get(f"{OOD}/success_rate") is not None
        ]
        table[method] = {
            "id_success": _column(members, f"{ID}/success_rate"),
            "ood_success": _column(members, f"{OOD}/success_rate"),
            "gap": mean_std(gaps) if gaps else None,
        }
    return table


def table3(runs: Sequence[RunResult]) -> dict[str, dict]:
    """Ablation rows: ID/OOD success and score, each with its difference to full MileGPO's mean."""
    rows = {}
    for method, members in _by_method(runs).items():
        rows[method] = {
            "id_success": _column(members, f"{ID}/success_rate"),
            "ood_success": _column(members, f"{OOD}/success_rate"),
            "score": _column(members, f"{ID}/score"),
        }
    reference = rows.get(REFERENCE)
    if reference is not None:
        for method, row in rows.items():
            for key in ("id_success", "ood_success", "score"):
                if row[key] is not None and reference[key] is not None:
                    row[f"delta_{key}"] = row[key]["mean"] - reference[key]["mean"]
    return rows


def format_entry(entry: Mapping | None, percent: bool = True) -> str:
    if entry is None or entry["mean"] is None or entry["std"] is None:  # None: overflowed (report.py)
        return "—"
    scale = 100.0 if percent else 1.0
    return f"{entry['mean'] * scale:.1f} ± {entry['std'] * scale:.1f}"


def markdown(title: str, tables: Mapping[str, Mapping[str, Mapping]]) -> str:
    """The three tables as markdown (figures in %, mean ± std over seeds)."""
    out = [f"## {title}", ""]
    t1 = tables["table1"]
    columns = list(next(iter(t1.values())).keys()) if t1 else []
    out += ["### Table 1: success per task type (ID split, %)", "",
            "| method | seeds | " + " | ".join(c.replace("success/", "") for c in columns) + " |",
            "|---|---|" + "---|" * len(columns)]
    for method, row in t1.items():
        seeds = max((entry["n"] for entry in row.values() if entry), default=0)
        out.append(f"| {method} | {seeds} | " + " | ".join(format_entry(row[c]) for c in columns) + " |")
    out += ["", "### Table 2: in- and out-of-distribution success (%)", "",
            "| method | ID | OOD | ID − OOD gap |", "|---|---|---|---|"]
    for method, row in tables["table2"].items():
        out.append(f"| {method} | {format_entry(row['id_success'])} | {format_entry(row['ood_success'])} | {format_entry(row['gap'])} |")
    out += ["", "### Table 3: ablation (%, Δ vs MileGPO in points)", "",
            "| method | ID | Δ | OOD | Δ | score | Δ |", "|---|---|---|---|---|---|---|"]
    for method, row in tables["table3"].items():
        cells = []
        for key in ("id_success", "ood_success", "score"):
            delta = row.get(f"delta_{key}")
            cells += [format_entry(row[key]), "—" if delta is None else f"{delta * 100:+.1f}"]
        out.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"

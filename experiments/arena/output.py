"""The arena's files: per-run summaries, the results table (markdown + JSON) and the curves PNG."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only

import matplotlib.pyplot as plt

from experiments.arena import stats

SETTINGS_FILE = "arena.json"
DONE_FILE = "done.json"


def run_dir(work: Path, contestant: str, seed: int, lr: float) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._=+-]", "-", contestant.replace(":", "-").replace("@", "+"))
    return work / "runs" / safe / f"seed{seed}-lr{lr:g}"


def write_json_atomic(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(temporary, path)


def read_done(path: Path) -> dict | None:
    try:
        return json.loads((path / DONE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def read_metrics(directory: Path) -> list[dict]:
    path = directory / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


DIAGNOSTIC_COLUMNS = ("tie_share", "pooled_tie_share", "tie_correction_rate", "pooled_tie_correction_rate",
                      "opposite_outcome_tied_pairs", "zero_advantage_fraction", "shared_state_fraction",
                      "candidates_local_evidence", "candidates_weak", "evidence_positive_progress",
                      "evidence_positive_branch", "milestone_candidates", "traps")


def diagnostics_table(title: str, means: Mapping[str, Mapping[str, float | None]]) -> str:
    """Per contestant, the credit diagnostics averaged over its runs' iterations (stats.diagnostics_means)."""
    lines = [f"### {title}", "", "| contestant | " + " | ".join(c.replace("_", " ") for c in DIAGNOSTIC_COLUMNS) + " |",
             "|---|" + "---|" * len(DIAGNOSTIC_COLUMNS)]
    for name, row in means.items():
        cells = ["—" if row.get(c) is None else (f"{row[c]:.0f}" if row[c] >= 10 else f"{row[c]:.3f}") for c in DIAGNOSTIC_COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _fmt(entry: Mapping | None, digits: int = 3) -> str:
    if not entry or entry.get("mean") is None:
        return "—"
    text = f"{entry['mean']:.{digits}f} ± {entry['std']:.{digits}f}"
    return text + (f" ({entry['reached']}/{entry.get('of')})" if "reached" in entry else "")


def _interval(entry: Mapping | None) -> str:
    if not entry:
        return "—"
    if entry["low"] is None:
        return f"{entry['mean']:+.3f}"
    return f"{entry['mean']:+.3f} [{entry['low']:+.3f}, {entry['high']:+.3f}]"


def markdown_table(title: str, results: Mapping[str, Mapping]) -> str:
    lines = [
        f"### {title}",
        "",
        "| contestant | lr | last success | AUC | greedy last | iters to 50 % | iters to 80 % | Δ AUC vs GiGPO [95 % CI] | Δ last vs GiGPO [95 % CI] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in results.items():
        summary, paired = entry["summary"], entry.get("paired_vs_gigpo", {})
        for key in ("iters_to_50", "iters_to_80"):
            summary[key]["of"] = summary["seeds"]
        lines.append(
            f"| {name} | {entry['lr']:g} | {_fmt(summary['last'])} | {_fmt(summary['auc'])} | {_fmt(summary['greedy_last'])} "
            f"| {_fmt(summary['iters_to_50'], 1)} | {_fmt(summary['iters_to_80'], 1)} "
            f"| {_interval(paired.get('auc'))} | {_interval(paired.get('last'))} |"
        )
    return "\n".join(lines) + "\n"


def plot_curves(path: Path, title: str, curves: Mapping[str, Sequence[Sequence[float]]], ylabel: str) -> None:
    """One line per contestant: mean over seeds with a ± standard error band. The colour cycle has ten
    colours, so contestants past the tenth reuse them with another line style (``--all`` has twelve)."""
    figure, axis = plt.subplots(figsize=(6.4, 4.0), dpi=90)
    colours = plt.get_cmap("tab10").colors
    for index, (name, runs) in enumerate(curves.items()):
        mean, error = stats.band(runs)
        x = range(1, len(mean) + 1)
        colour, style = colours[index % len(colours)], ("-", "--", ":")[index // len(colours) % 3]
        axis.plot(x, mean, label=name, linewidth=1.4, color=colour, linestyle=style)
        axis.fill_between(x, [m - e for m, e in zip(mean, error)], [m + e for m, e in zip(mean, error)], color=colour, alpha=0.18)
    axis.set_xlabel("iteration")
    axis.set_ylabel(ylabel)
    axis.set_ylim(-0.02, 1.02)
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)

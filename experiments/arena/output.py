"""The arena's files: per-run summaries, the results table (markdown + JSON) and the curves PNG."""

from __future__ import annotations

import gzip
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
RESULTS_FILE = "results.jsonl"  # every run's per-iteration record, one JSON line per run: what summarize reads


def run_dir(work: Path, contestant: str, seed: int, lr: float, update: str = "pg") -> Path:
    """``runs/<contestant>/seed<S>-lr<LR>``; a PPO run gets ``-ppo`` appended (plain PG keeps the old name)."""
    safe = re.sub(r"[^A-Za-z0-9._=+-]", "-", contestant.replace(":", "-").replace("@", "+"))
    return work / "runs" / safe / (f"seed{seed}-lr{lr:g}" + ("" if update == "pg" else f"-{update}"))


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


def credit_columns(records: Sequence[Mapping]) -> dict[str, list]:
    """The ``credit/*`` values of per-iteration records as one list per diagnostic (None where undefined)."""
    keys = sorted({key for record in records for key in record if key.startswith(stats.CREDIT_PREFIX)})
    return {key[len(stats.CREDIT_PREFIX):]: [_rounded(record.get(key)) for record in records] for key in keys}


def _rounded(value):
    return round(float(value), 6) if isinstance(value, float) else value  # 6 decimals keep results.jsonl small


def run_record(directory: Path, default_update: str) -> dict | None:
    """A finished run's record (done.json); one written before done.json carried the credit columns
    and the update rule gets them from metrics.jsonl and the arena's settings."""
    done = read_done(directory)
    if done is None:
        return None
    done.setdefault("update", default_update)
    if "credit" not in done:
        done["credit"] = credit_columns(read_metrics(directory))
    return done


def write_results(work: Path, records: Sequence[Mapping]) -> None:
    temporary = work / (RESULTS_FILE + ".tmp")
    temporary.write_text("".join(json.dumps(record, sort_keys=True) + "\n" for record in records))
    os.replace(temporary, work / RESULTS_FILE)


class ResultsError(ValueError):
    """An unreadable results file: one line naming file:line."""


RECORD_FIELDS = ("contestant", "seed", "lr", "update", "success", "greedy", "credit")
# a run with --branching or --env-steps also records these (docs/arena.md, "Tree groups"): ``branching``
# (its roots, branches and fork rule, null for independent rollouts) and, per iteration, the env steps its
# training rollouts spent, and in a tree the forks made and the recorded steps two or more leaves share
TREE_FIELDS = ("branching", "env_steps", "forks", "shared_steps")


def read_results(work: Path) -> list[dict]:
    """``work/results.jsonl``, or ``results.jsonl.gz`` where only that is there (how the studies'
    results are committed, docs/results/arena/)."""
    path = work / RESULTS_FILE
    if not path.exists() and path.with_suffix(".jsonl.gz").exists():
        path = path.with_suffix(".jsonl.gz")
    if not path.exists():
        raise ResultsError(f"{path}: no such file (a finished arena writes it)")
    try:
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    except (OSError, EOFError, UnicodeDecodeError) as error:  # gzip.BadGzipFile is an OSError
        raise ResultsError(f"{path}: not readable ({error})") from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ResultsError(f"{path}:{number}: not JSON ({error.msg})") from None
        missing = [field for field in RECORD_FIELDS if not isinstance(record, dict) or field not in record]
        if missing:
            raise ResultsError(f"{path}:{number}: a run record needs {', '.join(missing)}")
        if not record["success"] or len(record["greedy"]) != len(record["success"]):
            raise ResultsError(f"{path}:{number}: success and greedy must be equally long, non-empty curves")
        records.append(record)
    if not records:
        raise ResultsError(f"{path}: holds no run")
    return records


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


def rate_label(lr: float, update: str) -> str:
    return f"{lr:g}" if update == "pg" else f"{lr:g} {update}"


def _p(value: float) -> str:
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def claims_table(title: str, rows: Sequence[Mapping], diagnostics: Mapping[str, Mapping], margin: float) -> str:
    """The claim family (stats.judge_claims) with each side's tie-correction rate (pooled) and zero-advantage share."""
    lines = [f"### {title}", "",
             f"Paired Δ AUC per seed over this setting's {len(rows)} claims, every interval at the Bonferroni level "
             f"(simultaneous), the verdict read off it; p Holm: the earlier design's adjusted p. Equivalence margin "
             f"±{margin:g} AUC, fixed before the runs. Exploratory where several settings are read together: "
             "`python -m experiments.arena family` corrects over all of them.", "",
             "| claim | seeds | Δ AUC [Bonferroni CI] | CI level | p | p Bonf. | p Holm | verdict | tie corr. A / B | zero adv. A / B |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        a, b = diagnostics.get(row["a"], {}), diagnostics.get(row["b"], {})
        lines.append(
            f"| {row['a']} > {row['b']} | {row['seeds']} | {row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}] "
            f"| {1 - row['level']:.4g} | {_p(row['p'])} | {_p(row['p_bonferroni'])} | {_p(row['p_holm'])} | **{row['verdict']}** "
            f"| {_share(a.get('pooled_tie_correction_rate'))} / {_share(b.get('pooled_tie_correction_rate'))} "
            f"| {_share(a.get('zero_advantage_fraction'))} / {_share(b.get('zero_advantage_fraction'))} |"
        )
    return "\n".join(lines) + "\n"


def selection_table(title: str, grid: Mapping[str, Mapping[str, Mapping]], chosen: Mapping[str, str]) -> str:
    """Mean AUC ± std on the selection seeds per contestant and (rate, update); bold: the chosen one."""
    options = list(dict.fromkeys(option for row in grid.values() for option in row))
    lines = [f"### {title}", "", "| contestant | " + " | ".join(options) + " |", "|---|" + "---|" * len(options)]
    for name, row in grid.items():
        cells = []
        for option in options:
            text = _fmt(row.get(option))
            cells.append(f"**{text}**" if option == chosen[name] else text)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


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
            f"| {name} | {rate_label(entry['lr'], entry.get('update', 'pg'))} | {_fmt(summary['last'])} | {_fmt(summary['auc'])} | {_fmt(summary['greedy_last'])} "
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

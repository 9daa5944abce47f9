"""Training curves of several runs side by side: one panel per metric, one line per run.

    python -m experiments.plot runs/milegpo runs/grpo --out curves.png \
        [--metrics success_rate,ppo/kl] [--smooth 5] [--labels MileGPO,GRPO]

Reads each run's ``metrics.jsonl`` (``milegpo_jax.train.logging``). A metric is a full name
(``eval_id/success_rate``) or a last component (``success_rate``), which selects every metric ending
in it (train and each eval split). Default: success rates, episode length, KL and entropy, where
logged, under the names the trainer logs them (``rollout/episode_length``, ``actor/kl``,
``actor/entropy``). Sparse metrics (evaluations every few iterations) are drawn with markers.
``--smooth N`` is a trailing moving average over N points of dense metrics. NaN and infinite values
are left out of the curves and counted (stderr and ``skipped_non_finite`` in the JSON line). A line that
is not a JSON object with an integer ``iteration`` is an error naming the file and line (a torn last
line, from a run killed mid-write, is skipped); every error is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed

import matplotlib.pyplot as plt

from milegpo_jax.train.logging import METRICS_FILE

# The trainer's names (milegpo_jax/train): rollout/*, actor/*, eval/<split>/*.
DEFAULT_METRICS = ("success_rate", "rollout/episode_length", "actor/kl", "actor/entropy")
_BOOKKEEPING = ("iteration", "wall_time")


def read_records(path: Path) -> list[tuple[int, dict]]:
    """(line number, record) of a metrics file; ValueError naming ``file:line`` for a bad line."""
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as error:
        raise ValueError(f"{path}: cannot read ({error.strerror or error})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    records = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"{path}:{number}: not UTF-8 text") from None
        except (ValueError, RecursionError):  # incl. integers past Python's 4,300-digit limit
            if number == len(lines):  # cut off mid-write by a kill
                continue
            raise ValueError(f"{path}:{number}: not JSON: {raw[:80].decode(errors='replace')!r}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object, got a JSON {type(record).__name__}")
        iteration = record.get("iteration")
        if isinstance(iteration, bool) or not isinstance(iteration, int):
            raise ValueError(f"{path}:{number}: 'iteration' must be an integer, got {iteration!r}")
        records.append((number, record))
    return records


def load_runs(
    directories: Sequence[str | Path], skipped: dict[str, int] | None = None
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """``{run: {metric: [(iteration, value), ...]}}`` (non-numeric and null values left out; NaN and
    infinite values left out and counted in ``skipped`` as ``{"run: metric": count}``)."""
    runs = {}
    for directory in directories:
        path = Path(directory)
        if not (path / METRICS_FILE).is_file():
            raise FileNotFoundError(f"{path}/{METRICS_FILE} does not exist (not a training work directory?)")
        series: dict[str, list[tuple[int, float]]] = {}
        label = path.resolve().name
        while label in runs:  # two runs with the same directory name
            label += "'"
        for _, record in read_records(path / METRICS_FILE):
            iteration = record["iteration"]
            for name, value in record.items():
                if name in _BOOKKEEPING or isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                value = float(value) if not isinstance(value, int) or abs(value) < 2**1023 else math.inf
                if not math.isfinite(value):
                    if skipped is not None:
                        skipped[f"{label}: {name}"] = skipped.get(f"{label}: {name}", 0) + 1
                    continue
                series.setdefault(name, []).append((iteration, value))
        for points in series.values():
            points.sort(key=lambda point: point[0])
        runs[label] = series
    return runs


def select_metrics(requested: Sequence[str], available: Sequence[str]) -> list[str]:
    """Expands short names; raises ValueError with close matches for a name nothing matches."""
    chosen: list[str] = []
    for name in requested:
        matches = [m for m in available if m == name or m.rsplit("/", 1)[-1] == name or m.endswith("/" + name)]
        if not matches:
            close = difflib.get_close_matches(name, list(available), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else f"; logged: {', '.join(sorted(available))}"
            raise ValueError(f"no run logged a metric {name!r}{hint}")
        chosen += [m for m in sorted(matches) if m not in chosen]
    return chosen


def default_metrics(available: Sequence[str]) -> list[str]:
    chosen: list[str] = []
    for name in DEFAULT_METRICS:
        try:
            chosen += [m for m in select_metrics([name], available) if m not in chosen]
        except ValueError:
            continue
    return chosen or sorted(available)[:6]


def _smoothed(values: list[float], window: int) -> list[float]:
    if window <= 1:
        return values
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot_runs(
    directories: Sequence[str | Path],
    out: str | Path,
    metrics: Sequence[str] | None = None,
    *,
    smooth: int = 1,
    labels: Sequence[str] | None = None,
    skipped: dict[str, int] | None = None,
) -> list[str]:
    """Writes the figure to ``out``; returns the metrics drawn (non-finite values counted in ``skipped``)."""
    if smooth < 1:
        raise ValueError(f"--smooth must be >= 1, got {smooth}")
    runs = load_runs(directories, skipped)
    if labels is not None:
        if len(labels) != len(runs):
            raise ValueError(f"{len(labels)} labels for {len(runs)} runs")
        runs = dict(zip(labels, runs.values()))
    available = sorted({name for series in runs.values() for name in series})
    if not available:
        raise ValueError("the runs logged no numeric metrics yet")
    chosen = select_metrics(metrics, available) if metrics else default_metrics(available)
    iterations_logged = {label: len({x for points in series.values() for x, _ in points}) for label, series in runs.items()}
    columns = min(3, len(chosen))
    rows = math.ceil(len(chosen) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.6 * rows), squeeze=False)
    for panel, name in zip(axes.flat, chosen):
        for label, series in runs.items():
            points = series.get(name)
            if not points:
                continue
            xs = [x for x, _ in points]
            ys = [y for _, y in points]
            sparse = len(points) < 0.5 * iterations_logged[label]  # e.g. validation every few iterations
            if sparse:
                panel.plot(xs, ys, marker="o", markersize=3, label=label)
            else:
                panel.plot(xs, _smoothed(ys, smooth), label=label)
        panel.set_title(name, fontsize=10)
        panel.set_xlabel("iteration")
        panel.grid(alpha=0.3)
    for panel in list(axes.flat)[len(chosen) :]:
        panel.set_visible(False)
    handles, names = axes.flat[0].get_legend_handles_labels()
    if handles:
        figure.legend(handles, names, loc="upper center", ncol=min(len(names), 4), frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 0.93 if handles else 1))
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(out, dpi=120)
    except OSError as error:
        raise ValueError(f"--out {out}: cannot write ({error.strerror or error})") from None
    finally:
        plt.close(figure)
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("workdirs", nargs="+", help="training work directories (each with metrics.jsonl)")
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--metrics", type=lambda s: [m.strip() for m in s.split(",") if m.strip()])
    parser.add_argument("--smooth", type=int, default=1, help="moving-average window for dense metrics")
    parser.add_argument("--labels", type=lambda s: [m.strip() for m in s.split(",")], help="one per run")
    args = parser.parse_args(argv)
    skipped: dict[str, int] = {}
    try:
        drawn = plot_runs(args.workdirs, args.out, args.metrics, smooth=args.smooth, labels=args.labels, skipped=skipped)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if skipped:
        listed = ", ".join(f"{name} ({count})" for name, count in sorted(skipped.items()))
        print(f"warning: non-finite values left out of the curves: {listed}", file=sys.stderr)
    print(json.dumps({"plot": str(args.out), "runs": len(args.workdirs), "metrics": drawn, "skipped_non_finite": skipped}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

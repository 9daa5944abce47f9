"""``python -m experiments.llm_credit summarize [RESULTS] [--out DIR]``: every table and curve of the
study again from its committed records alone (docs/results/llm-credit.md): ``summary.md``,
``summary.json`` and ``curves.png`` in ``--out`` (default: RESULTS). Bad input -- a RESULTS that is not
a directory or holds no record, a record or the metrics log beside it that is not what the study
writes -- is one line naming the file, exit 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from pathlib import Path

from experiments.llm_credit import analysis, design, records, report
from milegpo_jax.train.logging import read_metrics

DEFAULT_RESULTS = "docs/results/llm-credit"


def load(results: Path) -> tuple[dict, dict, dict]:
    """The warm-start builds by weights digest, the finished runs by (arm, seed), and each run's
    policy steps, read from the metrics log beside its record."""
    builds = records.load_warm_builds(results)
    runs, steps = {}, {}
    for arm, seed in sorted(records.finished_runs(results)):
        path = records.run_dir(results, arm, seed) / "record.json"
        record = records.load_run(path)
        if (record["arm"], record["seed"]) != (arm, seed):
            raise records.RecordError(f"{path}: names {record['arm']} seed {record['seed']}, not its directory's")
        runs[(arm, seed)] = record
        metrics = path.with_name("metrics.jsonl")
        if not metrics.is_file():
            raise records.RecordError(f"{metrics}: missing (the study writes it beside every record)")
        steps[(arm, seed)] = analysis.policy_steps(read_metrics(metrics))  # a bad line: ValueError naming it
    return builds, runs, steps


def curves_png(summary: dict) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for arm, curve in summary["curves"].items():
        axis.plot(range(1, len(curve) + 1), curve, marker="o", label=arm)
    axis.set_xlabel("iteration")
    axis.set_ylabel("training success (mean over seeds)")
    axis.set_ylim(0, 1)
    axis.legend()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.llm_credit summarize", description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="?", default=DEFAULT_RESULTS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    results = Path(args.results)
    out = Path(args.out) if args.out else results
    try:
        if not results.is_dir():
            raise records.RecordError(f"{results}: not a directory")
        builds, runs, steps = load(results)
        if not builds and not runs:
            raise records.RecordError(f"{results}: holds no record (warm/seed*.json, runs/*/record.json)")
        arms = [arm for arm in design.ARMS if any(a == arm for a, _ in runs)]
        summary = analysis.summary(builds, runs, arms, design.REFERENCES, steps)
        summary["verdicts"] = analysis.verdicts(summary, design.PRIMARY_COMPARISONS, design.PRIMARY_LIST,
                                                design.VERDICT_ALPHA, len(design.DEFAULT_SEEDS), design.GOAL_IMPROVEMENT)
        summary["resolution"] = analysis.resolution(summary, design.PRIMARY_COMPARISONS, design.PRIMARY_LIST,
                                                    design.VERDICT_ALPHA, design.GOAL_IMPROVEMENT)
        if out.exists() and not out.is_dir():
            raise records.RecordError(f"--out {out}: not a directory")
    except (records.RecordError, ValueError) as error:
        print(f"experiments.llm_credit summarize: {error}", file=sys.stderr)
        return 2
    files = {"summary.md": report.markdown(summary).encode(),
             "summary.json": (json.dumps(summary, indent=1, sort_keys=True, default=str) + "\n").encode(),
             "curves.png": curves_png(summary)}
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():  # each file whole: a temporary sibling renamed into place
        tmp = out / f".{name}.tmp-{os.getpid()}"
        tmp.write_bytes(data)
        os.replace(tmp, out / name)
    print(json.dumps({"job": "llm-credit-summarize", "arms": arms, "runs": len(runs), "warm_starts": len(builds),
                      "out": str(out)}))
    return 0

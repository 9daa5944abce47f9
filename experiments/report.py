"""Paper-style result tables (Table 1/2/3) from training work directories.

    python -m experiments.report runs/ablation-alfworld [runs/ablation-webshop ...] [--out results/tables]

Each DIR is a sweep root (``python -m experiments.sweep --workdir-root DIR``: one sub-directory per
run, named ``<variant>-seed<N>``) or a single run directory; every run's ``metrics.jsonl`` is read and
its last record holding an evaluation (``eval/<split>/...``) is used. Tables per DIR, every figure as
mean ± std over seeds (experiments/paper_tables.py): success per task type, ID and OOD success with
their gap, and the ablation rows with their difference to full MileGPO. Markdown goes to stdout (and
``OUT.md`` with ``--out``), the JSON to ``OUT.json``; the last line printed is one JSON summary.
Bad input (no such directory, no run in it, a run without an evaluation) prints one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from experiments import paper_tables
from milegpo_jax.train.logging import METRICS_FILE, read_metrics

_RUN_NAME = re.compile(r"^(?P<method>.+)-seed(?P<seed>\d+)$")
_EVAL_PREFIX = "eval/"


class ReportInputError(ValueError):
    pass


def run_directories(root: Path) -> list[Path]:
    if not root.is_dir():
        raise ReportInputError(f"{root}: no such directory")
    if (root / METRICS_FILE).is_file():
        return [root]
    runs = sorted(child for child in root.iterdir() if (child / METRICS_FILE).is_file())
    if not runs:
        raise ReportInputError(f"{root}: holds no run (no {METRICS_FILE} in it or its sub-directories)")
    return runs


def load_run(directory: Path, index: int) -> paper_tables.RunResult:
    match = _RUN_NAME.match(directory.name)
    method, seed = (match["method"], int(match["seed"])) if match else (directory.name, index)
    evaluations = [record for record in read_metrics(directory) if any(key.startswith(_EVAL_PREFIX) for key in record)]
    if not evaluations:
        raise ReportInputError(f"{directory / METRICS_FILE}: no evaluation record (eval/...) in it")
    last = max(evaluations, key=lambda record: record["iteration"])
    evaluation = {
        key[len(_EVAL_PREFIX):]: float(value)
        for key, value in last.items()
        if key.startswith(_EVAL_PREFIX) and isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    return paper_tables.RunResult(method, seed, int(last["iteration"]), evaluation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="+", metavar="DIR")
    parser.add_argument("--out", default=None, help="write OUT.md and OUT.json")
    args = parser.parse_args(argv)
    try:
        blocks = {}
        for root in map(Path, args.dirs):
            runs = [load_run(directory, index) for index, directory in enumerate(run_directories(root))]
            if root.name in blocks:
                raise ReportInputError(f"{root}: two DIRs share the name {root.name!r}")
            blocks[root.name] = {
                "runs": [{"method": r.method, "seed": r.seed, "iteration": r.iteration} for r in runs],
                "table1": paper_tables.table1(runs),
                "table2": paper_tables.table2(runs),
                "table3": paper_tables.table3(runs),
            }
    except (ReportInputError, OSError) as error:
        print(f"experiments.report: {error}", file=sys.stderr)
        return 2
    text = "\n".join(paper_tables.markdown(name, block) for name, block in blocks.items())
    print(text)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(text)
        out.with_suffix(".json").write_text(json.dumps(blocks, indent=1) + "\n")
    summary = {
        name: {method: row["id_success"]["mean"] if row["id_success"] else None for method, row in block["table2"].items()}
        for name, block in blocks.items()
    }
    print(json.dumps({"job": "report", "id_success": summary, "runs": sum(len(b["runs"]) for b in blocks.values())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Paper-style result tables (Table 1/2/3) from training work directories.

    python -m experiments.report runs/ablation-alfworld [runs/ablation-webshop ...] [--out results/tables]

Each DIR is a sweep root (``python -m experiments.sweep --workdir-root DIR``: one sub-directory per
run, named ``<variant>-seed<N>``) or a single run directory; every run's ``metrics.jsonl`` is read and
its last record holding an evaluation (``eval/<split>/...``) is used. Tables per DIR, every figure as
mean ± std over seeds (experiments/paper_tables.py): success per task type, ID and OOD success with
their gap, and the ablation rows with their difference to full MileGPO. Markdown goes to stdout (and
``OUT.md`` with ``--out``), the JSON to ``OUT.json``; the last line printed is one JSON summary.
Bad input (no such directory, no run in it, a run without an evaluation, a ``metrics.jsonl`` line that
is not UTF-8 or not a JSON object, an iteration that is not an integer, an evaluation value that is
not a number, an ``--out`` that cannot be written) prints one line (``file:line`` where there is one),
exit 2, writing nothing. Evaluation values that are not finite (NaN, infinity, or null, which the
metrics logger writes for them) are skipped and counted (``non_finite_skipped``); every JSON out is
strict JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path

from experiments import paper_tables
from milegpo_jax.train.logging import METRICS_FILE, read_metrics_lines

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


def load_run(directory: Path, index: int) -> tuple[paper_tables.RunResult, int]:
    """The run's last evaluation, and how many of its values were skipped as non-finite."""
    match = _RUN_NAME.match(directory.name)
    method, seed = (match["method"], int(match["seed"])) if match else (directory.name, index)
    path = directory / METRICS_FILE
    try:
        lines = read_metrics_lines(path)
    except ValueError as error:  # not UTF-8, not JSON, not an object: the message names file:line
        raise ReportInputError(str(error)) from None
    evaluations = [(number, record) for number, record in lines if any(key.startswith(_EVAL_PREFIX) for key in record)]
    if not evaluations:
        raise ReportInputError(f"{path}: no evaluation record (eval/...) in it")
    for number, record in evaluations:
        iteration = record.get("iteration")
        if isinstance(iteration, bool) or not isinstance(iteration, int):
            raise ReportInputError(f"{path}:{number}: iteration is {iteration!r}, not an integer")
    number, last = max(evaluations, key=lambda item: item[1]["iteration"])
    evaluation, skipped = {}, 0
    for key, value in last.items():
        if not key.startswith(_EVAL_PREFIX):
            continue
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            skipped += 1  # the logger writes a non-finite figure as null; a hand-made file may hold NaN
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            evaluation[key[len(_EVAL_PREFIX):]] = float(value)
        else:
            raise ReportInputError(f"{path}:{number}: {key} is {value!r}, not a number")
    return paper_tables.RunResult(method, seed, int(last["iteration"]), evaluation), skipped


def _finite(value):
    """``value`` with every non-finite float made None (means of huge finite figures can overflow)."""
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _prepare_out(out: str) -> Path:
    """The ``--out`` stem, its folder created and checked writable before any work."""
    path = Path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ReportInputError(f"--out {out}: cannot create folder {path.parent} ({error.strerror or error})") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ReportInputError(f"--out {out}: folder {path.parent} is not writable")
    for target in (path.with_suffix(".md"), path.with_suffix(".json")):
        if target.is_dir():
            raise ReportInputError(f"--out {out}: {target} is a directory")
    return path


def _write_all(files: dict[Path, str]) -> None:
    """Writes every file via a temporary one in its folder; on a failure no target changes."""
    temporaries = {}
    try:
        for target, text in files.items():
            handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            temporaries[target] = temporary
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
        for target, temporary in temporaries.items():
            os.replace(temporary, target)
    finally:
        for temporary in temporaries.values():
            if os.path.exists(temporary):
                os.unlink(temporary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="+", metavar="DIR")
    parser.add_argument("--out", default=None, help="write OUT.md and OUT.json")
    args = parser.parse_args(argv)
    skipped = 0
    try:
        out = _prepare_out(args.out) if args.out else None
        blocks = {}
        for root in map(Path, args.dirs):
            loaded = [load_run(directory, index) for index, directory in enumerate(run_directories(root))]
            runs = [run for run, _ in loaded]
            skipped += sum(count for _, count in loaded)
            if root.name in blocks:
                raise ReportInputError(f"{root}: two DIRs share the name {root.name!r}")
            blocks[root.name] = _finite({
                "runs": [{"method": r.method, "seed": r.seed, "iteration": r.iteration, "non_finite_skipped": count}
                         for r, count in loaded],
                "table1": paper_tables.table1(runs),
                "table2": paper_tables.table2(runs),
                "table3": paper_tables.table3(runs),
            })
        text = "\n".join(paper_tables.markdown(name, block) for name, block in blocks.items())
        if out is not None:
            try:
                _write_all({out.with_suffix(".md"): text, out.with_suffix(".json"): json.dumps(blocks, indent=1, allow_nan=False) + "\n"})
            except OSError as error:
                raise ReportInputError(f"--out {args.out}: cannot write ({error.strerror or error})") from None
    except (ReportInputError, OSError) as error:
        print(f"experiments.report: {error}", file=sys.stderr)
        return 2
    print(text)
    summary = {
        name: {method: row["id_success"]["mean"] if row["id_success"] else None for method, row in block["table2"].items()}
        for name, block in blocks.items()
    }
    print(json.dumps({"job": "report", "id_success": summary, "runs": sum(len(b["runs"]) for b in blocks.values()),
                      "non_finite_skipped": skipped}, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The study's committed records (I/O): where they live, how they are written whole or not at all,
and how they are read back with every field checked (docs/results/llm-credit.md, "Records").

    RESULTS/study.json                  the recipe and overrides every run shares (a rerun with others is refused)
    RESULTS/warm/seed<S>-<D>.json       a build of the seed's warm start (D: its weights digest's first 12
                                        hex digits), its held-out evaluation and the machine that built it
    RESULTS/runs/<arm>-seed<S>/record.json   a finished run (its presence marks it finished)
    RESULTS/runs/<arm>-seed<S>/metrics.jsonl the trainer's log of that run, as it wrote it

A record is written to a temporary sibling and renamed into place, so a kill leaves it or nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
from pathlib import Path
from typing import Any

STUDY_FILE = "study.json"


class RecordError(ValueError):
    """A record that is missing a field or is not what the study writes (one line naming the file)."""


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise RecordError(f"{path}: not a readable UTF-8 JSON file ({error})") from None


def warm_path(results: Path, seed: int, digest: str) -> Path:
    return results / "warm" / f"seed{seed}-{digest[:12]}.json"


def load_warm_builds(results: Path) -> dict[str, dict[str, Any]]:
    """Every recorded warm-start build, by its full weights digest; a file whose name does not match
    its record (seed, digest) is refused."""
    builds = {}
    for path in sorted((results / "warm").glob("seed*.json")):
        record = load_warm(path)
        if path != warm_path(results, record["seed"], record["warm_start_sha256"]):
            raise RecordError(f"{path}: holds seed {record['seed']}'s build {record['warm_start_sha256'][:12]}, "
                              "not what its name says")
        builds[record["warm_start_sha256"]] = record
    return builds


def machine() -> str:
    """The CPU that ran a build or a run: its model name and the widest vector extension XLA:CPU can
    use. Another instruction set rounds sums differently (docs/reproducibility.md)."""
    model, flags = "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown CPU":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    isa = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX")) if flag in flags),
               platform.machine())
    return f"{model} ({isa}, {os.cpu_count()} cores)"


def run_dir(results: Path, arm: str, seed: int) -> Path:
    return results / "runs" / f"{arm}-seed{seed}"


def write_run(results: Path, record: dict[str, Any], metrics_file: Path) -> None:
    """The run's metrics first, its record last: a record always has its metrics beside it."""
    directory = run_dir(results, record["arm"], record["seed"])
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".metrics.jsonl.tmp-{os.getpid()}"
    shutil.copyfile(metrics_file, tmp)
    os.replace(tmp, directory / "metrics.jsonl")
    write_json(directory / "record.json", record)


def finished_runs(results: Path) -> set[tuple[str, int]]:
    runs = results / "runs"
    found = set()
    if runs.is_dir():
        for child in runs.iterdir():
            arm, _, seed = child.name.rpartition("-seed")
            if arm and seed.isdigit() and (child / "record.json").is_file():
                found.add((arm, int(seed)))
    return found


RUN_FIELDS = {"arm": str, "seed": int, "training_success": list, "evaluations": list, "credit": list,
              "time_s": (int, float), "peak_rss_gb": (int, float, type(None)), "warm_start_sha256": str}
WARM_FIELDS = {"seed": int, "evaluation": dict, "warm_start_sha256": str}
EVALUATION_FIELDS = {"iteration": int, "figures": dict, "outcomes": dict}


def _check_fields(path: Path, record: Any, fields: dict[str, Any], what: str) -> None:
    if not isinstance(record, dict):
        raise RecordError(f"{path}: {what} is not a JSON object")
    for name, kind in fields.items():
        if name not in record or isinstance(record[name], bool) or not isinstance(record[name], kind):
            raise RecordError(f"{path}: {what} lacks {name!r} or it is not what the study writes")


def check_evaluation(path: Path, evaluation: Any) -> None:
    _check_fields(path, evaluation, EVALUATION_FIELDS, "an evaluation")
    for key, text in evaluation["outcomes"].items():
        if not isinstance(text, str) or not text or set(text) - set("10x"):
            raise RecordError(f"{path}: outcomes {key!r} is not a string of 1, 0 and x")


def load_run(path: Path) -> dict[str, Any]:
    record = read_json(path)
    _check_fields(path, record, RUN_FIELDS, "a run record")
    for evaluation in record["evaluations"]:
        check_evaluation(path, evaluation)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in record["training_success"]):
        raise RecordError(f"{path}: training_success holds something other than numbers")
    return record


def load_warm(path: Path) -> dict[str, Any]:
    record = read_json(path)
    _check_fields(path, record, WARM_FIELDS, "a warm-start record")
    check_evaluation(path, record["evaluation"])
    return record


def weights_digest(directory: Path) -> str:
    """sha256 over the warm start's weight files (name and bytes, in name order): which build of a
    seed's warm start a run started from, and which evaluation it pairs with."""
    digest = hashlib.sha256()
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise RecordError(f"{directory}: no weight files (*.safetensors)")
    for file in files:
        digest.update(file.name.encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


def share_directory(source: Path, target: Path) -> None:
    """``target`` becomes a copy of ``source`` made of hard links where the file system allows (the
    weights are read, never written, by a run), whole or not at all."""
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, tmp, copy_function=link)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)

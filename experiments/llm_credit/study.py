"""``python -m experiments.llm_credit run``: the LLM credit study, resumable piece by piece.

    python -m experiments.llm_credit run [--arms grpo,gigpo,milegpo] [--seeds 0-2] [--max-runs N]
        [--results docs/results/llm-credit] [--work runs/llm-credit] [--config RECIPE] [--config.a.b=v ...]

Per seed, the warm start is built and evaluated once (``WORK/warm-seed<S>``, a run of no iteration)
and every arm's run starts from a hard-linked copy of it; each arm run is its own
``python -m experiments.train`` process in ``WORK/<arm>-seed<S>`` (orbax checkpoints: a killed run
resumes where it stopped), so its peak memory is its own. A finished run's record goes to RESULTS
(commit it); a later invocation, on this machine or a fresh checkout, skips every run that has one.
On a fresh checkout each seed's warm start is rebuilt first; a build whose weights digest has a record
is not evaluated again. A machine with another instruction set builds other bits (XLA:CPU rounds sums
differently there), so a seed can have several recorded builds, each evaluated once, and every run
records the build it started from and pairs with that build's evaluation. ``--max-runs`` stops after
that many arm runs.
Bad input is one line naming the flag, exit 2, with nothing written. docs/results/llm-credit.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from experiments.llm_credit import analysis, design, records
from milegpo_jax.config import ConfigError, split_config_flags

WARM_DIR = "warm_start"  # the trainer's (milegpo_jax/train/trainer.py)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    overrides, rest = split_config_flags(argv)
    parser = argparse.ArgumentParser(prog="python -m experiments.llm_credit run", description=__doc__.split("\n")[0])
    parser.add_argument("--arms", default=",".join(design.DEFAULT_ARMS))
    parser.add_argument("--seeds", default="0-2")
    parser.add_argument("--results", default="docs/results/llm-credit")
    parser.add_argument("--work", default="runs/llm-credit")
    parser.add_argument("--config", default=design.RECIPE)
    parser.add_argument("--max-runs", type=int, default=None, help="arm runs to finish in this invocation")
    return parser.parse_args(rest), overrides


def _validated(args: argparse.Namespace, overrides: list[str]) -> tuple[tuple[str, ...], tuple[int, ...], dict]:
    """Everything checked before anything is written (DesignError / ConfigError: one line)."""
    from experiments.train import build_config

    arms, seeds = design.parse_arms(args.arms), design.parse_seeds(args.seeds)
    if args.max_runs is not None and args.max_runs < 1:
        raise design.DesignError(f"--max-runs {args.max_runs}: must be >= 1")
    for flag, path in (("--results", Path(args.results)), ("--work", Path(args.work))):
        if path.exists() and not path.is_dir():
            raise design.DesignError(f"{flag} {path}: not a directory")
    for arm in arms:  # every arm's config builds (a bad --config.* flag names itself here)
        build_config(args.config, [*overrides, *design.arm_overrides(arm, seeds[0])]).check_runnable()
    settings = {"recipe": args.config, "overrides": overrides}
    study = Path(args.results) / records.STUDY_FILE
    if study.exists():
        try:
            stored = records.read_json(study)
        except records.RecordError as error:
            raise design.DesignError(str(error)) from None
        if {k: stored.get(k) for k in settings} != settings:
            raise design.DesignError(f"--config/--config.*: {study} holds another study ({stored}); use another --results")
    return arms, seeds, settings


def _train(args, overrides: list[str], workdir: Path) -> tuple[int, float | None, float]:
    """One ``experiments.train`` process: its exit status, peak RSS in GB and wall seconds."""
    command = [sys.executable, "-m", "experiments.train", "--config", args.config, "--workdir", str(workdir),
               *(f"--config.{o}" for o in overrides)]
    started = time.time()
    process = subprocess.Popen(command)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    peak = usage.ru_maxrss / 2**20 if usage.ru_maxrss else None  # kilobytes on Linux
    return process.returncode, peak, time.time() - started


def _metrics(workdir: Path) -> list[dict]:
    from milegpo_jax.train.logging import read_metrics

    return read_metrics(workdir / "metrics.jsonl")


def ensure_warm(args, overrides: list[str], seed: int) -> tuple[Path, str]:
    """The seed's warm start in WORK and its weights digest: built once on this machine, then evaluated
    and recorded unless a record of this build exists (``RESULTS/warm/seed<S>-<digest>.json``)."""
    workdir = Path(args.work) / f"warm-seed{seed}"
    results = Path(args.results)
    walls, peaks = [], []
    if not (workdir / WARM_DIR / "warm_start_inputs.json").exists():
        status, peak, wall = _train(args, [*overrides, *design.warm_overrides(seed, evaluate=False)], workdir)
        if status != 0:
            raise RuntimeError(f"the warm start of seed {seed} failed (exit status {status}); see its output above")
        walls.append(wall)
        peaks.append(peak)
    digest = records.weights_digest(workdir / WARM_DIR)
    record_path = records.warm_path(results, seed, digest)
    if record_path.exists():
        return workdir / WARM_DIR, digest
    status, peak, wall = _train(args, [*overrides, *design.warm_overrides(seed, evaluate=True)], workdir)
    if status != 0:
        raise RuntimeError(f"the evaluation of seed {seed}'s warm start failed (exit status {status}); rerun to retry it")
    walls.append(wall)
    peaks.append(peak)
    evaluation = analysis.evaluations(_metrics(workdir))[-1]  # a retried evaluation logs again: the last
    known = [p for p in peaks if p is not None]
    records.write_json(record_path, {"seed": seed, "evaluation": evaluation, "warm_start_sha256": digest,
                                     "machine": records.machine(), "wall_s": round(sum(walls), 1),
                                     "peak_rss_gb": max(known) if known else None})
    return workdir / WARM_DIR, digest


def run_arm(args, overrides: list[str], arm: str, seed: int, warm: Path, digest: str) -> dict:
    workdir = Path(args.work) / f"{arm}-seed{seed}"
    workdir.mkdir(parents=True, exist_ok=True)
    if not (workdir / WARM_DIR / "warm_start_inputs.json").exists():
        records.share_directory(warm, workdir / WARM_DIR)
    status, peak, wall = _train(args, [*overrides, *design.arm_overrides(arm, seed)], workdir)
    if status != 0:
        raise RuntimeError(f"{arm} seed {seed} failed (exit status {status}); rerun to resume it")
    record = analysis.run_record(_metrics(workdir), arm=arm, seed=seed)
    record.update(peak_rss_gb=peak, wall_s_last_piece=round(wall, 1), warm_start_sha256=digest,
                  machine=records.machine())
    records.write_run(Path(args.results), record, workdir / "metrics.jsonl")
    return record


def main(argv: list[str] | None = None) -> int:
    args, overrides = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        arms, seeds, settings = _validated(args, overrides)
    except (design.DesignError, ConfigError) as error:
        print(f"experiments.llm_credit run: {error}", file=sys.stderr)
        return 2
    results = Path(args.results)
    if not (results / records.STUDY_FILE).exists():
        records.write_json(results / records.STUDY_FILE, settings)
    todo = design.pending(arms, seeds, records.finished_runs(results))
    if args.max_runs is not None:
        todo = todo[: args.max_runs]
    finished = []
    try:
        for arm, seed in todo:
            warm, digest = ensure_warm(args, overrides, seed)
            record = run_arm(args, overrides, arm, seed, warm, digest)
            finished.append(f"{arm}-seed{seed}")
            print(json.dumps({"job": "llm-credit-run", "arm": arm, "seed": seed, "time_s": record["time_s"],
                              "peak_rss_gb": record["peak_rss_gb"]}), flush=True)
    except RuntimeError as error:
        print(f"experiments.llm_credit run: {error}", file=sys.stderr)
        return 1
    left = design.pending(arms, seeds, records.finished_runs(results))
    print(json.dumps({"job": "llm-credit-study", "finished": finished, "left": [f"{a}-seed{s}" for a, s in left],
                      "results": str(results)}))
    return 0

"""Runs a sweep: one training run per override dict of a sweep file, each in its own work directory.

    python -m experiments.sweep --sweep experiments/sweeps/ablation.py \
        --config experiments/configs/alfworld.py --workdir-root runs/ablation [--seeds 0,1,2] \
        [--dry-run] [--config.a.b=value ...]

``--config.*`` flags apply to every run (e.g. the model path); a key the sweep itself varies may not
be given. Every run's config is built and validated before anything starts. ``--dry-run`` prints one
``python -m experiments.train ...`` command per run on stdout (to hand to a cluster scheduler);
otherwise the runs go one after another on this machine, each as ``WORKDIR_ROOT/<run.name>``, and a
failed run does not stop the others. A run whose work directory already holds checkpoints resumes, so
re-launching a sweep continues it. A JSON summary ends the output (on stderr for a dry run); the exit
status is 1 if any run failed.
"""

from __future__ import annotations

import argparse
import inspect
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from milegpo_jax.config import (
    ConfigError,
    apply_overrides,
    format_override,
    load_config,
    load_config_file,
    load_file_function,
    split_config_flags,
)


def load_sweep(path: str, seeds: Sequence[int] | None) -> list[dict[str, Any]]:
    get_sweep = load_file_function(path, "get_sweep", "sweep file")
    if seeds is not None:
        if "seeds" not in inspect.signature(get_sweep).parameters:
            raise ConfigError(f"{path}: get_sweep() takes no seeds; drop --seeds")
        runs = get_sweep(seeds=list(seeds))
    else:
        runs = get_sweep()
    if not isinstance(runs, list) or not all(isinstance(r, Mapping) for r in runs) or not runs:
        raise ConfigError(f"{path}: get_sweep() must return a non-empty list of override dicts")
    return [dict(r) for r in runs]


def run_names(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    names = [str(r.get("run.name") or f"run{i:03d}") for i, r in enumerate(runs)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"sweep runs share work directory names {duplicates}; give each a distinct run.name")
    return names


def build_commands(
    config_spec: str,
    runs: Sequence[Mapping[str, Any]],
    workdir_root: Path,
    common: Sequence[str],
    python: str,
    entry_module: str,
) -> list[tuple[str, Path, list[str]]]:
    """``(name, workdir, argv)`` per run, after validating each run's config."""
    base = load_config_file(config_spec)
    common_keys = {item.partition("=")[0].strip() for item in common}
    base = apply_overrides(base, list(common))
    commands = []
    for name, overrides in zip(run_names(runs), runs):
        clash = sorted(common_keys & set(overrides))
        if clash:
            raise ConfigError(f"--config.{clash[0]} is varied by the sweep; leave it to the sweep")
        try:
            load_config(apply_overrides(base, overrides))
        except ConfigError as error:
            raise ConfigError(f"sweep run {name!r}: {error}") from None
        workdir = workdir_root / name
        flags = [f"--config.{item}" for item in common]
        flags += [f"--config.{format_override(key, value)}" for key, value in overrides.items()]
        argv = [python, "-m", entry_module, "--config", config_spec, "--workdir", str(workdir), *flags]
        commands.append((name, workdir, argv))
    return commands


def main(argv: Sequence[str] | None = None) -> int:
    overrides, rest = split_config_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m experiments.sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", required=True, help="sweep file defining get_sweep(seeds=...)")
    parser.add_argument("--config", required=True, help="config file (path.py or path.py:arg)")
    parser.add_argument("--workdir-root", required=True, type=Path, help="one work directory per run under it")
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",") if x.strip()], help="e.g. 0,1,2")
    parser.add_argument("--dry-run", action="store_true", help="print one command per run and exit")
    parser.add_argument("--entry-module", default="experiments.train", help="module each run executes")
    args = parser.parse_args(rest)
    try:
        runs = load_sweep(args.sweep, args.seeds)
        python = "python" if args.dry_run else sys.executable
        commands = build_commands(args.config, runs, args.workdir_root, overrides, python, args.entry_module)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.dry_run:
        for _, _, command in commands:
            print(shlex.join(command))
        # stdout holds only the commands (to pipe to a scheduler); the summary goes to stderr
        print(json.dumps({"sweep": Path(args.sweep).stem, "runs": len(commands), "dry_run": True}), file=sys.stderr)
        return 0
    failed = []
    started = time.time()
    for index, (name, workdir, command) in enumerate(commands, 1):
        print(f"[sweep {index}/{len(commands)}] {name}: {shlex.join(command)}", flush=True)
        workdir.mkdir(parents=True, exist_ok=True)
        code = subprocess.run(command, check=False).returncode
        if code != 0:
            print(f"[sweep] {name} exited with {code}", file=sys.stderr, flush=True)
            failed.append(name)
    summary = {
        "sweep": Path(args.sweep).stem,
        "runs": len(commands),
        "failed": failed,
        "wall_s": round(time.time() - started, 1),
    }
    print(json.dumps(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Training entry point.

    python -m experiments.train --config experiments/configs/NAME.py --workdir DIR [--config.a.b=value ...]

A work directory that already holds checkpoints resumes from the newest readable one. The last line
printed is one JSON object with the run's figures (docs/architecture.md §5).

Multi-host: run the same command on every host with ``--config.distributed.*`` set (or
``--config.distributed.auto=true`` on a Cloud TPU pod slice / SLURM); the work directory must be on
storage every host sees. See the README's multi-host recipe.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from milegpo_jax.config import ConfigError, TrainConfig, apply_overrides, load_config, load_config_file, split_config_flags


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    overrides, rest = split_config_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="experiments/configs/NAME.py[:arg]")
    parser.add_argument("--workdir", required=True, help="run directory (resumes when it holds checkpoints)")
    return parser.parse_args(rest), overrides


def build_config(config_path: str, overrides: list[str]) -> TrainConfig:
    return load_config(apply_overrides(load_config_file(config_path), overrides))


def run_trainer(config: TrainConfig, workdir) -> dict:
    """``Trainer(config, workdir).run()``; a work directory that cannot be written, a config the policy
    refuses, a resumed run's warm start without its tokenizer files or a checkpoint written under
    another config exits 2, and a checkpoint that cannot be saved (disk full) exits 1, each with one line."""
    from milegpo_jax.models.tokenizer import TokenizerFilesError
    from milegpo_jax.train.checkpoint import CheckpointWriteError, ConfigMismatchError
    from milegpo_jax.train.trainer import Trainer, WorkdirError

    try:
        return Trainer(config, workdir).run()
    # the run cannot start (ConfigError: a value only the loaded policy can check, optim.trainable_layers;
    # ConfigMismatchError: resuming under a changed config, refused before anything is written)
    except (WorkdirError, TokenizerFilesError, ConfigError, ConfigMismatchError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except CheckpointWriteError as error:  # the run stops at the failing save
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)


def main(argv: list[str] | None = None) -> dict:
    args, overrides = parse_args(argv)
    try:
        config = build_config(args.config, overrides)
        config.check_runnable()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    from milegpo_jax import multihost

    if config.distributed.enabled:  # before anything else touches JAX
        d = config.distributed
        multihost.initialize(d.coordinator_address, d.num_processes, d.process_id, auto=d.auto)
    start = time.time()
    summary = run_trainer(config, args.workdir)
    summary["wall_s"] = round(time.time() - start, 1)
    if multihost.is_lead():
        print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()

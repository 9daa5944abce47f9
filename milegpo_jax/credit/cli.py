"""Offline credit replay of stored rollouts (docs/credit-implementation.md §3).

    python -m milegpo_jax.credit --input rollouts.json --estimator milegpo [--recipe webshop]
        [--stage rcs] [--set key=value ...] [--output adv.json]

Bad input (malformed JSON, missing keys, wrong types, empty groups, non-finite rewards, unknown
estimator/recipe/option, a field the estimator needs but the rollouts lack) prints one line naming the
offending place and exits with status 2, writing nothing. So do files that are not UTF-8, larger than
``--max-input-bytes``, nested too deeply, rewards beyond what the working precision can sum
(``milegpo_jax.credit.limits``), a batch whose estimated memory exceeds ``--max-memory-gb``, and an
``--output`` in a folder that does not exist or cannot be written (checked before computing).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from milegpo_jax.credit import registry
from milegpo_jax.credit.columns import check_columns_for, columns_from_groups
from milegpo_jax.credit.config import CreditConfigError, make_credit_config
from milegpo_jax.credit.input_file import DEFAULT_MAX_INPUT_BYTES, read_rollout_file
from milegpo_jax.credit.limits import DEFAULT_MAX_MEMORY_BYTES, CreditLimitError, check_memory, check_reward_range
from milegpo_jax.credit.rollouts import RolloutFormatError

EXIT_BAD_INPUT = 2


class UsageError(Exception):
    pass


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m milegpo_jax.credit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="rollout JSON file")
    parser.add_argument("--estimator", required=True, help=" | ".join(registry.NAMES))
    parser.add_argument("--recipe", help=f"{' | '.join(registry.RECIPES)} (default {registry.DEFAULT_RECIPE})")
    parser.add_argument(
        "--stage", help=f"{'/'.join(registry.staged())} ablation stage: {' | '.join(registry.STAGES)} (default full)"
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a credit option")
    parser.add_argument("--output", help="write the result JSON here (default: stdout)")
    add_limit_options(parser)
    return parser


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    """The input-size and memory limits (shared with ``experiments.replay``)."""
    parser.add_argument("--max-input-bytes", type=int, default=DEFAULT_MAX_INPUT_BYTES,
                        help=f"refuse a larger input file (default {DEFAULT_MAX_INPUT_BYTES})")
    parser.add_argument("--max-memory-gb", type=float, default=DEFAULT_MAX_MEMORY_BYTES / 1024**3,
                        help="refuse a batch estimated to need more memory (default %(default)s)")


def check_limit_options(args: argparse.Namespace) -> None:
    import math

    if args.max_input_bytes <= 0:
        raise CreditConfigError(f"--max-input-bytes must be > 0, got {args.max_input_bytes}")
    if not (math.isfinite(args.max_memory_gb) and args.max_memory_gb > 0):
        raise CreditConfigError(f"--max-memory-gb must be a positive number, got {args.max_memory_gb}")


def check_output_place(output: str) -> Path:
    """The output path, refused (before any work) unless its folder exists and is writable."""
    path = Path(output)
    if path.is_dir():
        raise CreditConfigError(f"--output {output}: is a directory")
    folder = path.parent
    if not folder.is_dir():
        raise CreditConfigError(f"--output {output}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CreditConfigError(f"--output {output}: folder {folder} is not writable")
    return path


def _write_atomically(path: Path, text: str) -> None:
    """Writes via a temporary file in the same folder, so a crash never leaves a partial file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def main(argv: list[str] | None, parse_options: Callable[[Sequence[str]], dict[str, Any]]) -> int:
    """The command (``argv``: its arguments, None: sys.argv's); ``parse_options`` reads ``--set key=value``
    as the options' types: the config's one text parser, passed in by ``credit/__main__.py`` so that
    the credit package imports no config (docs/architecture.md §3)."""
    try:
        args = _parser().parse_args(argv)
        if args.stage is not None and args.stage not in registry.STAGES:
            raise CreditConfigError(f"unknown stage {args.stage!r}: choose one of {', '.join(registry.STAGES)}")
        cfg = make_credit_config(args.estimator, args.recipe, args.stage, parse_options(args.set))
        check_limit_options(args)
        output = check_output_place(args.output) if args.output else None
        groups = read_rollout_file(args.input, args.max_input_bytes)
        columns = columns_from_groups(groups)  # credit's one input form
        check_columns_for(columns, cfg.estimator)  # e.g. beacon on rollouts without milestone flags
        check_reward_range(groups, cfg.precision)
        check_memory(groups, cfg, int(args.max_memory_gb * 1024**3))
    except (UsageError, CreditConfigError, RolloutFormatError, CreditLimitError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT

    # Imported here so that bad input is reported without paying for the JAX import.
    from milegpo_jax.credit.api import compute_credit

    result = compute_credit(columns, cfg)
    text = json.dumps(
        {"advantages": result.advantages, "diagnostics": result.diagnostics, "config": dataclasses.asdict(cfg)},
        indent=1,
    )
    if output is not None:
        try:
            _write_atomically(output, text + "\n")
        except OSError as error:  # e.g. the disk filled up meanwhile: the temporary file is gone
            print(f"error: --output {output}: cannot write ({error.strerror or error})", file=sys.stderr)
            return EXIT_BAD_INPUT
    else:
        print(text)
    return 0

"""Offline credit replay of stored rollouts (docs/credit.md §12).

    python -m milegpo_jax.credit --input rollouts.json --estimator milegpo [--recipe webshop]
        [--stage rcs] [--set key=value ...] [--output adv.json]

Bad input (malformed JSON, missing keys, wrong types, empty groups, non-finite rewards, unknown
estimator/recipe/option, a field the estimator needs but the rollouts lack) prints one line naming the offending place and exits with status 2, writing
nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

from milegpo_jax.credit.config import ESTIMATORS, RECIPES, STAGES, CreditConfigError, make_credit_config, parse_overrides
from milegpo_jax.credit.rollouts import RolloutFormatError, check_estimator_inputs, load_rollouts

EXIT_BAD_INPUT = 2


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m milegpo_jax.credit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="rollout JSON file")
    parser.add_argument("--estimator", required=True, help=" | ".join(ESTIMATORS))
    parser.add_argument("--recipe", help=f"{' | '.join(RECIPES)} (default alfworld)")
    parser.add_argument("--stage", help=f"milegpo ablation stage: {' | '.join(STAGES)} (default full)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a credit option")
    parser.add_argument("--output", help="write the result JSON here (default: stdout)")
    return parser


def _write_atomically(path: Path, text: str) -> None:
    """Writes via a temporary file in the same folder, so a crash never leaves a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.stage is not None and args.stage not in STAGES:
            raise CreditConfigError(f"unknown stage {args.stage!r}: choose one of {', '.join(STAGES)}")
        cfg = make_credit_config(args.estimator, args.recipe, args.stage, parse_overrides(args.set))
        groups = load_rollouts(args.input)
        check_estimator_inputs(groups, cfg.estimator)  # e.g. beacon on rollouts without milestone flags
    except (_UsageError, CreditConfigError, RolloutFormatError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT

    # Imported here so that bad input is reported without paying for the JAX import.
    from milegpo_jax.credit.api import compute_credit

    result = compute_credit(groups, cfg)
    text = json.dumps(
        {"advantages": result.advantages, "diagnostics": result.diagnostics, "config": dataclasses.asdict(cfg)},
        indent=1,
    )
    if args.output:
        _write_atomically(Path(args.output), text + "\n")
    else:
        print(text)
    return 0

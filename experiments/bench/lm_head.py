"""LM-head benchmark: the PPO update of a real recipe on a real rollout, with the LM head at the
response positions only (the trainer's step) against the LM head at every position (before), in one
process.

1. Plays one real rollout of the recipe (``--config``, default the SmolLM2 TextWorldExpress recipe,
   ``--groups`` x ``--group-size`` rollouts) with our sampler and the checkpoint, and keeps every
   ``PolicyResponse`` the policy returned: the update's rows are exactly those an iteration packs. The
   advantages are seeded normal draws (the update's cost does not depend on their values).
2. Runs one PPO epoch of the recipe's step (``build_train_step``: its ``trainable_layers``,
   ``logits_chunk``, mini- and micro-batches) over those rows from the same parameters, twice per
   round in alternating order: ``ppo_epoch`` as the trainer calls it (``head_width`` response
   positions per packed sequence) and ``ppo_epoch(..., head=Head(..., capacity))`` (every position,
   the step's work before). The first round compiles and is not timed.
3. Checks that both give the same update: every mini-batch's loss and metrics, and the parameters
   after the epoch, agree to float32 tolerance.

Ends with one JSON line ``{"bench": "lm_head", "speedup": ..., "response_head_s": ...,
"every_position_s": ..., "head_width": ..., "capacity": ..., "max_metric_gap": ..., ...}``.
Run: ``python -m experiments.bench.lm_head --checkpoint DIR [--rounds 2] [--groups 2 --group-size 4]``
(``DIR``: the converted SmolLM2 checkpoint, docs/results/real-llm.md). ``--smoke``: the same in miniature,
one round over the demo recipe's rollout of one group of two, one turn (``sampler_rollout.SMOKE_OVERRIDES``),
on ``DIR`` or, without ``--checkpoint``, on a tiny random policy written to a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from experiments.bench.sampler_rollout import SMOKE_RECIPE, checkpoint_problem, recipe_config, write_smoke_checkpoint

RECIPE = str(Path(__file__).resolve().parents[1] / "configs" / "smollm2_twx.py")


class KeepingPolicy:
    """Passes calls to a ``SamplerPolicy`` and keeps every response it returned."""

    def __init__(self, policy):
        self.policy = policy
        self.responses = []

    def generate(self, prompts, *, temperature, seed):
        responses = self.policy.generate(prompts, temperature=temperature, seed=seed)
        self.responses += responses
        return responses


def rollout_responses(config, model, tokenizer) -> list:
    """Every ``PolicyResponse`` of one real rollout of ``config`` (its first iteration's task groups)."""
    from experiments.bench.sampler_rollout import play_rollout, recipe_policy

    policy = KeepingPolicy(recipe_policy(config, model, tokenizer))
    play_rollout(config, policy)
    return policy.responses


def recipe_arguments(parser: argparse.ArgumentParser, groups: int, group_size: int) -> None:
    """The flags of a benchmark that plays a recipe's rollout on a checkpoint and times rounds."""
    parser.add_argument("--checkpoint", default=None, help="a converted checkpoint directory (config.json, weights, "
                        "tokenizer files); required unless --smoke")
    parser.add_argument("--config", default=RECIPE, help="the recipe (default: experiments/configs/smollm2_twx.py)")
    parser.add_argument("--groups", type=int, default=groups, help="task groups of the rollout")
    parser.add_argument("--group-size", type=int, default=group_size, help="rollouts per group")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds after the compiling one")
    parser.add_argument("--seed", type=int, default=0)


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.lm_head", description=__doc__.split("\n\n")[0])
    recipe_arguments(parser, groups=2, group_size=4)
    parser.add_argument("--smoke", action="store_true", help="a miniature run, to check the code path")
    if parser.parse_known_args(argv)[0].smoke:
        parser.set_defaults(config=SMOKE_RECIPE, groups=1, group_size=2, rounds=1)
    args = parser.parse_args(argv)
    for name in ("groups", "group_size", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.checkpoint is None and not args.smoke:
        parser.error("--checkpoint is required (or --smoke, for a tiny random policy)")
    if not Path(args.config).is_file():
        _refuse(f"--config {args.config}: no such file")
    problem = args.checkpoint and checkpoint_problem(args.checkpoint)
    if problem:
        _refuse(problem)
    return args


def _refuse(message: str):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str] | None = None) -> dict:
    return with_smoke_policy(_parse(argv), run)


def with_smoke_policy(args, run):
    """``run(args)``; with ``--smoke`` and no checkpoint, on a tiny random policy in a scratch folder."""
    if args.checkpoint is None:
        with tempfile.TemporaryDirectory() as scratch:
            args.checkpoint = str(write_smoke_checkpoint(Path(scratch)))
            return run(args)
    return run(args)


def load_policy(args, overrides: tuple[str, ...] = ()):
    """(config, runtime options, model, tokenizer) of the recipe ``args.config`` on ``args.checkpoint``,
    with config ``overrides``."""
    from milegpo_jax.models import load_pretrained
    from milegpo_jax.models.tokenizer import load_tokenizer

    config = recipe_config(args.config, args.checkpoint, seed=args.seed, groups=args.groups, group_size=args.group_size,
                           smoke=args.smoke, overrides=overrides)
    runtime = config.runtime_options()
    model, _ = load_pretrained(args.checkpoint, runtime=runtime)
    return config, runtime, model, load_tokenizer(Path(args.checkpoint))


def update_gaps(history_a, history_b, params_a, params_b) -> tuple[float, float]:
    """How far two epochs' updates are apart: the largest relative gap of any mini-batch's metric, and
    the largest absolute gap of any parameter after the epoch."""
    import jax
    import jax.numpy as jnp

    metric = max(abs(a[k] - b[k]) / max(1.0, abs(b[k])) for a, b in zip(history_a, history_b, strict=True) for k in a)
    params = max(float(jnp.max(jnp.abs(a - b))) for a, b in
                 zip(jax.tree.leaves(params_a), jax.tree.leaves(params_b), strict=True))
    return metric, params


def rollout_rows(config, model, tokenizer, seed: int):
    """The PPO rows of one real rollout: seeded normal advantages (the update's cost does not depend on
    them), the behaviour log-probs as the reference's (the recipes' ``kl_coef`` is 0)."""
    from milegpo_jax.train.ppo import ppo_rows

    responses = rollout_responses(config, model, tokenizer)
    advantages = np.random.default_rng(seed).standard_normal(len(responses)).tolist()
    rows = ppo_rows(responses, advantages)
    return type(rows)(rows.tokens, {**rows.fields, "ref_logprobs": rows.fields["old_logprobs"]})


def run(args) -> dict:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from milegpo_jax.train.packing import Head
    from milegpo_jax.train.ppo import UpdateStats, place_on_default_device, ppo_epoch, sequence_capacity
    from milegpo_jax.train.step import PPOLoss, build_train_step, jit_train_step

    config, runtime, model, tokenizer = load_policy(args)
    rows = rollout_rows(config, model, tokenizer, args.seed)
    capacity = sequence_capacity(rows)
    graphdef, start_params = nnx.split(model)
    step = build_train_step(graphdef, runtime, config.ppo_loss_config(), config.optimizer_config())
    jitted = jit_train_step(step)
    every_position = Head(PPOLoss.weight_key, capacity)
    width = Head.for_rows(rows, PPOLoss.weight_key, capacity).width  # what ppo_epoch picks

    def update(head):
        params = jax.tree.map(jnp.copy, start_params)
        stats = UpdateStats()
        params, _, history = ppo_epoch(
            jitted, params, step.tx.init(params), rows, minibatch_rows=config.ppo.minibatch_rows,
            microbatch_rows=config.ppo.microbatch_rows, capacity=capacity, rng=np.random.default_rng(args.seed),
            pad_id=tokenizer.pad_token_id, place=place_on_default_device, stats=stats, head=head,
        )
        return jax.block_until_ready(params), history

    times = {"response_head": [], "every_position": []}
    results = {}
    for round_index in range(args.rounds + 1):  # round 0 compiles
        order = [("response_head", None), ("every_position", every_position)]
        for name, head in order if round_index % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            results[name] = update(head)
            if round_index:
                times[name].append(time.perf_counter() - start)
    (params_new, history_new), (params_old, history_old) = results["response_head"], results["every_position"]
    metric_gap, param_gap = update_gaps(history_new, history_old, params_new, params_old)
    new_s, old_s = statistics.median(times["response_head"]), statistics.median(times["every_position"])
    response_positions = int(sum(m.sum() for m in rows.fields["response_mask"]))
    figures = {
        "bench": "lm_head",
        "rows": len(rows),
        "positions": int(rows.lengths.sum()),
        "response_positions": response_positions,
        "capacity": capacity,
        "head_width": width,
        "response_head_s": round(new_s, 3),
        "every_position_s": round(old_s, 3),
        "speedup": round(old_s / new_s, 3),
        "max_metric_gap": float(f"{metric_gap:.3g}"),
        "max_param_gap": float(f"{param_gap:.3g}"),
        "trainable_layers": config.optim.trainable_layers,
        "logits_chunk": config.ppo.logits_chunk,
        "rounds": args.rounds,
        "devices": f"{jax.device_count()} x {jax.devices()[0].device_kind}",
    }
    print(f"{len(rows)} rows, {figures['positions']} positions ({response_positions} response), capacity {capacity}, "
          f"LM head {width} positions per sequence")
    print(f"update epoch: response head {new_s:.2f} s, every position {old_s:.2f} s ({old_s / new_s:.2f}x); "
          f"largest metric gap {metric_gap:.2g}, parameter gap {param_gap:.2g}")
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

"""Update benchmark: the PPO update on the demo's model and real rollout rows, the old padded host
loop against the jitted step on packed rows, in one process.

1. Model and rows: the demo config's warm start (``write_warm_start``: the word tokenizer, random
   init and the SFT warm start, into a temporary directory), one real TextWorldExpress rollout of the
   demo's ``8 x 8`` groups with it, and the credit engine's advantages: the rows and their lengths
   are exactly what the trainer's update sees in an iteration.
2. Baseline (kept here only): the update as it was before packing (``PaddedLoop``): rows right-padded
   to the power-of-two bucket of the longest row, micro-batches of ``ppo.microbatch_rows`` rows (the
   last padded with masked copies), gradients from a jitted forward/backward summed on the host, then
   a separate jitted optimizer update; nothing donated.
3. New: ``milegpo_jax.train.ppo.ppo_epoch`` with the trainer's jitted, donated ``TrainStep`` on packed
   rows (``milegpo_jax.train.packing``), attending block-causally as the trainer does
   (``model.attention_block``); and the same step with the dense attention mask, which says how much
   of the gain is the attention blocks'.
4. A plain jitted ``[tokens, hidden] @ [hidden, intermediate]`` matmul the size of one micro-batch's
   MLP input projection gives the FLOP/s this machine reaches in this run.

All three run one PPO epoch over the same rows from the same parameters, compiled first, then timed
in alternating rounds. Useful FLOPs count real tokens only (``6 N`` per token for the matmul parameters
plus causal attention over each row's own length). Ends with one JSON line with
``speedup_vs_padded_loop``, ``padding_fraction`` (packed), ``padding_fraction_padded_loop``,
``update_tokens_per_s``, ``fraction_of_matmul_flops`` and the row-length distribution.

Run: ``python -m experiments.bench.update [--rounds 3] [--config.a.b=value ...]`` (a few minutes on 2
cores: the warm start and the rollout come first; ``--config.sft.epochs=1`` shortens the warm start).
``--smoke``: the same in miniature (``SMOKE_OVERRIDES``: a random 1-layer policy, one group of two, one turn;
one round).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from experiments.bench.sampler_rollout import SMOKE_OVERRIDES as SMOKE_ROLLOUT
from experiments.bench.sampler_rollout import SMOKE_POLICY

CONFIG = str(Path(__file__).resolve().parents[1] / "configs" / "demo.py")
# --smoke: a random 1-layer policy (no SFT) and a rollout of one group of two, one turn (before the user's overrides)
SMOKE_OVERRIDES = (*SMOKE_POLICY, "env.groups_per_iteration=1", "env.group_size=2", *SMOKE_ROLLOUT)


# ----------------------------------------------------------------------------- the old update (baseline)


def padded_rows(generations, advantages, pad_id: int, min_length: int = 16) -> dict[str, np.ndarray]:
    """The old right-padded arrays: every row as long as the bucket of the longest."""
    from milegpo_jax.shapes import bucket_size

    length = bucket_size(max(len(g.prompt_ids) + len(g.response_ids) for g in generations) - 1, min_length)
    rows = len(generations)
    arrays = {
        "inputs": np.full((rows, length), pad_id, np.int32),
        "targets": np.full((rows, length), pad_id, np.int32),
        "attention_mask": np.zeros((rows, length), np.int32),
        "head_index": np.tile(np.arange(length, dtype=np.int32), (rows, 1)),  # the LM head at every position
        "response_mask": np.zeros((rows, length), np.float32),
        "old_logprobs": np.zeros((rows, length), np.float32),
        "advantages": np.asarray(advantages, np.float32),
    }
    for row, generation in enumerate(generations):
        ids = list(generation.prompt_ids) + list(generation.response_ids)
        n, start = len(ids) - 1, len(generation.prompt_ids) - 1
        arrays["inputs"][row, :n] = ids[:-1]
        arrays["targets"][row, :n] = ids[1:]
        arrays["attention_mask"][row, :n] = 1
        arrays["response_mask"][row, start:n] = 1.0
        arrays["old_logprobs"][row, start:n] = generation.logprobs
    return arrays


class PaddedLoop:
    """The pre-packing update: host loop over micro-batches, gradients summed outside jit."""

    def __init__(self, loss):
        self.loss = loss

        @nnx.jit
        def gradients(model, batch, token_count):
            def fn(model):
                return self.loss(model, batch, token_count)

            (loss, metrics), grads = nnx.value_and_grad(fn, has_aux=True)(model)
            return grads, {"loss": loss, **metrics}

        @nnx.jit
        def apply(model, optimizer, grads):
            optimizer.update(model, grads)
            return optax.tree.norm(grads)

        self.gradients, self.apply = gradients, apply

    def epoch(self, model, optimizer, batch, *, minibatch_rows, microbatch_rows, rng):
        order = rng.permutation(batch["advantages"].shape[0])
        losses = []
        for start in range(0, len(order), minibatch_rows):
            minibatch = order[start : start + minibatch_rows]
            token_count = float(batch["response_mask"][minibatch].sum())
            total = None
            for micro_start in range(0, len(minibatch), microbatch_rows):
                pick = minibatch[micro_start : micro_start + microbatch_rows]
                index = np.concatenate([pick, np.repeat(pick[:1], microbatch_rows - len(pick))])
                micro = {k: v[index] for k, v in batch.items()}
                micro["response_mask"][len(pick) :] = 0.0
                micro["ref_logprobs"] = micro["old_logprobs"]
                micro["advantages"] = np.repeat(micro["advantages"][:, None], micro["inputs"].shape[1], axis=1)
                grads, metrics = self.gradients(model, {k: jnp.asarray(v) for k, v in micro.items()}, token_count)
                total = grads if total is None else jax.tree.map(jnp.add, total, grads)
                losses.append(metrics["loss"])
            self.apply(model, optimizer, total)
        return float(sum(float(x) for x in losses))


# ------------------------------------------------------------------------------------------ set-up


def rollout_rows(config, workdir: Path, progress: bool):
    """(model, tokenizer, generations, advantages) of one real rollout with the demo's warm start."""
    from envs_bridge.client import EnvPool
    from envs_bridge.groups import GroupPlan
    from envs_bridge.specs import env_spec
    from milegpo_jax.credit.api import compute_credit
    from milegpo_jax.models import load_pretrained
    from milegpo_jax.models.tokenizer import load_tokenizer
    from milegpo_jax.rollout.collector import collect
    from milegpo_jax.rollout.policy import SamplerPolicy
    from milegpo_jax.train.trainer import warm_start_plan
    from milegpo_jax.train.warm_start import write_warm_start

    warm_start = workdir / "warm_start"
    write_warm_start(warm_start_plan(config), warm_start, tokenizer_dir=workdir / "tokenizer")
    model, _ = load_pretrained(warm_start, runtime=config.runtime_options())  # as the trainer
    tokenizer = load_tokenizer(warm_start)
    env = config.env
    pool = EnvPool(env.name, env.groups_per_iteration * env.group_size, num_servers=env.num_servers or None,
                   env_options=env.adapter_options(), python=env.python)
    try:
        policy = SamplerPolicy(model, tokenizer, config.sampling_config())
        plan = GroupPlan.sample(env.train_split, pool.num_tasks(env.train_split), env.groups_per_iteration,
                                env.group_size, seed=config.run.seed)
        batch = collect(pool, policy, plan, env=env.name, max_steps=env.max_env_steps,
                        history_length=env.history_length, temperature=config.sampling.temperature, seed=0,
                        reward_scale=env_spec(env.name).reward_scale)
    finally:
        pool.close()
    columns, responses = batch.training_steps()  # as the trainer hands them to the credit engine
    credit = compute_credit(columns, config.credit_config())
    return model, tokenizer, responses, credit.step_advantages.tolist()


def useful_flops(model_config, lengths: np.ndarray) -> float:
    """Training FLOPs of the real tokens: 6 N per token plus causal attention within each row."""
    from experiments.bench.device import matmul_params
    from milegpo_jax.models import num_params

    dense = 6.0 * matmul_params(model_config, num_params(model_config)) * float(lengths.sum())
    c = model_config
    attention = 6.0 * c.num_layers * c.num_heads * c.head_dim * float(np.sum(lengths.astype(np.float64) ** 2))
    return dense + attention


def matmul_flops_per_s(tokens: int, hidden: int, out: int, repeats: int = 20) -> float:
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((tokens, hidden), np.float32))
    b = jnp.asarray(rng.standard_normal((hidden, out), np.float32))
    matmul = jax.jit(lambda a, b: a @ b)
    matmul(a, b).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    return 2.0 * tokens * hidden * out / statistics.median(times)


# ------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> dict:
    from milegpo_jax.config import ConfigError, split_config_flags

    overrides, rest = split_config_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating timing rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="a miniature run (SMOKE_OVERRIDES, one round)")
    if parser.parse_known_args(rest)[0].smoke:
        parser.set_defaults(rounds=1)
    args = parser.parse_args(rest)
    if args.smoke:
        overrides = [*SMOKE_OVERRIDES, *overrides]
    if args.rounds < 1:
        print("error: --rounds must be >= 1", file=sys.stderr)
        sys.exit(2)

    from experiments.train import build_config
    from milegpo_jax.models.decoder import abstract_model
    from milegpo_jax.train.ppo import UpdateStats, place_on_default_device, ppo_epoch, ppo_rows, sequence_capacity
    from milegpo_jax.train.step import build_train_step, jit_train_step

    try:
        config = build_config(CONFIG, [f"run.seed={args.seed}", "logging.progress_bar=false", *overrides])
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    ppo = config.ppo
    with tempfile.TemporaryDirectory() as scratch:
        model, tokenizer, generations, advantages = rollout_rows(config, Path(scratch), progress=False)
    pad_id = tokenizer.pad_token_id
    rows = ppo_rows(generations, advantages)
    rows = type(rows)(rows.tokens, {**rows.fields, "ref_logprobs": rows.fields["old_logprobs"]})
    lengths = rows.lengths
    capacity = sequence_capacity(rows)

    graphdef, start_params = nnx.split(model)
    # the same parameters under the dense attention mask (the old update's, and the new step without blocks)
    dense_graphdef, _ = nnx.split(abstract_model(model.config, model.runtime.replace(attention_block=0)))
    options = (config.runtime_options(), config.ppo_loss_config(), config.optimizer_config())
    step = build_train_step(graphdef, *options)
    jitted = jit_train_step(step)
    jitted_dense = jit_train_step(build_train_step(dense_graphdef, *options))
    padded = padded_rows(generations, advantages, pad_id)
    baseline = PaddedLoop(step.loss)

    def packed_update(train_step):
        params = jax.tree.map(jnp.copy, start_params)
        stats = UpdateStats()
        params, _, history = ppo_epoch(
            train_step, params, step.tx.init(params), rows, minibatch_rows=ppo.minibatch_rows,
            microbatch_rows=ppo.microbatch_rows, capacity=capacity, rng=np.random.default_rng(args.seed), pad_id=pad_id,
            place=place_on_default_device, stats=stats,
        )
        jax.block_until_ready(params)
        return stats

    def new_update():
        return packed_update(jitted)

    def dense_update():
        return packed_update(jitted_dense)

    def old_update():
        model = nnx.merge(dense_graphdef, jax.tree.map(jnp.copy, start_params))
        optimizer = nnx.Optimizer(model, step.tx, wrt=nnx.Param)
        baseline.epoch(model, optimizer, dict(padded), minibatch_rows=ppo.minibatch_rows,
                       microbatch_rows=ppo.microbatch_rows, rng=np.random.default_rng(args.seed))
        jax.block_until_ready(nnx.state(model))

    compile_start = time.perf_counter()
    stats = new_update()
    new_compile_s = time.perf_counter() - compile_start
    compile_start = time.perf_counter()
    old_update()
    old_compile_s = time.perf_counter() - compile_start
    dense_update()
    times = {"old": [], "new": [], "dense": []}
    for _ in range(args.rounds):
        for name, fn in (("old", old_update), ("new", new_update), ("dense", dense_update)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    old_s, new_s = statistics.median(times["old"]), statistics.median(times["new"])
    dense_s = statistics.median(times["dense"])
    per_micro_tokens = ppo.microbatch_rows * capacity
    mc = model.config
    matmul = matmul_flops_per_s(per_micro_tokens, mc.hidden_size, mc.intermediate_size)
    flops = useful_flops(mc, lengths)
    real = int(lengths.sum())
    padded_total = padded["inputs"].size + (-len(lengths) % ppo.microbatch_rows) * padded["inputs"].shape[1]
    figures = {
        "bench": "update",
        "rows": len(lengths),
        "row_length_mean": round(float(lengths.mean()), 1),
        "row_length_p50": int(np.percentile(lengths, 50)),
        "row_length_p90": int(np.percentile(lengths, 90)),
        "row_length_max": int(lengths.max()),
        "sequence_capacity": capacity,
        "old_update_s": round(old_s, 3),
        "new_update_s": round(new_s, 3),
        "new_update_dense_attention_s": round(dense_s, 3),
        "attention_block": model.runtime.attention_block,
        "speedup_of_attention_blocks": round(dense_s / new_s, 2),
        "old_compile_and_first_s": round(old_compile_s, 2),
        "new_compile_and_first_s": round(new_compile_s, 2),
        "speedup_vs_padded_loop": round(old_s / new_s, 2),
        "padding_fraction": round(stats.padding_fraction, 4),
        "padding_fraction_padded_loop": round(1.0 - real / padded_total, 4),
        "update_tokens_per_s": round(real / new_s, 1),
        "update_useful_gflops_per_s": round(flops / new_s / 1e9, 3),
        "matmul_gflops_per_s": round(matmul / 1e9, 3),
        "fraction_of_matmul_flops": round(flops / new_s / matmul, 3),
        "rounds": args.rounds,
        "devices": f"{jax.device_count()} x {jax.devices()[0].device_kind}",
    }
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

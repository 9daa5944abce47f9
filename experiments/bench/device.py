"""Accelerator benchmark: sampler decode rate against the memory-bandwidth roofline, PPO step MFU.

Default shape: Qwen2.5-1.5B (``preset("qwen2.5-1.5b")``), random weights initialised on the device
(``init_model``), so no checkpoint is needed. Two measurements, each timed after a warm-up call that
compiles it:

1. Decode: ``generate`` (the project's jitted prefill + while-loop decode), greedy, no EOS, so every
   row decodes the whole budget; weights and KV cache in ``--dtype`` (bfloat16). Default batch 128,
   prompt 512, 256 new tokens. The decode rate is ``batch * (new_tokens - 1) / (t(new_tokens) - t(1))``
   with medians over ``--rounds`` (a ``max_new_tokens=1`` call is the prefill alone; it holds a cache
   of ``prompt + 1`` slots instead of ``prompt + new_tokens``, so its prefill is slightly cheaper and
   the rate is, if anything, under-stated). Its physical limit, the decode roofline: every decode step
   must read all weights and the KV cache of the context so far from memory, so
   ``tokens/s <= batch * bandwidth / (weight bytes + KV bytes per step)`` with the KV bytes at the mean
   context ``prompt + new_tokens / 2`` (``2 * layers * batch * context * kv_heads * head_dim`` values).
2. Train: one PPO optimizer step (the trainer's ``milegpo_jax.train.step.TrainStep``, jitted with
   parameters and optimizer state donated: forward + backward over ``--train-microbatch`` row
   micro-batches of ``--train-seq`` tokens in a ``lax.scan``, gradient accumulation, then clipped AdamW) over ``--train-rows`` full-length rows; parameters in ``--train-param-dtype``
   (float32 master weights), compute in ``--dtype``. Model FLOPs per step, as in PaLM (Chowdhery et
   al. 2022, appendix B) with the attention term halved for the causal mask:
   ``6 * N * tokens + 6 * layers * heads * head_dim * seq * tokens``, with ``N`` the parameters that
   multiply activations (all of them when the embedding is tied, as in 1.5B; without the input
   embedding table otherwise). MFU = model FLOPs / step time / peak bf16 dense FLOP/s; ``mfu_6n``
   counts the ``6 * N * tokens`` term alone.

Device limits come from the chip table ``experiments/chips.py`` (``DEVICE_SPECS``, shared with
``experiments.aot``) by ``jax.devices()[0].device_kind``; ``--peak-tflops`` and
``--bandwidth-gbs`` override them (or supply them for a device not in the table). A limit that is
unknown is printed as "limit unknown" and its ratio is ``null`` in the JSON line.

The PPO step is timed once per ``--attention`` value (default ``auto,xla``: the platform's fused kernel
against the dense form, docs/models.md §7); the first gives the MFU rows, and ``train_step_s_by_attention``
holds them all.

Ends with one JSON line ``{"bench": "device", "decode_tokens_per_s": ..., "decode_roofline_fraction":
..., "mfu": ..., ...}``. Run: ``python -m experiments.bench.device`` (GPU/TPU, a few minutes);
``--smoke`` runs a tiny model and batch in seconds on any backend (CPU included) to check the code path.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

from experiments.chips import device_spec


def device_limits(device_kind: str, peak_tflops: float | None, bandwidth_gbs: float | None) -> dict:
    """Peak bf16 TFLOP/s and bandwidth GB/s (None when unknown): a flag wins over the table."""
    spec = device_spec(device_kind)
    peak = peak_tflops if peak_tflops is not None else (spec.peak_tflops if spec else None)
    bandwidth = bandwidth_gbs if bandwidth_gbs is not None else (spec.bandwidth_gbs if spec else None)
    sources = []
    if spec is not None and (peak_tflops is None or bandwidth_gbs is None):
        sources.append(f"{spec.name}, {spec.source}")
    if peak_tflops is not None or bandwidth_gbs is not None:
        sources.append("command-line override")
    return {"peak_tflops": peak, "bandwidth_gbs": bandwidth, "limits_source": "; ".join(sources) or None}


def kv_bytes_per_token(spec) -> int:
    """Bytes of keys + values one token adds to the cache, over all layers (cache in compute dtype);
    ``spec``: a ``ModelSpec`` (architecture and runtime options)."""
    import jax.numpy as jnp

    return 2 * spec.num_layers * spec.num_kv_heads * spec.head_dim * jnp.dtype(spec.compute_dtype).itemsize


def decode_roofline(weight_bytes: int, kv_token_bytes: int, batch: int, mean_context: float, bandwidth_gbs: float) -> float:
    """New tokens/s if each decode step only had to stream the weights and the batch's KV cache."""
    step_bytes = weight_bytes + kv_token_bytes * batch * mean_context
    return batch * bandwidth_gbs * 1e9 / step_bytes


def matmul_params(config, params: int) -> int:
    """Parameters that multiply activations: a tied embedding is the LM head; an untied input table is
    only gathered from."""
    return params if config.tie_word_embeddings else params - config.vocab_size * config.hidden_size


def train_flops(config, params: int, rows: int, seq: int, head: int | None = None) -> tuple[float, float]:
    """(6N term, causal attention term) of one training step over ``rows x seq`` tokens, the LM head
    at ``head`` of each row's positions (default: all; the trainer's loss reads the response ones)."""
    tokens = rows * seq
    head_params = config.vocab_size * config.hidden_size
    head = seq if head is None else head
    dense = 6.0 * (matmul_params(config, params) - head_params) * tokens + 6.0 * head_params * rows * head
    attention = 6.0 * config.num_layers * config.num_heads * config.head_dim * seq * tokens
    return dense, attention


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny model and batch: checks the code path in seconds")
    parser.add_argument("--preset", default="qwen2.5-1.5b", help="a public shape (milegpo_jax.models.PRESETS)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"], help="compute dtype")
    parser.add_argument("--train-param-dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--batch", type=int, default=128, help="decode rows")
    parser.add_argument("--prompt", type=int, default=512, help="prompt tokens per row")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3, help="timed generate calls of each kind")
    parser.add_argument("--train-rows", type=int, default=16, help="rows in the one PPO mini-batch")
    parser.add_argument("--train-microbatch", type=int, default=4, help="rows per forward/backward")
    parser.add_argument("--train-seq", type=int, default=1024, help="tokens per row")
    parser.add_argument("--train-steps", type=int, default=3, help="timed optimizer steps")
    parser.add_argument("--logits-chunk", type=int, default=256, help="time chunk of the LM head in the loss")
    parser.add_argument("--remat", default="none", choices=["none", "full", "dots"])
    parser.add_argument("--peak-tflops", type=float, default=None, help="override: peak bf16 dense TFLOP/s")
    parser.add_argument("--bandwidth-gbs", type=float, default=None, help="override: memory bandwidth, GB/s")
    parser.add_argument("--attention", default="auto,xla",
                        help="comma-separated model.attention_impl values to time the PPO step with (the first "
                             "gives the MFU rows): auto (the platform's kernel), xla, blocks, splash, gpu_flash")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from milegpo_jax.models.attention import ATTENTION_IMPLS

    args.attention = [a.strip() for a in args.attention.split(",") if a.strip()]
    unknown = sorted(set(args.attention) - set(ATTENTION_IMPLS))
    if unknown or not args.attention:
        parser.error(f"--attention: choose from {', '.join(ATTENTION_IMPLS)}")
    if args.smoke:
        # 128 new tokens and 9 rounds: a tiny model decodes 32 tokens in milliseconds, and on a loaded
        # machine 3 rounds of that once timed generate below prefill alone (decode not measurable)
        args.batch, args.prompt, args.new_tokens, args.rounds = 4, 16, 128, 9
        args.train_rows, args.train_microbatch, args.train_seq, args.train_steps = 4, 2, 32, 2
        args.logits_chunk = 16
    if args.train_rows % args.train_microbatch:
        parser.error("--train-rows must be a multiple of --train-microbatch")
    if (args.train_seq // 2) % args.logits_chunk:
        parser.error("--train-seq / 2 (the response half the LM head reads) must be a multiple of --logits-chunk")
    for name in ("peak_tflops", "bandwidth_gbs"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            parser.error(f"--{name.replace('_', '-')} must be a positive number")
    return args


def _model_spec(args, param_dtype: str, attention: str = "auto"):
    """The shape to time and the options it runs with (a ``ModelSpec``)."""
    from milegpo_jax.models import ModelConfig, RuntimeOptions, preset

    runtime = RuntimeOptions(param_dtype=param_dtype, compute_dtype=args.dtype, remat=args.remat,
                             attention_impl=attention)
    if args.smoke:
        return runtime.apply(ModelConfig(
            vocab_size=512, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
            tie_word_embeddings=True,
        ))
    return runtime.apply(preset(args.preset))


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _bench_decode(args) -> dict:
    import jax
    import numpy as np
    from flax import nnx

    from milegpo_jax.models import init_model
    from milegpo_jax.sampling import SamplingConfig, generate

    config = _model_spec(args, args.dtype)  # decode weights in the compute dtype, as served
    model = init_model(config.config, config.runtime, seed=args.seed)
    weight_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    prompts = np.random.default_rng(args.seed).integers(0, config.vocab_size, (args.batch, args.prompt), dtype=np.int32)
    greedy = SamplingConfig(max_new_tokens=args.new_tokens, temperature=0.0)
    prefill_only = greedy.replace(max_new_tokens=1)

    compile_s = _timed(lambda: generate(model, prompts, greedy))  # generate returns host arrays: synchronous
    generate(model, prompts, prefill_only)  # its own compile, not timed
    full_s, prefill_s = [], []
    for _ in range(args.rounds):  # interleaved, so drift hits both alike
        full_s.append(_timed(lambda: generate(model, prompts, greedy)))
        prefill_s.append(_timed(lambda: generate(model, prompts, prefill_only)))
    full, prefill = statistics.median(full_s), statistics.median(prefill_s)
    if full <= prefill:
        raise RuntimeError(f"decode time not measurable: generate {full:.4f} s <= prefill alone {prefill:.4f} s")
    return {
        "config": config,
        "weight_bytes": weight_bytes,
        "decode_s": full - prefill,
        "decode_tokens_per_s": args.batch * (args.new_tokens - 1) / (full - prefill),
        "generate_s": full,
        "generate_tokens_per_s": args.batch * args.new_tokens / full,
        "prefill_s": prefill,
        "decode_compile_and_first_call_s": compile_s,
    }


def _bench_train(args, attention: str) -> dict:
    import jax
    import numpy as np
    from flax import nnx

    from milegpo_jax.models import init_model
    from milegpo_jax.models.attention import choose_attention
    from milegpo_jax.train.optim import make_optimizer
    from milegpo_jax.train.options import OptimizerConfig, PPOLossConfig
    from milegpo_jax.train.packing import micro_batch_shape
    from milegpo_jax.train.step import PPOLoss, TrainStep, jit_train_step

    config = _model_spec(args, args.train_param_dtype, attention)
    graphdef, params = nnx.split(init_model(config.config, config.runtime, seed=args.seed))
    # the trainer's step (build_train_step makes the same TrainStep from the config's option objects)
    step = TrainStep(graphdef, make_optimizer(OptimizerConfig()), PPOLoss(PPOLossConfig(), args.logits_chunk))
    opt_state = step.tx.init(params)
    jitted = jit_train_step(step)
    rng = np.random.default_rng(args.seed)
    rows, seq = args.train_rows, args.train_seq
    micro, per_micro = micro_batch_shape(rows, args.train_microbatch)
    if micro * per_micro != rows:
        raise SystemExit(f"error: --train-rows {rows} must be a multiple of --train-microbatch {args.train_microbatch}")
    ids = rng.integers(0, config.vocab_size, (rows, seq + 1), dtype=np.int32)
    # a prompt half and a response half, every position a real token; the loss reads the response half
    head = seq // 2
    uniform = np.full((rows, head), -math.log(config.vocab_size), np.float32)
    host = {
        "inputs": ids[:, :-1],
        "attention_mask": np.ones((rows, seq), np.int32),  # full rows: one segment each
        "head_index": np.tile(np.arange(seq - head, seq, dtype=np.int32), (rows, 1)),
        "targets": ids[:, seq - head + 1 :],
        "response_mask": np.ones((rows, head), np.float32),
        "old_logprobs": uniform,
        "ref_logprobs": uniform,
        "advantages": np.repeat(rng.standard_normal((rows, 1)).astype(np.float32), head, axis=1),
    }
    batch = {k: jax.device_put(v.reshape(micro, per_micro, -1)) for k, v in host.items()}
    state = {"params": params, "opt_state": opt_state}

    def one_step():
        state["params"], state["opt_state"], metrics = jitted(state["params"], state["opt_state"], batch)
        return float(metrics["loss"])  # a host value: the step has finished

    compile_s = _timed(one_step)
    times, losses = [], []
    for _ in range(args.train_steps):
        start = time.perf_counter()
        losses.append(one_step())
        times.append(time.perf_counter() - start)
    if not math.isfinite(losses[-1]):
        raise RuntimeError(f"PPO loss is not finite: {losses[-1]}")
    form = choose_attention(attention, jax.devices()[0].platform, seq, config.attention_block)
    return {"train_step_s": statistics.median(times), "train_compile_and_first_step_s": compile_s, "form": form}


def _fraction(measured: float, limit: float | None) -> float | None:
    return None if limit is None else measured / limit


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)

    import jax

    from milegpo_jax.models import num_params

    device = jax.devices()[0]
    limits = device_limits(device.device_kind, args.peak_tflops, args.bandwidth_gbs)
    peak, bandwidth = limits["peak_tflops"], limits["bandwidth_gbs"]

    decode = _bench_decode(args)
    config = decode.pop("config")
    params = num_params(config)
    kv_token_bytes = kv_bytes_per_token(config)
    mean_context = args.prompt + args.new_tokens / 2
    kv_step_bytes = kv_token_bytes * args.batch * mean_context
    roofline = None if bandwidth is None else decode_roofline(
        decode["weight_bytes"], kv_token_bytes, args.batch, mean_context, bandwidth
    )

    from milegpo_jax.models.attention import check_attention_impl

    for attention in args.attention:
        try:
            check_attention_impl(attention, device.platform)
        except ValueError as error:
            raise SystemExit(f"error: --attention: {error}") from None
    by_attention = {attention: _bench_train(args, attention) for attention in args.attention}
    train = by_attention[args.attention[0]]
    dense_flops, attention_flops = train_flops(config, params, args.train_rows, args.train_seq, args.train_seq // 2)
    step_s = train["train_step_s"]
    tokens = args.train_rows * args.train_seq
    achieved_tflops = (dense_flops + attention_flops) / step_s / 1e12
    dense_tflops = dense_flops / step_s / 1e12

    shape = "smoke (tiny model)" if args.smoke else args.preset
    peak_text = f"{peak:g} TFLOP/s bf16 dense" if peak else "peak FLOP/s unknown"
    bandwidth_text = f"{bandwidth:g} GB/s" if bandwidth else "bandwidth unknown"
    source_text = f" ({limits['limits_source']})" if limits["limits_source"] else ""
    print(
        f"device: {device.device_kind} ({device.platform}, {jax.device_count()} device(s), benchmark uses 1); "
        f"limits: {peak_text}, {bandwidth_text}{source_text}"
    )
    print(
        f"model: {shape}, {params / 1e6:.1f} M params ({matmul_params(config, params) / 1e6:.1f} M in matmuls), "
        f"compute {args.dtype}; decode: weights {args.dtype} ({decode['weight_bytes'] / 1e9:.3f} GB), batch "
        f"{args.batch}, prompt {args.prompt}, {args.new_tokens} new tokens, greedy, KV {kv_step_bytes / 1e9:.3f} GB "
        f"per step at the mean context; train: {args.train_rows} rows x {args.train_seq} tokens per PPO step "
        f"(micro-batches of {args.train_microbatch}), params {args.train_param_dtype}, remat {args.remat}"
    )

    def limit_cells(limit, fraction, fmt):
        if limit is None:
            return f"{'limit unknown':>16}{'':>10}"
        return f"{format(limit, fmt):>16}{fraction:>10.1%}"

    print(f"{'':<30}{'measured':>14}{'limit':>16}{'ratio':>10}")
    print(
        f"{'decode new tokens/s':<30}{decode['decode_tokens_per_s']:>14,.0f}"
        f"{limit_cells(roofline, _fraction(decode['decode_tokens_per_s'], roofline), ',.0f')}"
        "   roofline: batch * bandwidth / (weight + KV bytes per step)"
    )
    print(
        f"{'train model TFLOP/s (MFU)':<30}{achieved_tflops:>14.4g}"
        f"{limit_cells(peak, _fraction(achieved_tflops, peak), ',.1f')}"
        "   (6 N tokens + 6 L H d_head T tokens) / step time"
    )
    print(
        f"{'  6N term only':<30}{dense_tflops:>14.4g}{limit_cells(peak, _fraction(dense_tflops, peak), ',.1f')}"
    )
    print(
        f"generate {decode['generate_s']:.3f} s/batch ({decode['generate_tokens_per_s']:,.0f} new tok/s end to end), "
        f"prefill {decode['prefill_s']:.3f} s, decode {decode['decode_s']:.3f} s; compile + first call "
        f"{decode['decode_compile_and_first_call_s']:.1f} s. PPO step {step_s:.3f} s "
        f"({tokens / step_s:,.0f} tokens/s); compile + first step {train['train_compile_and_first_step_s']:.1f} s"
    )
    print("PPO step by attention: " + ", ".join(
        f"{name} ({run['form']}) {run['train_step_s']:.3f} s" for name, run in by_attention.items()))

    def rounded(x, digits=4):  # significant digits: a smoke run's tiny TFLOP/s must not round to 0
        return None if x is None else float(f"{x:.{digits}g}")

    figures = {
        "bench": "device",
        "smoke": args.smoke,
        "device_kind": device.device_kind,
        "platform": device.platform,
        "limits_source": limits["limits_source"],
        "peak_tflops": peak,
        "bandwidth_gbs": bandwidth,
        "decode_tokens_per_s": round(decode["decode_tokens_per_s"], 1),
        "decode_roofline_tokens_per_s": rounded(roofline, 6),
        "decode_roofline_fraction": rounded(_fraction(decode["decode_tokens_per_s"], roofline)),
        "train_model_tflops_per_s": rounded(achieved_tflops),
        "mfu": rounded(_fraction(achieved_tflops, peak)),
        "mfu_6n": rounded(_fraction(dense_tflops, peak)),
        "train_step_s": round(step_s, 4),
        "train_step_s_by_attention": {name: round(run["train_step_s"], 4) for name, run in by_attention.items()},
        "train_attention_forms": {name: run["form"] for name, run in by_attention.items()},
        "train_tokens_per_s": round(tokens / step_s, 1),
        "train_flops_per_step": dense_flops + attention_flops,
        "train_attention_flops_per_step": attention_flops,
        "generate_s": round(decode["generate_s"], 4),
        "generate_tokens_per_s": round(decode["generate_tokens_per_s"], 1),
        "prefill_s": round(decode["prefill_s"], 4),
        "decode_s": round(decode["decode_s"], 4),
        "decode_compile_and_first_call_s": round(decode["decode_compile_and_first_call_s"], 2),
        "train_compile_and_first_step_s": round(train["train_compile_and_first_step_s"], 2),
        "model": shape,
        "params": params,
        "weight_bytes": decode["weight_bytes"],
        "kv_bytes_per_step": kv_step_bytes,
        "batch": args.batch,
        "prompt": args.prompt,
        "new_tokens": args.new_tokens,
        "train_rows": args.train_rows,
        "train_microbatch": args.train_microbatch,
        "train_seq": args.train_seq,
        "dtype": args.dtype,
        "train_param_dtype": args.train_param_dtype,
    }
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

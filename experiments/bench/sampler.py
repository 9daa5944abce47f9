"""Sampler benchmark: our jitted prefill + while-loop decode against transformers ``generate``.

With ``--checkpoint DIR`` it runs on real weights and a real recipe's rollout instead
(``experiments/bench/sampler_rollout.py``: prompts of every turn of one rollout, prefix sharing on and
off, transformers on the same threads): ``python -m experiments.bench.sampler --checkpoint DIR
[--config experiments/configs/smollm2_twx.py] [--threads 2] [--rounds 3]``. What follows is the
synthetic comparison, run without ``--checkpoint``.

CPU comparison (default): a random Qwen2 checkpoint of a small config is written by transformers and
loaded by ``load_pretrained``, so both sides hold the same weights; a batch of 32 random prompts of 256
tokens each gets 128 new tokens, greedy, no EOS (every row decodes the whole budget), fp32. Timings
alternate between the two in rounds (the machine is shared; interleaving spreads any noise over both)
after one warm-up call each (JAX's compiles). torch runs on one thread, JAX on XLA's default CPU pool
(``--jax-single-thread`` restricts it to one core too; decided before jax starts, hence a flag).

The checkpoint's init scale (``--init-range``, default 0.2 rather than HF's 0.02) gives peaked
next-token distributions like a trained model's, so greedy decoding is well defined in float32 and
``greedy_identical`` compares the algorithms, not rounding on near-ties.

Reported: seconds per batch and new tokens/s for each (median over rounds), our prefill share (a
``max_new_tokens=1`` call timed in the same rounds), our compile time, and whether the greedy tokens
agree; where a row differs, the gap between transformers' own logits of the two tokens at the first
difference (below ``NEAR_TIE``: a near-tie that float32 rounding decides either way). Ends with one
JSON line ``{"bench": "sampler", "speedup_vs_transformers": ..., "greedy_identical": ..., ...}``.
Run: ``python -m experiments.bench.sampler [--batch 32 --prompt 256 --new-tokens 128]``; ``--smoke``: the
same in miniature (``SMOKE``: a 1-layer model, 2 rows, 4 new tokens, one round; with ``--checkpoint``
the rollout benchmark's miniature).

Accelerator run: ``--preset qwen2.5-1.5b --dtype bfloat16 --batch 128 --skip-transformers
--peak-bandwidth-gbs 4800`` (random weights, no checkpoint) also reports the fraction of the
memory-bandwidth bound reached while decoding: every decode step must read all weights plus the KV
cache of the context so far, so ``bound = batch * peak_bandwidth / (weight bytes + KV bytes at the mean
context length)`` new tokens/s, against our decode rate ``batch * (new_tokens - 1) / (t(new_tokens) - t(1))``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from experiments.bench.threads import configure_cpu_threads

# --smoke: defaults for a run in seconds (explicit flags still win); the rollout's are in sampler_rollout
SMOKE = dict(batch=2, prompt=8, new_tokens=4, rounds=1, hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64,
             vocab=256, groups=1, group_size=2)


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=256, help="prompt tokens per row")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--intermediate", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--init-range", type=float, default=0.2)
    parser.add_argument("--preset", default=None, help="a public shape (milegpo_jax.models.PRESETS), random weights")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--skip-transformers", action="store_true")
    parser.add_argument("--peak-bandwidth-gbs", type=float, default=None, help="device memory bandwidth, GB/s")
    parser.add_argument("--jax-single-thread", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint", default=None, help="a real Hugging Face checkpoint: the rollout benchmark")
    parser.add_argument("--config", default="experiments/configs/smollm2_twx.py", help="with --checkpoint: the recipe")
    parser.add_argument("--threads", type=int, default=2, help="with --checkpoint: torch threads (XLA uses every core)")
    parser.add_argument("--groups", type=int, default=0, help="with --checkpoint: G groups (0: the recipe's)")
    parser.add_argument("--group-size", type=int, default=0, help="with --checkpoint: K rollouts (0: the recipe's)")
    parser.add_argument("--smoke", action="store_true", help="a miniature run (SMOKE), to check the code path")
    if parser.parse_known_args(argv)[0].smoke:
        from experiments.bench.sampler_rollout import SMOKE_RECIPE

        parser.set_defaults(**SMOKE, config=SMOKE_RECIPE)
    args = parser.parse_args(argv)
    if args.checkpoint is not None:
        from experiments.bench.sampler_rollout import checkpoint_problem

        problem = checkpoint_problem(args.checkpoint)
        if problem:
            parser.exit(2, f"error: {problem}\n")
        if not Path(args.config).is_file():
            parser.exit(2, f"error: --config {args.config}: no such file\n")
        if args.rounds < 1 or args.threads < 1 or args.groups < 0 or args.group_size < 0:
            parser.exit(2, "error: --rounds and --threads must be >= 1, --groups and --group-size >= 0\n")
        return args
    if args.preset is None and args.dtype != "float32":
        parser.error("the transformers comparison runs in float32; use --preset for bfloat16")
    if args.preset is not None and not args.skip_transformers:
        parser.error("--preset uses random weights in JAX only: add --skip-transformers")
    return args


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _random_hf_model(args):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(args.seed)
    config = Qwen2Config(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=max(512, args.prompt + args.new_tokens), rope_theta=1e6, rms_norm_eps=1e-6,
        tie_word_embeddings=True, initializer_range=args.init_range,
    )
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():  # HF starts q/k/v biases at zero; give them values like a trained model's
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.normal_(0.0, 0.5)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


NEAR_TIE = 1e-4  # a logit gap this small is float32 rounding between implementations, not a choice


def _divergence_gaps(reference, prompts, ours, theirs) -> list[float]:
    """For each row where the greedy tokens differ: at the first differing step, how far apart
    transformers' own logits put the two tokens (tiny gap: a near-tie that rounding decides)."""
    import numpy as np
    import torch

    gaps = []
    for row in np.flatnonzero((ours != theirs).any(axis=1)):
        step = int(np.flatnonzero(ours[row] != theirs[row])[0])
        sequence = torch.tensor(np.concatenate([prompts[row], ours[row, :step]])[None], dtype=torch.long)
        with torch.inference_mode():
            logits = reference(sequence).logits[0, -1].float().numpy()
        gaps.append(float(abs(logits[ours[row, step]] - logits[theirs[row, step]])))
    return gaps


def greedy_agreement(same_rows, gaps: list[float]) -> tuple[str, dict]:
    """The report line and figures of greedy agreement: ``same_rows`` (bool per row) says which rows
    equal transformers' tokens, ``gaps`` has one logit gap per differing row (empty: all agree)."""
    line = f"greedy tokens identical in {int(same_rows.sum())}/{same_rows.size} rows"
    if gaps:
        line += f"; where they differ, transformers' logits of the two tokens are {max(gaps):.1e} apart at most"
    return line, {
        "greedy_identical": bool(same_rows.all()),
        "greedy_identical_rows": int(same_rows.sum()),
        "greedy_identical_up_to_near_ties": all(gap < NEAR_TIE for gap in gaps),
        "greedy_divergence_max_logit_gap": max(gaps, default=0.0),
    }


def _bandwidth_bound(model, args) -> float:
    """New tokens/s if every decode step only had to stream weights + the mean context's KV cache."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    cfg = model.config
    weight_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    mean_context = args.prompt + args.new_tokens / 2  # the cache is in the compute dtype
    kv_bytes = 2 * cfg.num_layers * args.batch * mean_context * cfg.num_kv_heads * cfg.head_dim
    kv_bytes *= jnp.dtype(model.runtime.compute_dtype).itemsize
    return args.batch * args.peak_bandwidth_gbs * 1e9 / (weight_bytes + kv_bytes)


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    configure_cpu_threads(args.jax_single_thread)
    if args.checkpoint is not None:
        from experiments.bench.sampler_rollout import run

        return run(args)

    import jax
    import numpy as np
    import torch

    from milegpo_jax.models import RuntimeOptions, init_model, load_pretrained, num_params, preset
    from milegpo_jax.sampling import SamplingConfig, generate

    torch.set_num_threads(1)  # two torch threads next to JAX on 2 shared cores are erratic (docs/architecture.md §6.2)
    reference = None
    if args.preset is None:
        reference = _random_hf_model(args)
        with tempfile.TemporaryDirectory() as tmp:
            reference.save_pretrained(tmp)
            model, config = load_pretrained(tmp)
        vocab = args.vocab
    else:
        config = preset(args.preset)
        model = init_model(config, RuntimeOptions(param_dtype=args.dtype, compute_dtype=args.dtype), seed=args.seed)
        vocab = config.vocab_size
    prompts = np.random.default_rng(args.seed).integers(0, vocab, (args.batch, args.prompt), dtype=np.int32)
    new_tokens = args.batch * args.new_tokens
    greedy = SamplingConfig(max_new_tokens=args.new_tokens, temperature=0.0)
    prefill_only = greedy.replace(max_new_tokens=1)

    compile_s, ours = _timed(lambda: generate(model, prompts, greedy))
    generate(model, prompts, prefill_only)  # its own compile, not timed
    theirs = None
    if reference is not None:
        torch_prompts = torch.tensor(prompts, dtype=torch.long)

        def hf_generate():
            with torch.inference_mode():
                return reference.generate(
                    torch_prompts, attention_mask=torch.ones_like(torch_prompts), max_new_tokens=args.new_tokens,
                    do_sample=False,
                )

        theirs = hf_generate()[:, args.prompt :].numpy()  # warm-up (allocator, kernels)

    jax_s, prefill_s, torch_s = [], [], []
    for _ in range(args.rounds):  # interleaved, so shared-machine noise hits both sides alike
        jax_s.append(_timed(lambda: generate(model, prompts, greedy))[0])
        prefill_s.append(_timed(lambda: generate(model, prompts, prefill_only))[0])
        if reference is not None:
            torch_s.append(_timed(hf_generate)[0])
    jax_median, prefill_median = statistics.median(jax_s), statistics.median(prefill_s)
    decode_rate = args.batch * (args.new_tokens - 1) / max(jax_median - prefill_median, 1e-9)

    shape = args.preset or (
        f"hidden {args.hidden}, {args.layers} layers, heads {args.heads}/{args.kv_heads}, "
        f"ffn {args.intermediate}, vocab {vocab}"
    )
    print(
        f"config: {shape} ({num_params(config) / 1e6:.1f} M params), {args.dtype}; "
        f"batch {args.batch}, prompt {args.prompt}, {args.new_tokens} new tokens, greedy; "
        f"jax on {jax.device_count()} {jax.default_backend()} device(s)"
        f"{' (1 thread)' if args.jax_single_thread else ''}; torch {torch.__version__} with 1 thread; "
        f"{args.rounds} interleaved rounds"
    )
    print(f"{'':<14}{'s/batch':>10}{'new tok/s':>12}")
    print(
        f"{'jax sampler':<14}{jax_median:>10.3f}{new_tokens / jax_median:>12.0f}   "
        f"compile+first call {compile_s:.2f} s, prefill {prefill_median:.3f} s, decode {decode_rate:.0f} tok/s"
    )
    figures = {
        "bench": "sampler",
        "jax_new_tokens_per_s": round(new_tokens / jax_median, 1),
        "jax_s_per_batch": round(jax_median, 4),
        "jax_prefill_s": round(prefill_median, 4),
        "jax_decode_tokens_per_s": round(decode_rate, 1),
        "jax_compile_and_first_call_s": round(compile_s, 2),
        "jax_rounds_s": [round(t, 4) for t in jax_s],
        "batch": args.batch,
        "prompt": args.prompt,
        "new_tokens": args.new_tokens,
        "dtype": args.dtype,
        "backend": jax.default_backend(),
    }
    if reference is not None:
        torch_median = statistics.median(torch_s)
        same_rows = (ours.token_ids == theirs).all(axis=1)
        gaps = _divergence_gaps(reference, prompts, ours.token_ids, theirs)
        line, agreement = greedy_agreement(same_rows, gaps)
        print(f"{'transformers':<14}{torch_median:>10.3f}{new_tokens / torch_median:>12.0f}")
        print(line)
        figures.update(
            speedup_vs_transformers=round(torch_median / jax_median, 3),
            **agreement,
            transformers_new_tokens_per_s=round(new_tokens / torch_median, 1),
            transformers_s_per_batch=round(torch_median, 4),
            transformers_rounds_s=[round(t, 4) for t in torch_s],
        )
    if args.peak_bandwidth_gbs:
        bound = _bandwidth_bound(model, args)
        print(f"decode at {decode_rate / bound:.1%} of the memory-bandwidth bound ({bound:.0f} tok/s)")
        figures.update(bandwidth_bound_tokens_per_s=round(bound, 1), bandwidth_fraction=round(decode_rate / bound, 4))
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

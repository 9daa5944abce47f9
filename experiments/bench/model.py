"""Model benchmark: our jitted Qwen2 forward against the transformers PyTorch forward, same weights.

A random Qwen2 checkpoint of a small config is written by transformers, loaded by
``milegpo_jax.models.load_pretrained``, and both forwards run on the same batch (default 8 x 256
tokens, fp32) in this one process: first JAX (compiled once, then timed), then torch with one thread
(two torch threads next to anything else on a 2-core machine are erratic, docs/architecture.md §6.2). JAX
uses XLA's default CPU thread pool; ``--jax-single-thread`` restricts it to one core too for a
like-for-like figure (it must be decided before jax starts, hence a flag).

Reports median milliseconds per batch and tokens/s for each, the ratio torch / jax, the compile time
and the largest logit difference (a sanity check that both computed the same thing). Ends with one
JSON line: ``{"bench": "model", "speedup_vs_transformers": <x>, ...}``.
Run: ``python -m experiments.bench.model [--batch 8 --seq 256 --repeats 10]``; ``--smoke``: the same in
miniature (``SMOKE``: a 1-layer model, 2 x 16 tokens, one repeat).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from experiments.bench.threads import configure_cpu_threads

# --smoke: defaults for a run in seconds (explicit flags still win)
SMOKE = dict(batch=2, seq=16, repeats=1, hidden=32, layers=1, heads=2, kv_heads=1, intermediate=64, vocab=256)


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--intermediate", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--jax-single-thread", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="a miniature run (SMOKE), to check the code path")
    if parser.parse_known_args(argv)[0].smoke:
        parser.set_defaults(**SMOKE)
    return parser.parse_args(argv)


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    args = _parse(argv)
    configure_cpu_threads(args.jax_single_thread)

    import jax
    import numpy as np
    import torch
    from flax import nnx
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from milegpo_jax.models import load_pretrained

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    hf_config = Qwen2Config(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=max(512, args.seq), rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True,
    )
    reference = Qwen2ForCausalLM(hf_config).eval()
    with torch.no_grad():  # HF starts q/k/v biases at zero; give them values like a trained model's
        for name, param in reference.named_parameters():
            if name.endswith(".bias"):
                param.normal_(0.0, 0.5)
    ids = np.random.default_rng(args.seed).integers(0, args.vocab, (args.batch, args.seq), dtype=np.int32)
    tokens = args.batch * args.seq

    with tempfile.TemporaryDirectory() as tmp:
        reference.save_pretrained(tmp)
        model, config = load_pretrained(tmp)
    graphdef, state = nnx.split(model)
    forward = jax.jit(lambda state, ids: nnx.merge(graphdef, state)(ids))
    device_ids = jax.device_put(ids)

    start = time.perf_counter()
    ours = forward(state, device_ids).block_until_ready()
    compile_s = time.perf_counter() - start
    jax_ms = _median_ms(lambda: forward(state, device_ids).block_until_ready(), args.repeats)

    torch_ids = torch.tensor(ids, dtype=torch.long)
    with torch.inference_mode():
        theirs = reference(torch_ids).logits  # warm-up (allocator, kernels)
        torch_ms = _median_ms(lambda: reference(torch_ids), args.repeats)
    max_diff = float(np.abs(np.asarray(ours) - theirs.numpy()).max())

    params = sum(p.numel() for p in reference.parameters())
    print(
        f"config: hidden {args.hidden}, {args.layers} layers, heads {args.heads}/{args.kv_heads}, "
        f"ffn {args.intermediate}, vocab {args.vocab} ({params / 1e6:.1f} M params), fp32; batch "
        f"{args.batch} x {args.seq}; jax on {jax.device_count()} {jax.default_backend()} device(s)"
        f"{' (1 thread)' if args.jax_single_thread else ''}, torch {torch.__version__} with 1 thread"
    )
    print(f"{'':<14}{'ms/batch':>10}{'tokens/s':>12}")
    print(f"{'jax (jit)':<14}{jax_ms:>10.1f}{tokens / jax_ms * 1000:>12.0f}   compile {compile_s:.2f} s")
    print(f"{'transformers':<14}{torch_ms:>10.1f}{tokens / torch_ms * 1000:>12.0f}")
    print(f"max |logit difference| {max_diff:.2e}")
    figures = {
        "bench": "model",
        "speedup_vs_transformers": round(torch_ms / jax_ms, 3),
        "jax_tokens_per_s": round(tokens / jax_ms * 1000, 1),
        "transformers_tokens_per_s": round(tokens / torch_ms * 1000, 1),
        "jax_ms_per_batch": round(jax_ms, 2),
        "transformers_ms_per_batch": round(torch_ms, 2),
        "jax_compile_s": round(compile_s, 3),
        "max_abs_logit_diff": max_diff,
        "batch": args.batch,
        "seq": args.seq,
        "params": params,
        "jax_single_thread": args.jax_single_thread,
        "dtype": model.runtime.compute_dtype,
    }
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

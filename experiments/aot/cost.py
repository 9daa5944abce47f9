"""FLOPs, HBM traffic and the roofline of a compiled train step or prefill, counted from the model
(XLA's own counts see a loop's body once). Pure arithmetic on shapes and the compiler's figures."""

from __future__ import annotations

from experiments.aot.topologies import PEAK


def attention_flops(model_cfg, form: str, sequences: int, length: int) -> float:
    """The attention matmuls one train step computes over ``sequences`` packed sequences, by form.

    One unit is a query's dot products with ``length`` keys, ``2 * length * head_dim`` FLOPs, per head,
    layer and position. The scores and the weighted values are one unit each forward; the backward pass
    takes 4 (XLA's dense and blocked forms) or 7 (the kernels recompute the scores: dq 3, dk/dv 4); remat
    recomputes the forward (2 more). ``blocks`` and the kernels skip the block pairs above the
    diagonal: ``(n + 1) / (2 n)`` of the square for ``n`` blocks."""
    from milegpo_jax.models.attention import KERNEL_PLATFORMS, kernel_tile

    remat = 2 if model_cfg.remat != "none" else 0
    if form in KERNEL_PLATFORMS:
        passes, block = 2 + 7 + remat, kernel_tile(length)
    else:
        passes, block = 2 + 4 + remat, model_cfg.attention_block if form == "blocks" else length
    n = length // block
    unit = 2.0 * length * model_cfg.head_dim * model_cfg.num_heads * model_cfg.num_layers * sequences * length
    return unit * passes * (n + 1) / (2 * n)


def train_cost(compiled, model_cfg, form: str, shape, chips: int, generation: str) -> dict:
    """FLOPs per chip and step, a lower bound on the step's time on ``generation`` and the MFU bound.

    ``compiled.cost_analysis()`` counts a loop's body once (checked on the TPU compiler: a 10-step
    ``lax.scan`` of a matmul reports one matmul). The step loops over micro-batches, scanned layers and
    LM-head chunks, and the TPU compiler turns sharded matmuls into loops of its own, so its FLOPs and
    bytes (``xla_flops``, ``xla_bytes``) are lower bounds; a kernel's FLOPs are not in them at all.
    The FLOPs are therefore counted from the model: ``(6 + 2 remat) N`` per trained position for the
    decoder, ``6`` times the LM head's parameters at each of its ``head`` positions, plus
    ``attention_flops``. ``roofline_s`` is ``max(FLOPs / peak, xla_bytes / bandwidth)``, a lower bound on
    the step's time; ``mfu_bound`` is the PaLM model FLOPs (``experiments.bench.device.train_flops``,
    as the device benchmark's MFU) over ``peak * roofline_s``, an upper bound on its MFU."""
    from experiments.bench.device import matmul_params, train_flops
    from milegpo_jax.models import num_params

    micro, rows, length, head, *tree = shape
    attended = tree[1] if tree and tree[1] else length  # a kernel attends over a tree's expanded slots
    sequences = micro * rows
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    xla_flops, xla_bytes = float(analysis.get("flops", 0.0)), float(analysis.get("bytes accessed", 0.0))
    params = num_params(model_cfg)
    head_params = model_cfg.vocab_size * model_cfg.hidden_size  # the LM head runs at `head` positions only
    body = (6 + (2 if model_cfg.remat != "none" else 0)) * (matmul_params(model_cfg, params) - head_params)
    weights = body * sequences * length + 6 * head_params * sequences * head
    flops = (weights + attention_flops(model_cfg, form, sequences, attended)) / chips
    model_flops = sum(train_flops(model_cfg, params, sequences, length, head)) / chips
    peak_flops, bandwidth = PEAK[generation]
    roofline_s = max(flops / peak_flops, xla_bytes / bandwidth)
    return {"flops": flops, "model_flops": model_flops, "xla_flops": xla_flops, "xla_bytes": xla_bytes,
            "compute_s": flops / peak_flops, "memory_s": xla_bytes / bandwidth, "roofline_s": roofline_s,
            "mfu_bound": model_flops / (peak_flops * roofline_s)}


def prefill_cost(compiled, model_cfg, form: str, batch: int, bucket: int, chunk: int, cache_slots: int,
                 weight_bytes: int, cache_bytes: int, chips: int, generation: str) -> dict:
    """FLOPs and HBM traffic per chip of one prefill call, a lower bound on its time and the MFU bound.

    Counted from the model, as ``train_cost`` (XLA's figures count the chunks' loop body once):
    ``2 N`` per prompt position for the decoder, the LM head at each row's last position, and the
    attention: the dense form scores every chunk against all ``cache_slots``; a kernel (one pass) the
    block pairs on or below the diagonal of the prompt. The traffic counts what every pass must read:
    the weights (``weight_bytes`` per chip, replicated by the ``sample`` rules) and the KV cache's slots
    (``cache_bytes``), once per chunk for the dense form, once for a kernel, plus the cache's write."""
    from experiments.bench.device import matmul_params
    from milegpo_jax.models import num_params
    from milegpo_jax.models.attention import KERNEL_PLATFORMS, kernel_tile

    head_params = model_cfg.vocab_size * model_cfg.hidden_size
    positions = batch * bucket
    decoder = 2.0 * (matmul_params(model_cfg, num_params(model_cfg)) - head_params) * positions
    head = 2.0 * head_params * batch
    # a query's scores and weighted values against one key: 4 * head_dim FLOPs per head and layer
    unit = 4.0 * model_cfg.head_dim * model_cfg.num_heads * model_cfg.num_layers * positions
    if form in KERNEL_PLATFORMS:
        passes, n = 1, bucket // kernel_tile(bucket)
        attention = unit * bucket * (n + 1) / (2 * n)
    else:
        passes = -(-bucket // chunk)
        attention = unit * cache_slots
    flops = (decoder + head + attention) / chips
    traffic = passes * (weight_bytes + cache_bytes) + cache_bytes
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    peak_flops, bandwidth = PEAK[generation]
    roofline_s = max(flops / peak_flops, traffic / bandwidth)
    return {"flops": flops, "model_flops": (decoder + head) / chips, "passes": passes,
            "xla_flops": float(analysis.get("flops", 0.0)), "xla_bytes": float(analysis.get("bytes accessed", 0.0)),
            "traffic_bytes": float(traffic), "compute_s": flops / peak_flops, "memory_s": traffic / bandwidth,
            "roofline_s": roofline_s, "mfu_bound": (decoder + head) / chips / (peak_flops * roofline_s)}

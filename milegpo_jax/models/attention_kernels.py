"""Fused causal attention over packed segments: JAX's own Pallas kernels, placed on the mesh.

Both functions take the layout of ``milegpo_jax.models.attention``: ``q [B, T, kv_heads, groups,
head_dim]`` (the heads of one KV group adjacent), keys and values ``[B, T, kv_heads, head_dim]`` and
segment ids ``[B, T]`` (0: padding). A query sees the keys at or before it with its own segment id, as
the dense form's mask says; the kernels tile the sequence and never hold the ``[T, T]`` scores, which is
what the training step's memory on a TPU or GPU slice is mostly made of (docs/models.md §7).

* ``splash``: TPU Splash attention (``jax.experimental.pallas.ops.tpu.splash_attention``), a causal mask
  and'ed with segment ids; grouped-query heads natively.
* ``gpu_flash``: the Pallas GPU flash-attention kernel (``jax.experimental.pallas.ops.gpu.attention``),
  causal with segment ids; it takes one KV head per query head, so KV heads are repeated.

The sampler's prefill uses them too: its queries are the last ``T`` of ``S`` cache slots (the ``S - T``
before them written by an earlier stage), given as ``kv_segments``; Splash takes that as a causal mask
with an offset, the GPU kernel only ``S == T``.

Under a mesh the kernel runs per device in a ``shard_map``: rows over the axes the ``batch`` rule
gives them, heads over ``tensor`` where the KV heads divide (else the KV heads are repeated so the
query heads can split). ``interpret`` runs the kernels in Pallas's interpreter: how they are tested on
CPU against the dense form.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

KERNEL_BLOCK = 128  # the kernels tile the sequence in blocks of this many positions


def kernel_tile(length: int) -> int:
    """The kernels' tile for ``length`` positions: 512 where it divides the length (fewer, larger
    steps), else ``KERNEL_BLOCK``."""
    return 512 if length % 512 == 0 else KERNEL_BLOCK


@functools.lru_cache(maxsize=64)
def _splash_kernel(heads: int, q_len: int, kv_len: int, offset: int, interpret: bool):
    """A Splash kernel for ``heads`` query heads, ``q_len`` queries at key positions ``offset..`` of
    ``kv_len`` keys (built on the host once per shape). Training: ``q_len == kv_len``, ``offset`` 0."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as kernel
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

    block_q, block_kv = kernel_tile(q_len), kernel_tile(kv_len)
    sizes = kernel.BlockSizes(block_q=block_q, block_kv=block_kv, block_kv_compute=block_kv, block_q_dkv=block_q,
                              block_kv_dkv=block_kv, block_kv_dkv_compute=block_kv, block_q_dq=block_q,
                              block_kv_dq=block_kv)
    # query i (key position offset + i) sees keys 0..offset + i
    mask = masks.MultiHeadMask([masks.CausalMask((q_len, kv_len), offset=offset)] * heads)
    with jax.ensure_compile_time_eval():  # concrete mask tables, not tracers of the first caller's trace
        return kernel.make_splash_mha(mask, block_sizes=sizes, head_shards=1, q_seq_shards=1, interpret=interpret)


def _splash_local(q, k, v, q_segments, kv_segments, interpret: bool):
    """Splash attention on one device's rows and heads (shapes as the module says; the queries are the
    last ``q_len`` of the ``kv_len`` key positions)."""
    from jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel import SegmentIds

    b, t, kv_heads, groups, h = q.shape
    s = k.shape[1]
    kernel = _splash_kernel(kv_heads * groups, t, s, s - t, interpret)
    # the kernel does not scale the scores; it wants heads leading: [heads, T, head_dim] per row
    q_heads = (q * (1.0 / math.sqrt(h))).astype(q.dtype).reshape(b, t, kv_heads * groups, h).transpose(0, 2, 1, 3)
    out = jax.vmap(lambda qr, kr, vr, qs, ks: kernel(qr, kr, vr, SegmentIds(qs, ks)))(
        q_heads, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), q_segments, kv_segments
    )
    return out.transpose(0, 2, 1, 3).reshape(b, t, kv_heads, groups, h).astype(q.dtype)


def _gpu_flash_local(q, k, v, q_segments, kv_segments, interpret: bool):
    """The Pallas GPU kernel on one device's rows and heads (square only: one segment array)."""
    from jax.experimental.pallas.ops.gpu import attention as kernel

    del kv_segments  # the same array: fused_causal_attention admits only T == S for this kernel
    b, t, kv_heads, groups, h = q.shape
    keys, values = (jnp.repeat(x, groups, axis=2) for x in (k, v))  # one KV head per query head
    out = kernel.mha(q.reshape(b, t, kv_heads * groups, h), keys, values, q_segments, sm_scale=1.0 / math.sqrt(h),
                     causal=True, interpret=interpret)
    return out.reshape(b, t, kv_heads, groups, h).astype(q.dtype)


LOCAL_KERNELS = {"splash": _splash_local, "gpu_flash": _gpu_flash_local}


def _axes(spec: PartitionSpec, dim: int):
    return spec[dim] if dim < len(spec) else None


def fused_causal_attention(q, k, v, segments, impl: str, *, kv_segments=None, sharding=None,
                           interpret: bool = False):
    """Causal attention within segments by the kernel ``impl`` ("splash" or "gpu_flash"), per device
    under ``sharding``'s mesh (a ``milegpo_jax.parallel.LogicalSharding``; None: one device).

    ``kv_segments [B, S]`` (default ``segments``) for keys that start before the queries: a prefill
    on top of ``S - T`` cache slots, the queries being key positions ``S - T..S - 1`` (Splash only)."""
    local = functools.partial(LOCAL_KERNELS[impl], interpret=interpret)
    b, t, kv_heads, groups, h = q.shape
    s = k.shape[1]
    kv_segments = segments if kv_segments is None else kv_segments
    if t % KERNEL_BLOCK or s % KERNEL_BLOCK:
        raise ValueError(f"attention kernel {impl!r} needs multiples of {KERNEL_BLOCK} positions, got {t} and {s}")
    if impl != "splash" and s != t:
        raise ValueError(f"attention kernel {impl!r} needs as many keys as queries, got {s} and {t}")
    if sharding is None or sharding.mesh.size == 1:
        return local(q, k, v, segments, kv_segments)

    rows = _axes(sharding.spec(("batch",), (b,)), 0)
    kv_split = _axes(sharding.spec(("act_kv_heads",), (kv_heads,)), 0)
    q_split = _axes(sharding.spec(("act_heads",), (kv_heads * groups,)), 0)
    if q_split != kv_split:  # the KV heads do not divide over `tensor`: repeat them so the query heads can
        k, v = (jnp.repeat(x, groups, axis=2) for x in (k, v))
        q = q.reshape(b, t, kv_heads * groups, 1, h)
        kv_split = q_split
    q_spec = PartitionSpec(rows, None, kv_split, None, None)
    kv_spec = PartitionSpec(rows, None, kv_split, None)
    segment_spec = PartitionSpec(rows, None)
    run = jax.shard_map(local, mesh=sharding.mesh, in_specs=(q_spec, kv_spec, kv_spec, segment_spec, segment_spec),
                        out_specs=q_spec, check_vma=False)
    return run(q, k, v, segments, kv_segments).reshape(b, t, kv_heads, groups, h)


__all__ = ["KERNEL_BLOCK", "LOCAL_KERNELS", "fused_causal_attention", "kernel_tile"]

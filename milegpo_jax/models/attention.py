"""Grouped-query attention scores and weighted sums: dense over a boolean mask, block-causal over
packed segments, or a fused kernel (docs/models.md §7), and the choice between them.

Both take ``q [B, T, kv_heads, groups, head_dim]`` (the heads of one KV group adjacent), keys and
values ``[B, S, kv_heads, head_dim]`` and return ``[B, T, kv_heads, groups, head_dim]`` in the
compute dtype; scores and the softmax are float32.

``dense_attention`` scores every query against every key and masks (the cached forward, where keys
are cache slots). ``blocked_causal_attention`` is for the training forward without a cache, where
``T == S`` and a token sees earlier tokens of its own segment only: it cuts the sequence into blocks
of ``block`` positions and scores a query block only against itself and earlier key blocks, one key
block offset at a time, with the softmax's maximum and sum gathered across offsets. Blocks above the
diagonal are never computed, so a sequence of ``n`` blocks costs ``n (n + 1) / 2`` block pairs instead
of ``n**2``: about half of the scores, exps and masks of the dense form. The result equals the dense
one for every real query (up to float rounding); a query with no visible key (padding) gets a finite,
meaningless value in both.

On TPU and GPU the cache-free forward runs a fused kernel instead (``attention_kernels``), which never
holds scores in memory: ``attention_impl`` names the choice and ``choose_attention`` resolves ``auto``
by platform (``choose_cache_attention`` for forwards with a cache).

A forward's choice is made once, as an ``AttentionPlan`` (``plan_attention``, ``plan_cache_attention``):
the form and what it needs (the dense mask; the segments and block; the kernel's key segments, tree
expansion and interpreter flag). The model builds it and passes it down; each layer calls it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from milegpo_jax.models.attention_kernels import KERNEL_BLOCK, fused_causal_attention, kernel_tile
from milegpo_jax.models.model_config import ATTENTION_IMPLS

# A large finite value (not -inf) keeps fully-masked rows (padding queries) finite.
MASKED = jnp.finfo(jnp.float32).min


# model.attention_impl (ATTENTION_IMPLS, named in the jax-free model_config): "auto" resolves by platform;
# "xla" is the dense masked form; "blocks" the block-causal one (model.attention_block); "splash" and
# "gpu_flash" the fused kernels of TPU and GPU.
KERNEL_PLATFORMS = {"splash": "tpu", "gpu_flash": "gpu"}


class TreeExpansion(NamedTuple):
    """How a fused kernel runs tree-packed rows (``train/packing.py``, docs/training.md §3.1): each
    segment's queries, keys and values are gathered after its ancestors' keys and values
    (``index [B, E]``, segment ids ``segments [B, E]``), where causal attention within a segment is the
    tree's attention; ``collect [B, T]`` takes each position's output back."""

    index: jax.Array
    segments: jax.Array
    collect: jax.Array


def same_or_ancestor(q_segments: jax.Array, k_segments: jax.Array, ancestors: jax.Array | None) -> jax.Array:
    """``[..., Tq, Tk]``: the key is real and in the query's segment or in one of its ancestors
    (``ancestors [..., Tq, D]``, 0: no ancestor at that level). Causality is the caller's: a tree lays
    ancestors out before their descendants."""
    seen = q_segments[..., :, None] == k_segments[..., None, :]
    if ancestors is not None:
        for level in range(ancestors.shape[-1]):
            seen = seen | (ancestors[..., :, None, level] == k_segments[..., None, :])
    return seen & (k_segments[..., None, :] != 0)


def expand_tree(x: jax.Array, index: jax.Array) -> jax.Array:
    """``x [B, T, ...]`` gathered at ``index [B, E]`` along the positions (gradients scatter-add back)."""
    return jnp.take_along_axis(x, index.reshape(index.shape + (1,) * (x.ndim - 2)), axis=1)


def check_attention_impl(impl: str, platform: str) -> None:
    """Refuses a kernel on a platform it cannot run on (``platform``: "cpu", "gpu" or "tpu"); whether
    ``impl`` is a form at all is ``RuntimeOptions``' check."""
    needs = KERNEL_PLATFORMS.get(impl)
    if needs is not None and platform != needs:
        choices = ["auto", "xla", "blocks"] + [name for name, where in KERNEL_PLATFORMS.items() if where == platform]
        raise ValueError(f"model.attention_impl={impl!r} runs on {needs.upper()} only; this run's devices are "
                         f"{platform.upper()} (choose {', '.join(choices[:-1])} or {choices[-1]})")


def choose_attention(impl: str, platform: str, length: int, block: int) -> str:
    """The form a cache-free forward of ``length`` positions takes: "xla", "blocks" or a kernel name.

    ``auto`` is the platform's kernel on TPU and GPU, else ``blocks``. A kernel needs a whole number of
    its blocks; shorter or ragged lengths (and ``blocks`` without a whole number of at least two
    ``block``-sized blocks) fall back as the dense form."""
    if impl == "auto":
        impl = next((name for name, where in KERNEL_PLATFORMS.items() if where == platform), "blocks")
    if impl in KERNEL_PLATFORMS:
        if length % KERNEL_BLOCK == 0:
            return impl
        impl = "blocks"
    if impl == "blocks" and uses_blocks(length, block):
        return "blocks"
    return "xla"


def choose_cache_attention(impl: str, platform: str, length: int, start: int | None) -> str:
    """The form of a prefill of ``length`` positions on top of ``start`` written cache slots: a kernel
    ("splash", "gpu_flash") or "xla" (dense over the cache's slots, as every decode step, and always
    when ``start`` is not known statically: None).

    Splash takes an offset causal mask and separate query and key segment ids, so it serves any
    ``start``; the GPU kernel has one segment array and a square causal mask, so it serves an empty
    cache only (``start == 0``). Both need whole 128-position blocks. CPU (``auto``) keeps the dense form."""
    if start is None:
        return "xla"
    if impl == "auto":
        impl = next((name for name, where in KERNEL_PLATFORMS.items() if where == platform), "xla")
    whole_blocks = length % KERNEL_BLOCK == 0 and start % KERNEL_BLOCK == 0
    if impl == "splash" and whole_blocks:
        return impl
    if impl == "gpu_flash" and whole_blocks and start == 0:
        return impl
    return "xla"


def dense_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """Softmax attention with a bool ``mask [B, T, S]`` (True: the query may see the key)."""
    h = q.shape[-1]
    scores = jnp.einsum("btkgh,bskh->bkgts", q, k, preferred_element_type=jnp.float32) * (1.0 / math.sqrt(h))
    scores = jnp.where(mask[:, None, None], scores, MASKED)
    probs = jax.nn.softmax(scores, axis=-1).astype(q.dtype)
    return jnp.einsum("bkgts,bskh->btkgh", probs, v)


def uses_blocks(length: int, block: int) -> bool:
    """Whether a cache-free forward of ``length`` positions runs block-causal with ``block``: the
    length must be a whole number of at least two blocks (else the dense form is as cheap)."""
    return block > 0 and length % block == 0 and length >= 2 * block


def _shift_blocks(x: jax.Array, offset: int, fill: float) -> jax.Array:
    """``x [B, n - offset, ...]`` placed at query blocks ``offset..n-1`` of ``[B, n, ...]``."""
    return jnp.pad(x, [(0, 0), (offset, 0)] + [(0, 0)] * (x.ndim - 2), constant_values=fill)


def blocked_causal_attention(q: jax.Array, k: jax.Array, v: jax.Array, segments: jax.Array, block: int,
                             ancestors: jax.Array | None = None) -> jax.Array:
    """Causal attention within segments (``segments [B, T]``, 0: padding) and, for tree-packed rows,
    into each position's ancestor segments (``ancestors [B, T, D]``), block pairs on or below the
    diagonal only. ``T`` must be a multiple of ``block``."""
    b, t, kv_heads, groups, h = q.shape
    if t % block or k.shape[1] != t:
        raise ValueError(f"blocked attention needs T == S, a multiple of block {block}; got {t} and {k.shape[1]}")
    n = t // block
    qb = q.reshape(b, n, block, kv_heads, groups, h)
    kb = k.reshape(b, n, block, kv_heads, h)
    vb = v.reshape(b, n, block, kv_heads, h)
    sb = segments.reshape(b, n, block)
    ab = None if ancestors is None else ancestors.reshape(b, n, block, ancestors.shape[-1])
    within_block = jnp.tril(jnp.ones((block, block), bool))
    scale = 1.0 / math.sqrt(h)

    # scores[d]: query blocks d..n-1 against key blocks 0..n-1-d, [B, n - d, kv, g, block, block]
    scores = []
    for offset in range(n):
        s = jnp.einsum("bnqkgh,bnskh->bnkgqs", qb[:, offset:], kb[:, : n - offset],
                       preferred_element_type=jnp.float32) * scale
        seen = same_or_ancestor(sb[:, offset:], sb[:, : n - offset], None if ab is None else ab[:, offset:])
        if offset == 0:
            seen = seen & within_block
        scores.append(jnp.where(seen[:, :, None, None], s, MASKED))

    # the softmax across all offsets: one maximum, then the sums of exps and of exp-weighted values
    row_max = scores[0].max(-1)
    for offset in range(1, n):
        row_max = jnp.maximum(row_max, _shift_blocks(scores[offset].max(-1), offset, MASKED))
    row_max = jax.lax.stop_gradient(row_max)  # any constant per row gives the same softmax
    total = jnp.zeros(row_max.shape, jnp.float32)
    weighted = jnp.zeros((b, n, kv_heads, groups, block, h), jnp.float32)
    for offset, s in enumerate(scores):
        p = jnp.exp(s - row_max[:, offset:, ..., None])
        total = total + _shift_blocks(p.sum(-1), offset, 0.0)
        part = jnp.einsum("bnkgqs,bnskh->bnkgqh", p.astype(v.dtype), vb[:, : n - offset],
                          preferred_element_type=jnp.float32)
        weighted = weighted + _shift_blocks(part, offset, 0.0)
    out = (weighted / total[..., None]).astype(q.dtype)  # [B, n, kv, g, block, h]
    return out.transpose(0, 1, 4, 2, 3, 5).reshape(b, t, kv_heads, groups, h)



class AttentionPlan(NamedTuple):
    """How every layer of one forward attends: the form, chosen and checked once per forward by
    ``plan_attention`` or ``plan_cache_attention``, with what that form needs; the model passes it
    down and each layer calls it on its ``q``, ``k`` and ``v`` (docs/models.md §7)."""

    form: str  # "xla", "blocks" or a kernel name (KERNEL_PLATFORMS)
    mask: jax.Array | None = None  # xla: bool [B, T, S], True where the query may see the key
    segments: jax.Array | None = None  # blocks and kernels: query segment ids [B, T] (0: padding)
    block: int = 0  # blocks: positions per block
    ancestors: jax.Array | None = None  # blocks, tree-packed rows: each position's ancestor segments [B, T, D]
    # kernels: key segment ids [B, S]; the queries are the last T of the S key positions (S > T: a
    # prefill on top of S - T cache slots written before it)
    kv_segments: jax.Array | None = None
    tree: TreeExpansion | None = None  # kernels, tree-packed rows: the expanded layout
    interpret: bool = False  # kernels: run in Pallas's interpreter (on CPU, where they are tested)

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, sharding=None) -> jax.Array:
        """Attention of ``q [B, T, kv_heads, groups, head_dim]`` over ``k``, ``v [B, S, kv_heads,
        head_dim]`` (with a cache: every slot) in this plan's form; ``sharding`` places a kernel."""
        if self.form == "xla":
            return dense_attention(q, k, v, self.mask)
        if self.form == "blocks":
            return blocked_causal_attention(q, k, v, self.segments, self.block, self.ancestors)
        if self.tree is not None:  # each segment laid out after its ancestors (TreeExpansion)
            out = fused_causal_attention(*(expand_tree(x, self.tree.index) for x in (q, k, v)), self.tree.segments,
                                         self.form, sharding=sharding, interpret=self.interpret)
            return expand_tree(out, self.tree.collect)
        seen = self.kv_segments.shape[1]  # with a cache: the slots written so far, ending with this call's
        if seen < k.shape[1]:
            k, v = k[:, :seen], v[:, :seen]
        return fused_causal_attention(q, k, v, self.segments, self.form, kv_segments=self.kv_segments,
                                      sharding=sharding, interpret=self.interpret)


def plan_attention(impl: str, platform: str, segments: jax.Array, block: int, ancestors: jax.Array | None = None,
                   tree: TreeExpansion | None = None) -> AttentionPlan:
    """The plan of a cache-free forward over ``segments [B, T]`` (``choose_attention``): ``impl`` and
    ``block`` are ``RuntimeOptions.attention_impl`` and ``attention_block``, ``platform`` the devices'.
    Tree-packed rows give their ``ancestors``, and for a kernel their ``tree`` expansion too."""
    t = segments.shape[1]
    form = choose_attention(impl, platform, t, block)
    if form in KERNEL_PLATFORMS:
        if ancestors is not None and tree is None:
            raise ValueError(f"tree-packed rows need their expansion for the {form} kernel (packing.Sharing.expand_block)")
        return AttentionPlan(form, segments=segments, kv_segments=segments, tree=tree, interpret=platform == "cpu")
    if form == "blocks":
        return AttentionPlan(form, segments=segments, block=block, ancestors=ancestors)
    causal = jnp.tril(jnp.ones((t, t), bool))
    return AttentionPlan(form, mask=same_or_ancestor(segments, segments, ancestors) & causal[None])


def plan_cache_attention(impl: str, platform: str, segments: jax.Array, slot_segments: jax.Array,
                         cache_index: jax.Array, cache_start: int | None) -> AttentionPlan:
    """The plan of a forward with a cache (``choose_cache_attention``): the queries' ``segments [B, T]``
    are written at slots ``cache_index..`` of the cache's ``slot_segments [B, max_len]`` (already
    holding them); ``cache_start`` is ``cache_index`` when the caller knows it statically (a prefill)."""
    t = segments.shape[1]
    form = choose_cache_attention(impl, platform, t, cache_start)
    if form in KERNEL_PLATFORMS:
        if not isinstance(cache_index, jax.core.Tracer) and int(cache_index) != cache_start:
            raise ValueError(f"cache_start={cache_start}, but the cache has {int(cache_index)} slots written")
        return AttentionPlan(form, segments=segments, kv_segments=slot_segments[:, : cache_start + t],
                             interpret=platform == "cpu")
    query_slots = cache_index + jnp.arange(t)
    key_slots = jnp.arange(slot_segments.shape[1])
    mask = (
        (slot_segments[:, None, :] == segments[:, :, None])
        & (slot_segments[:, None, :] != 0)
        & (key_slots[None, None, :] <= query_slots[None, :, None])
    )
    return AttentionPlan(form, mask=mask)


__all__ = [
    "ATTENTION_IMPLS",
    "KERNEL_BLOCK",
    "KERNEL_PLATFORMS",
    "MASKED",
    "AttentionPlan",
    "TreeExpansion",
    "blocked_causal_attention",
    "check_attention_impl",
    "choose_attention",
    "choose_cache_attention",
    "dense_attention",
    "expand_tree",
    "kernel_tile",
    "plan_attention",
    "plan_cache_attention",
    "same_or_ancestor",
    "uses_blocks",
]

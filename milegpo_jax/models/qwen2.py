"""The decoder-only language model in Flax NNX: Qwen2/Qwen2.5, Llama and Qwen3 checkpoints.

Architecture (as transformers' ``Qwen2ForCausalLM``, ``LlamaForCausalLM``, ``Qwen3ForCausalLM``):
token embedding; per layer RMSNorm -> grouped-query attention with rotary position embeddings (HF's
rotate-half layout) -> residual -> RMSNorm -> SwiGLU MLP -> residual; final RMSNorm; LM head tied to
the embedding or not. The three families differ only in ``ModelConfig`` fields (docs/models.md §1):
``attention_bias`` (q/k/v biases: Qwen2 yes, Llama and Qwen3 no), ``qk_norm`` (Qwen3's per-head
RMSNorm of queries and keys before RoPE), ``head_dim`` (explicit in Qwen3) and ``rope_scaling``
(Llama 3.1's frequency-dependent RoPE scaling). The class keeps its historical name ``Qwen2``.
(Longer than our usual ~450 lines on purpose: the config, the layers and the cached forward of all three
families read top to bottom in one place; ``ModelConfig`` could move out if it grows further.)

Parameters are stored in the layout the einsums use (``q_kernel [embed, heads, head_dim]``, ...) and
carry logical axis names (``milegpo_jax.parallel`` maps them to the mesh). ``ModelConfig`` holds the
architecture plus runtime options: parameter dtype, compute dtype, rematerialisation policy,
scanned layers (one stacked layer scanned with ``lax.scan``: compile time independent of depth) and
the attention block of cache-free forwards (``milegpo_jax.models.attention``, docs/models.md §7).

Forward
-------
``model(input_ids, positions=None, attention_mask=None)`` -> logits ``[B, T, vocab]``.

* ``input_ids``: int ``[B, T]``.
* ``attention_mask``: ``[B, T]``, 0 marks padding; other values are segment ids: a token attends to
  earlier tokens of its own segment only (bool or 0/1 masks are the usual padding case; packed
  sequences use 1, 2, 3, ...). ``None``: every token is real, one segment per row.
* ``positions``: int ``[B, T]`` RoPE positions. ``None``: each token's index within its segment, so a
  left-padded row gets the same positions (and the same logits for its real tokens) as unpadded.
* Logits for padding tokens are finite but meaningless.

KV cache (the sampler's interface)
----------------------------------
``cache = model.init_cache(batch, max_len, dtype=None)`` allocates a ``KVCache``: ``keys``/``values``
``[layers, B, max_len, kv_heads, head_dim]``, ``segment_ids [B, max_len]`` (0 = empty slot or
padding) and ``index``, the next slot to write (a scalar shared by the batch).

``logits, cache = model(input_ids, attention_mask=..., positions=..., cache=cache)`` writes the ``T``
new tokens' keys/values into slots ``[index, index + T)`` for every row, attends to all written,
non-padding slots at or before each query's slot, and returns the advanced cache. A sampler:

1. left-pads prompts to a common length ``P`` and prefills once with ``attention_mask`` marking
   the padding (positions default to 0.. over each row's real tokens);
2. decodes one token per call, ``model(next_ids[:, None], cache=cache)``: the mask defaults to
   all-real and the position to the row's count of real tokens so far.

With a cache each row holds one sequence (segment ids only say real vs padding). ``index + T`` must
not exceed ``max_len``: an eager call raises; inside ``jit`` the caller sizes the cache (an overflowing
write would be clamped by ``dynamic_update_slice``). For prefill, ``model.hidden_states(...)`` and
``model.logits(hidden[:, -1:])`` avoid the LM head on every prompt position. Pass the cache through
``jax.jit(..., donate_argnums=...)`` so XLA updates it in place.

Token log-probabilities
-----------------------
``token_logprobs`` and the LM head live in ``milegpo_jax.models.logprobs`` (chunked over time).
"""

from __future__ import annotations

import dataclasses
import math
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from milegpo_jax.models.attention import (
    ATTENTION_IMPLS,
    KERNEL_PLATFORMS,
    SegmentBlocks,
    SegmentKernel,
    blocked_causal_attention,
    choose_attention,
    dense_attention,
)
from milegpo_jax.models.attention_kernels import fused_causal_attention
from milegpo_jax.models.logprobs import project_to_vocab
from milegpo_jax.parallel import LogicalSharding, constrain, state_shardings

DTYPES = ("float32", "bfloat16", "float16")
REMAT_POLICIES = ("none", "full", "dots")
# config.json model_type of each family this module implements
MODEL_TYPES = ("qwen2", "llama", "qwen3")


class ModelConfigError(ValueError):
    """An invalid model configuration."""


@dataclasses.dataclass(frozen=True)
class Llama3RopeScaling:
    """``rope_scaling`` of type ``llama3``: long wavelengths slowed by ``factor``, short ones kept,
    a smooth blend in between (as transformers' ``_compute_llama3_parameters``)."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int

    def __post_init__(self):
        if not (self.factor > 0 and 0 < self.low_freq_factor < self.high_freq_factor):
            raise ModelConfigError(
                f"llama3 rope_scaling needs factor > 0 and 0 < low_freq_factor < high_freq_factor, got {self}"
            )
        if self.original_max_position_embeddings <= 0:
            raise ModelConfigError(f"llama3 rope_scaling: original_max_position_embeddings must be positive, got {self}")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture (the fields of a Hugging Face ``config.json``) plus runtime options."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int = 0  # 0: hidden_size // num_heads (as transformers when config.json has none)
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 32768
    initializer_range: float = 0.02
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None
    pad_token_id: int | None = None
    model_type: str = "qwen2"  # which HF family config.json names on save
    attention_bias: bool = True  # q/k/v projection biases (Qwen2)
    qk_norm: bool = False  # per-head RMSNorm of q and k before RoPE (Qwen3)
    rope_scaling: Llama3RopeScaling | None = None
    # runtime options (not part of config.json)
    param_dtype: str = "float32"
    dtype: str = "float32"  # compute dtype of activations
    remat: str = "none"  # per layer: "none", "full" (keep only layer inputs), "dots" (keep matmul outputs)
    scan_layers: bool = False
    # cache-free forwards (training, reference log-probs) of a multiple of this many positions attend
    # block-causally (``milegpo_jax.models.attention``); 0: always the dense masked form
    attention_block: int = 0
    # which form cache-free forwards take: "auto" (a fused kernel on TPU/GPU), "xla", "blocks",
    # "splash", "gpu_flash" (``milegpo_jax.models.attention.choose_attention``)
    attention_impl: str = "auto"

    def __post_init__(self):
        sizes = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads")
        for name in sizes:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ModelConfigError(f"{name} must be a positive int, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise ModelConfigError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
        if not self.head_dim:
            if self.hidden_size % self.num_heads:
                raise ModelConfigError(
                    f"hidden_size ({self.hidden_size}) is not divisible by num_heads ({self.num_heads}); "
                    "give head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.head_dim % 2:
            raise ModelConfigError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        if not (self.rope_theta > 0 and self.rms_norm_eps > 0):
            raise ModelConfigError("rope_theta and rms_norm_eps must be positive")
        for name in ("param_dtype", "dtype"):
            if getattr(self, name) not in DTYPES:
                raise ModelConfigError(f"{name} must be one of {DTYPES}, got {getattr(self, name)!r}")
        if self.remat not in REMAT_POLICIES:
            raise ModelConfigError(f"remat must be one of {REMAT_POLICIES}, got {self.remat!r}")
        if not isinstance(self.attention_block, int) or isinstance(self.attention_block, bool) or self.attention_block < 0:
            raise ModelConfigError(f"attention_block must be an int >= 0, got {self.attention_block!r}")
        if self.attention_impl not in ATTENTION_IMPLS:
            raise ModelConfigError(f"attention_impl must be one of {ATTENTION_IMPLS}, got {self.attention_impl!r}")
        if self.model_type not in MODEL_TYPES:
            raise ModelConfigError(f"model_type must be one of {MODEL_TYPES}, got {self.model_type!r}")
        if isinstance(self.rope_scaling, dict):  # e.g. from dataclasses.asdict / a config file
            object.__setattr__(self, "rope_scaling", Llama3RopeScaling(**self.rope_scaling))
        if isinstance(self.eos_token_id, list):
            object.__setattr__(self, "eos_token_id", tuple(self.eos_token_id))  # stay hashable

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    @property
    def compute_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.dtype)

    @property
    def weights_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.param_dtype)


# Public Qwen2.5 shapes (the hub config.json files; tunix/transformers agree).
PRESETS: dict[str, ModelConfig] = {
    "qwen2.5-0.5b": ModelConfig(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_layers=24, num_heads=14,
        num_kv_heads=2, tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151643,
    ),
    "qwen2.5-1.5b": ModelConfig(
        vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_layers=28, num_heads=12,
        num_kv_heads=2, tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151643,
    ),
    "qwen2.5-3b": ModelConfig(
        vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_layers=36, num_heads=16,
        num_kv_heads=2, tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151643,
    ),
    "qwen2.5-7b": ModelConfig(
        vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_layers=28, num_heads=28,
        num_kv_heads=4, tie_word_embeddings=False, bos_token_id=151643, eos_token_id=151643,
    ),
}


def preset(name: str, **overrides) -> ModelConfig:
    """A named public shape, e.g. ``preset("qwen2.5-1.5b", param_dtype="bfloat16", scan_layers=True)``."""
    if name not in PRESETS:
        raise ModelConfigError(f"unknown preset {name!r}; available: {sorted(PRESETS)}")
    return PRESETS[name].replace(**overrides)


# ------------------------------------------------------------------------------------------ cache


@flax.struct.dataclass
class KVCache:
    """Keys/values of every layer for ``max_len`` slots; see the module docstring."""

    keys: jax.Array  # [layers, B, S, kv_heads, head_dim]
    values: jax.Array  # [layers, B, S, kv_heads, head_dim]
    segment_ids: jax.Array  # [B, S] int32; 0 = empty or padding
    index: jax.Array  # [] int32, the next slot to write

    @property
    def max_len(self) -> int:
        return self.keys.shape[2]


CACHE_AXES = ("layers", "batch", "cache_seq", "act_kv_heads", "head_dim")


# ---------------------------------------------------------------------------------------- modules


def _param(rngs: nnx.Rngs | None, init, shape, dtype, axes, stack: tuple[int, ...]) -> nnx.Param:
    """A parameter with a leading stacked-layers dimension when ``stack`` is given."""
    full_shape = (*stack, *shape)
    full_axes = ("layers",) * len(stack) + tuple(axes)
    key = rngs.params() if rngs is not None else jax.random.key(0)
    return nnx.Param(init(key, full_shape, dtype), logical_axes=full_axes)


def _normal(stddev: float):
    return jax.nn.initializers.normal(stddev)


class RMSNorm(nnx.Module):
    def __init__(self, size: int, eps: float, dtype, *, rngs=None, stack: tuple[int, ...] = ()):
        self.eps = eps
        self.scale = _param(rngs, jax.nn.initializers.ones, (size,), dtype, ("norm",), stack)

    def __call__(self, x: jax.Array) -> jax.Array:
        # Statistics in float32 whatever the compute dtype (as transformers).
        xf = x.astype(jnp.float32)
        normed = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + self.eps)
        return self.scale[...].astype(x.dtype) * normed.astype(x.dtype)


def rope_inverse_frequencies(config: ModelConfig) -> np.ndarray:
    """float32 ``[head_dim // 2]`` rotation frequencies, with llama3 scaling when configured."""
    h = config.head_dim
    inv_freq = (1.0 / (config.rope_theta ** (np.arange(0, h, 2, dtype=np.float32) / h))).astype(np.float32)
    scaling = config.rope_scaling
    if scaling is None:
        return inv_freq
    old_len = scaling.original_max_position_embeddings
    low_wavelen = old_len / scaling.low_freq_factor
    high_wavelen = old_len / scaling.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_wavelen, inv_freq / scaling.factor, inv_freq)
    smooth = (old_len / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor)
    blended = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(medium, blended, scaled).astype(np.float32)


def _rope_tables(positions: jax.Array, inv_freq: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """cos/sin ``[B, T, head_dim]`` in float32, halves duplicated (HF's rotate-half layout)."""
    angles = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)
    angles = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles), jnp.sin(angles)


def _apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """x ``[B, T, heads, head_dim]``; rotation computed in float32."""
    xf = x.astype(jnp.float32)
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-xf[..., half:], xf[..., :half]], axis=-1)
    return (xf * cos[:, :, None, :] + rotated * sin[:, :, None, :]).astype(x.dtype)


class Attention(nnx.Module):
    def __init__(self, config: ModelConfig, *, rngs=None, stack: tuple[int, ...] = ()):
        d, n, k, h = config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim
        w, init = config.weights_dtype, _normal(config.initializer_range)
        zeros = jax.nn.initializers.zeros
        self.q_kernel = _param(rngs, init, (d, n, h), w, ("embed", "heads", "head_dim"), stack)
        self.k_kernel = _param(rngs, init, (d, k, h), w, ("embed", "kv_heads", "head_dim"), stack)
        self.v_kernel = _param(rngs, init, (d, k, h), w, ("embed", "kv_heads", "head_dim"), stack)
        self.o_kernel = _param(rngs, init, (n, h, d), w, ("heads", "head_dim", "embed"), stack)
        # Absent parameters (not zero ones) where the family has none: nothing to train or save.
        bias = config.attention_bias
        self.q_bias = _param(rngs, zeros, (n, h), w, ("heads", "head_dim"), stack) if bias else None
        self.k_bias = _param(rngs, zeros, (k, h), w, ("kv_heads", "head_dim"), stack) if bias else None
        self.v_bias = _param(rngs, zeros, (k, h), w, ("kv_heads", "head_dim"), stack) if bias else None
        norm = config.qk_norm
        self.q_norm = RMSNorm(h, config.rms_norm_eps, w, rngs=rngs, stack=stack) if norm else None
        self.k_norm = RMSNorm(h, config.rms_norm_eps, w, rngs=rngs, stack=stack) if norm else None

    def __call__(self, x, cos, sin, mask, sharding, kv, layer_index, cache_index):
        """x ``[B, T, D]``; mask bool ``[B, T, S]``, ``SegmentBlocks`` or ``SegmentKernel``; kv: ``None`` or the whole
        cache's (keys, values)."""
        dt = x.dtype

        def project(kernel, bias, norm, axes):
            y = jnp.einsum("btd,dnh->btnh", x, kernel[...].astype(dt))
            if bias is not None:
                y = y + bias[...].astype(dt)
            if norm is not None:
                y = norm(y)
            return constrain(y, ("batch", "seq", axes, "head_dim"), sharding)

        q = _apply_rope(project(self.q_kernel, self.q_bias, self.q_norm, "act_heads"), cos, sin)
        k = _apply_rope(project(self.k_kernel, self.k_bias, self.k_norm, "act_kv_heads"), cos, sin)
        v = project(self.v_kernel, self.v_bias, None, "act_kv_heads")
        if kv is not None:
            all_keys, all_values = kv
            start = (layer_index, 0, cache_index, 0, 0)
            all_keys = jax.lax.dynamic_update_slice(all_keys, k[None].astype(all_keys.dtype), start)
            all_values = jax.lax.dynamic_update_slice(all_values, v[None].astype(all_values.dtype), start)
            kv = (all_keys, all_values)
            k = jax.lax.dynamic_index_in_dim(all_keys, layer_index, 0, keepdims=False).astype(dt)
            v = jax.lax.dynamic_index_in_dim(all_values, layer_index, 0, keepdims=False).astype(dt)

        b, t, n, h = q.shape
        q = q.reshape(b, t, k.shape[2], n // k.shape[2], h)  # heads of one KV group are adjacent (as repeat_kv)
        if isinstance(mask, SegmentKernel):
            out = fused_causal_attention(q, k, v, mask.segments, mask.impl, sharding=sharding,
                                         interpret=mask.interpret)
        elif isinstance(mask, SegmentBlocks):
            out = blocked_causal_attention(q, k, v, mask.segments, mask.block)
        else:
            out = dense_attention(q, k, v, mask)
        out = out.reshape(b, t, n, h)
        out = constrain(out, ("batch", "seq", "act_heads", "head_dim"), sharding)
        y = jnp.einsum("btnh,nhd->btd", out, self.o_kernel[...].astype(dt))
        return constrain(y, ("batch", "seq", "act_embed"), sharding), kv


class MLP(nnx.Module):
    def __init__(self, config: ModelConfig, *, rngs=None, stack: tuple[int, ...] = ()):
        d, f = config.hidden_size, config.intermediate_size
        w, init = config.weights_dtype, _normal(config.initializer_range)
        self.gate_kernel = _param(rngs, init, (d, f), w, ("embed", "mlp"), stack)
        self.up_kernel = _param(rngs, init, (d, f), w, ("embed", "mlp"), stack)
        self.down_kernel = _param(rngs, init, (f, d), w, ("mlp", "embed"), stack)

    def __call__(self, x, sharding):
        dt = x.dtype
        gate = jnp.einsum("btd,df->btf", x, self.gate_kernel[...].astype(dt))
        up = jnp.einsum("btd,df->btf", x, self.up_kernel[...].astype(dt))
        hidden = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "act_mlp"), sharding)
        y = jnp.einsum("btf,fd->btd", hidden, self.down_kernel[...].astype(dt))
        return constrain(y, ("batch", "seq", "act_embed"), sharding)


class DecoderLayer(nnx.Module):
    def __init__(self, config: ModelConfig, *, rngs=None, stack: tuple[int, ...] = ()):
        w = config.weights_dtype
        self.input_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, w, rngs=rngs, stack=stack)
        self.attn = Attention(config, rngs=rngs, stack=stack)
        self.post_attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, w, rngs=rngs, stack=stack)
        self.mlp = MLP(config, rngs=rngs, stack=stack)

    def __call__(self, x, cos, sin, mask, sharding, kv, layer_index, cache_index):
        attn_out, kv = self.attn(self.input_norm(x), cos, sin, mask, sharding, kv, layer_index, cache_index)
        x = x + attn_out
        x = x + self.mlp(self.post_attn_norm(x), sharding)
        return x, kv


def _segment_ids(attention_mask: jax.Array | None, shape: tuple[int, int]) -> jax.Array:
    if attention_mask is None:
        return jnp.ones(shape, jnp.int32)
    if attention_mask.shape != shape:
        raise ValueError(f"attention_mask has shape {attention_mask.shape}, input_ids {shape}")
    return attention_mask.astype(jnp.int32)


def positions_within_segments(segment_ids: jax.Array) -> jax.Array:
    """Each token's index within its run of equal segment ids, ``[B, T]`` int32."""
    t = segment_ids.shape[1]
    idx = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), segment_ids.shape)
    starts = jnp.concatenate(
        [jnp.ones_like(segment_ids[:, :1], bool), segment_ids[:, 1:] != segment_ids[:, :-1]], axis=1
    )
    return idx - jax.lax.cummax(jnp.where(starts, idx, 0), axis=1)


_REMAT = {
    "full": None,  # jax.checkpoint's default: keep only the inputs
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


class Qwen2(nnx.Module):
    """The causal LM. Build from a ``ModelConfig`` (random init) or with ``load_pretrained``."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, sharding: LogicalSharding | None = None):
        self.config = config
        # Mesh + rules for activation constraints; None on one device. Static (part of the graphdef).
        self.sharding = sharding
        w = config.weights_dtype
        self.embedding = _param(
            rngs, _normal(config.initializer_range), (config.vocab_size, config.hidden_size), w,
            ("vocab", "embed"), (),
        )
        if config.scan_layers:
            self.layers = DecoderLayer(config, rngs=rngs, stack=(config.num_layers,))
        else:
            self.layers = nnx.List([DecoderLayer(config, rngs=rngs) for _ in range(config.num_layers)])
        self.final_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, w, rngs=rngs)
        if not config.tie_word_embeddings:
            self.lm_head = _param(
                rngs, _normal(config.initializer_range), (config.hidden_size, config.vocab_size), w,
                ("embed", "vocab"), (),
            )

    # --- cache

    def init_cache(self, batch: int, max_len: int, dtype=None) -> KVCache:
        """An empty cache for ``batch`` rows of up to ``max_len`` tokens (default: compute dtype)."""
        cfg = self.config
        shape = (cfg.num_layers, batch, max_len, cfg.num_kv_heads, cfg.head_dim)
        dtype = jnp.dtype(dtype or cfg.dtype)
        return KVCache(
            keys=constrain(jnp.zeros(shape, dtype), CACHE_AXES, self.sharding),
            values=constrain(jnp.zeros(shape, dtype), CACHE_AXES, self.sharding),
            segment_ids=constrain(jnp.zeros((batch, max_len), jnp.int32), ("batch", "cache_seq"), self.sharding),
            index=jnp.zeros((), jnp.int32),
        )

    # --- forward

    def hidden_states(
        self,
        input_ids: jax.Array,
        *,
        positions: jax.Array | None = None,
        attention_mask: jax.Array | None = None,
        cache: KVCache | None = None,
        frozen_layers: int = 0,
    ) -> tuple[jax.Array, KVCache | None]:
        """Final-norm hidden states ``[B, T, hidden]`` (compute dtype) and the advanced cache.

        ``frozen_layers``: no gradient flows into the embedding and the first this many decoder
        layers (their output is ``stop_gradient``-ed), so a backward pass stops there
        (``optim.trainable_layers``, docs/training.md §2)."""
        cfg, sh = self.config, self.sharding
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be [batch, time], got shape {input_ids.shape}")
        b, t = input_ids.shape
        segments = _segment_ids(attention_mask, (b, t))
        if positions is not None and positions.shape != (b, t):
            raise ValueError(f"positions has shape {positions.shape}, input_ids {(b, t)}")

        if cache is None:
            if positions is None:
                positions = positions_within_segments(segments)
            # the platform the program is built for: the mesh's devices (a TPU topology when compiling
            # ahead of time on a CPU host), else the default backend
            platform = sh.mesh.devices.flat[0].platform if sh is not None else jax.default_backend()
            form = choose_attention(cfg.attention_impl, platform, t, cfg.attention_block)
            if form in KERNEL_PLATFORMS:
                mask = SegmentKernel(segments, form, interpret=platform == "cpu")
            elif form == "blocks":
                mask = SegmentBlocks(segments, cfg.attention_block)
            else:
                same_segment = segments[:, :, None] == segments[:, None, :]
                causal = jnp.tril(jnp.ones((t, t), bool))
                mask = same_segment & (segments[:, None, :] != 0) & causal[None]
            kv, cache_index = None, None
        else:
            if cache.segment_ids.shape[0] != b:
                raise ValueError(f"cache holds {cache.segment_ids.shape[0]} rows, input_ids {b}")
            if not isinstance(cache.index, jax.core.Tracer) and int(cache.index) + t > cache.max_len:
                raise ValueError(
                    f"cache overflow: {int(cache.index)} slots used + {t} new > max_len {cache.max_len}"
                )
            cache_index = cache.index
            if positions is None:
                seen = jnp.sum(cache.segment_ids != 0, axis=1, dtype=jnp.int32)
                positions = jnp.maximum(seen[:, None] + jnp.cumsum(segments != 0, axis=1) - 1, 0)
            slot_segments = jax.lax.dynamic_update_slice(cache.segment_ids, segments, (0, cache_index))
            query_slots = cache_index + jnp.arange(t)
            key_slots = jnp.arange(cache.max_len)
            mask = (
                (slot_segments[:, None, :] == segments[:, :, None])
                & (slot_segments[:, None, :] != 0)
                & (key_slots[None, None, :] <= query_slots[None, :, None])
            )
            kv = (cache.keys, cache.values)

        x = jnp.take(self.embedding[...], input_ids, axis=0).astype(cfg.compute_dtype)
        x = constrain(x, ("batch", "seq", "act_embed"), sh)
        cos, sin = _rope_tables(positions, rope_inverse_frequencies(cfg))
        if not 0 <= frozen_layers <= cfg.num_layers:
            raise ValueError(f"frozen_layers={frozen_layers}: the model has {cfg.num_layers} layers")
        x, kv = self._decoder_stack(x, cos, sin, mask, kv, cache_index, frozen_layers)
        hidden = self.final_norm(x)

        if cache is not None:
            keys, values = kv
            cache = KVCache(
                keys=constrain(keys, CACHE_AXES, sh),
                values=constrain(values, CACHE_AXES, sh),
                segment_ids=slot_segments,
                index=cache.index + t,
            )
        return hidden, cache

    def _decoder_stack(self, x, cos, sin, mask, kv, cache_index, frozen_layers: int = 0):
        cfg, sh = self.config, self.sharding
        policy = _REMAT.get(cfg.remat)

        def run(layer_params, graphdef, x, kv, layer_index):
            layer = nnx.merge(graphdef, layer_params)
            return layer(x, cos, sin, mask, sh, kv, layer_index, cache_index)

        if cfg.scan_layers:
            graphdef, params = nnx.split(self.layers)

            def body(carry, xs):
                x, kv = carry
                layer_params, layer_index = xs
                return run(layer_params, graphdef, x, kv, layer_index), None

            if cfg.remat != "none":
                body = jax.checkpoint(body, policy=policy)
            # frozen layers: a scan of their own whose output takes no gradient
            spans = [(0, frozen_layers), (frozen_layers, cfg.num_layers)] if frozen_layers else [(0, cfg.num_layers)]
            for begin, end in spans:
                if begin == end:
                    continue
                part = jax.tree.map(lambda a, b=begin, e=end: a[b:e], params)
                (x, kv), _ = jax.lax.scan(body, (x, kv), (part, jnp.arange(begin, end)))
                if end == frozen_layers:
                    x = jax.lax.stop_gradient(x)
            return x, kv

        for layer_index, layer in enumerate(self.layers):
            if cfg.remat == "none":
                x, kv = layer(x, cos, sin, mask, sh, kv, layer_index, cache_index)
            else:
                graphdef, params = nnx.split(layer)
                step = jax.checkpoint(
                    lambda p, x, kv, g=graphdef, i=layer_index: run(p, g, x, kv, i), policy=policy
                )
                x, kv = step(params, x, kv)
            if layer_index + 1 == frozen_layers:
                x = jax.lax.stop_gradient(x)
        return x, kv

    def output_projection(self) -> tuple[jax.Array, bool]:
        """The LM head matrix and whether it is the (tied) embedding ``[vocab, hidden]``."""
        if self.config.tie_word_embeddings:
            return self.embedding[...], True
        return self.lm_head[...], False

    def logits(self, hidden: jax.Array) -> jax.Array:
        """LM head over hidden states ``[B, T, hidden]`` -> ``[B, T, vocab]`` (compute dtype)."""
        weight, tied = self.output_projection()
        return project_to_vocab(hidden, weight, tied, self.sharding)

    def __call__(
        self,
        input_ids: jax.Array,
        *,
        positions: jax.Array | None = None,
        attention_mask: jax.Array | None = None,
        cache: KVCache | None = None,
    ):
        """Logits ``[B, T, vocab]``; with a cache, ``(logits, advanced cache)``."""
        hidden, cache_out = self.hidden_states(
            input_ids, positions=positions, attention_mask=attention_mask, cache=cache
        )
        logits = self.logits(hidden)
        return logits if cache is None else (logits, cache_out)


def init_model(config: ModelConfig, *, seed: int = 0, sharding: LogicalSharding | None = None) -> Qwen2:
    """A randomly initialised model (HF's normal(initializer_range) init; zero biases, unit norms).

    One jitted initialiser; with ``sharding`` every parameter is created directly in its place.
    """
    graphdef, abstract_state = nnx.split(abstract_model(config, sharding))
    out_shardings = None if sharding is None else state_shardings(abstract_state, sharding)

    def create():
        return nnx.state(Qwen2(config, rngs=nnx.Rngs(seed), sharding=sharding))

    return nnx.merge(graphdef, jax.jit(create, out_shardings=out_shardings)())


def abstract_model(config: ModelConfig, sharding: LogicalSharding | None = None) -> Qwen2:
    """The model's structure with ``ShapeDtypeStruct`` leaves: no memory, no computation."""
    return nnx.eval_shape(lambda: Qwen2(config, rngs=nnx.Rngs(0), sharding=sharding))


def num_params(model_or_config: Qwen2 | ModelConfig) -> int:
    model = abstract_model(model_or_config) if isinstance(model_or_config, ModelConfig) else model_or_config
    return sum(math.prod(x.shape) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))


"""The decoder's building blocks in Flax NNX: RMSNorm, rotary embeddings, grouped-query attention,
the SwiGLU MLP and one decoder layer (docs/models.md §1). ``decoder.py`` stacks them into the model.

Parameters are stored in the layout the einsums use (``q_kernel [embed, heads, head_dim]``, ...) and
carry logical axis names (``milegpo_jax.parallel`` maps them to the mesh); a ``stack`` of sizes adds
a leading ``layers`` axis (scanned layers). ``w`` is the weights' dtype.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from milegpo_jax.models.attention import AttentionPlan
from milegpo_jax.models.model_config import ModelConfig
from milegpo_jax.parallel import constrain


def make_param(rngs: nnx.Rngs | None, init, shape, dtype, axes, stack: tuple[int, ...]) -> nnx.Param:
    """A parameter with a leading stacked-layers dimension when ``stack`` is given."""
    full_shape = (*stack, *shape)
    full_axes = ("layers",) * len(stack) + tuple(axes)
    key = rngs.params() if rngs is not None else jax.random.key(0)
    return nnx.Param(init(key, full_shape, dtype), logical_axes=full_axes)


def normal_init(stddev: float):
    return jax.nn.initializers.normal(stddev)


class RMSNorm(nnx.Module):
    def __init__(self, size: int, eps: float, dtype, *, rngs=None, stack: tuple[int, ...] = ()):
        self.eps = eps
        self.scale = make_param(rngs, jax.nn.initializers.ones, (size,), dtype, ("norm",), stack)

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


def rope_tables(positions: jax.Array, inv_freq: np.ndarray) -> tuple[jax.Array, jax.Array]:
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
    def __init__(self, config: ModelConfig, w, *, rngs=None, stack: tuple[int, ...] = ()):
        d, n, k, h = config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim
        init = normal_init(config.initializer_range)
        zeros = jax.nn.initializers.zeros
        self.q_kernel = make_param(rngs, init, (d, n, h), w, ("embed", "heads", "head_dim"), stack)
        self.k_kernel = make_param(rngs, init, (d, k, h), w, ("embed", "kv_heads", "head_dim"), stack)
        self.v_kernel = make_param(rngs, init, (d, k, h), w, ("embed", "kv_heads", "head_dim"), stack)
        self.o_kernel = make_param(rngs, init, (n, h, d), w, ("heads", "head_dim", "embed"), stack)
        # Absent parameters (not zero ones) where the family has none: nothing to train or save.
        bias = config.attention_bias
        self.q_bias = make_param(rngs, zeros, (n, h), w, ("heads", "head_dim"), stack) if bias else None
        self.k_bias = make_param(rngs, zeros, (k, h), w, ("kv_heads", "head_dim"), stack) if bias else None
        self.v_bias = make_param(rngs, zeros, (k, h), w, ("kv_heads", "head_dim"), stack) if bias else None
        norm = config.qk_norm  # the family's (families.FamilySpec)
        self.q_norm = RMSNorm(h, config.rms_norm_eps, w, rngs=rngs, stack=stack) if norm else None
        self.k_norm = RMSNorm(h, config.rms_norm_eps, w, rngs=rngs, stack=stack) if norm else None

    def __call__(self, x, cos, sin, plan: AttentionPlan, sharding, kv, layer_index, cache_index):
        """x ``[B, T, D]``; ``plan``: how this forward attends (models/attention.py); kv: ``None`` or the
        whole cache's (keys, values)."""
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
        out = plan(q, k, v, sharding)
        out = out.reshape(b, t, n, h)
        out = constrain(out, ("batch", "seq", "act_heads", "head_dim"), sharding)
        y = jnp.einsum("btnh,nhd->btd", out, self.o_kernel[...].astype(dt))
        return constrain(y, ("batch", "seq", "act_embed"), sharding), kv


class MLP(nnx.Module):
    def __init__(self, config: ModelConfig, w, *, rngs=None, stack: tuple[int, ...] = ()):
        d, f = config.hidden_size, config.intermediate_size
        init = normal_init(config.initializer_range)
        self.gate_kernel = make_param(rngs, init, (d, f), w, ("embed", "mlp"), stack)
        self.up_kernel = make_param(rngs, init, (d, f), w, ("embed", "mlp"), stack)
        self.down_kernel = make_param(rngs, init, (f, d), w, ("mlp", "embed"), stack)

    def __call__(self, x, sharding):
        dt = x.dtype
        gate = jnp.einsum("btd,df->btf", x, self.gate_kernel[...].astype(dt))
        up = jnp.einsum("btd,df->btf", x, self.up_kernel[...].astype(dt))
        hidden = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "act_mlp"), sharding)
        y = jnp.einsum("btf,fd->btd", hidden, self.down_kernel[...].astype(dt))
        return constrain(y, ("batch", "seq", "act_embed"), sharding)


class DecoderLayer(nnx.Module):
    """``w``: the weights' dtype (``RuntimeOptions.param_dtype``)."""

    def __init__(self, config: ModelConfig, w, *, rngs=None, stack: tuple[int, ...] = ()):
        self.input_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, w, rngs=rngs, stack=stack)
        self.attn = Attention(config, w, rngs=rngs, stack=stack)
        self.post_attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, w, rngs=rngs, stack=stack)
        self.mlp = MLP(config, w, rngs=rngs, stack=stack)

    def __call__(self, x, cos, sin, plan: AttentionPlan, sharding, kv, layer_index, cache_index):
        attn_out, kv = self.attn(self.input_norm(x), cos, sin, plan, sharding, kv, layer_index, cache_index)
        x = x + attn_out
        x = x + self.mlp(self.post_attn_norm(x), sharding)
        return x, kv

"""The decoder-only language model in Flax NNX: Qwen2/Qwen2.5, Llama and Qwen3 checkpoints.

Architecture (as transformers' ``Qwen2ForCausalLM``, ``LlamaForCausalLM``, ``Qwen3ForCausalLM``):
token embedding; per layer RMSNorm -> grouped-query attention with rotary position embeddings (HF's
rotate-half layout) -> residual -> RMSNorm -> SwiGLU MLP -> residual; final RMSNorm; LM head tied to
the embedding or not. The three families differ only in ``ModelConfig`` fields (docs/models.md §1):
``attention_bias`` (q/k/v biases: Qwen2 yes, Llama and Qwen3 no), ``qk_norm`` (Qwen3's per-head
RMSNorm of queries and keys before RoPE), ``head_dim`` (explicit in Qwen3) and ``rope_scaling``
(Llama 3.1's frequency-dependent RoPE scaling), filled in from the family's ``FamilySpec``
(``families.py``).

``ModelConfig`` (``model_config.py``) is the architecture; ``RuntimeOptions`` (``runtime.py``) says how
the model runs: parameter and compute dtypes, rematerialisation, scanned layers (one stacked layer
scanned with ``lax.scan``: compile time independent of depth) and the attention block and form of
cache-free forwards (``milegpo_jax.models.attention``, docs/models.md §7). A model holds both, as
``model.config`` and ``model.runtime``. The layers themselves are in ``layers.py``.

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
write would be clamped by ``dynamic_update_slice``). A prefill that passes ``cache_start`` (the slots
written before it, known statically) attends by a fused kernel on TPU/GPU (docs/models.md §7.1). For
prefill, ``model.hidden_states(...)`` and ``model.logits(hidden[:, -1:])`` avoid the LM head on every
prompt position. Pass the cache through ``jax.jit(..., donate_argnums=...)`` so XLA updates it in place.

Token log-probabilities
-----------------------
``token_logprobs`` and the LM head live in ``milegpo_jax.models.logprobs`` (chunked over time).
"""

from __future__ import annotations

import math

import flax.struct
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from flax import nnx

from milegpo_jax.models.attention import (
    KERNEL_PLATFORMS,
    AttentionPlan,
    TreeExpansion,
    choose_cache_attention,
    plan_attention,
    plan_cache_attention,
)
from milegpo_jax.models.layers import DecoderLayer, RMSNorm, make_param, normal_init, rope_inverse_frequencies, rope_tables
from milegpo_jax.models.logprobs import project_to_vocab
from milegpo_jax.models.model_config import ModelConfig
from milegpo_jax.models.runtime import ModelSpec, RuntimeOptions
from milegpo_jax.parallel import LogicalSharding, constrain, state_shardings

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


LAYER_INPUT = "decoder_layer_input"
_REMAT = {
    "full": None,  # jax.checkpoint's default: keep only the inputs
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    # keep only each layer's input, in host memory: the residuals leave the accelerator (docs/models.md §7.2)
    "offload": jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=[LAYER_INPUT],
        offload_src="device", offload_dst="pinned_host"),
}


class Decoder(nnx.Module):
    """The causal LM. Build from a ``ModelConfig`` (random init) or with ``load_pretrained``;
    ``runtime`` says how it runs (default ``RuntimeOptions()``)."""

    def __init__(self, config: ModelConfig, runtime: RuntimeOptions | None = None, *, rngs: nnx.Rngs,
                 sharding: LogicalSharding | None = None):
        self.config = config
        self.runtime = runtime = runtime or RuntimeOptions()
        # Mesh + rules for activation constraints; None on one device. Static (part of the graphdef).
        self.sharding = sharding
        w = jnp.dtype(runtime.param_dtype)
        self.embedding = make_param(
            rngs, normal_init(config.initializer_range), (config.vocab_size, config.hidden_size), w,
            ("vocab", "embed"), (),
        )
        if runtime.scan_layers:
            self.layers = DecoderLayer(config, w, rngs=rngs, stack=(config.num_layers,))
        else:
            self.layers = nnx.List([DecoderLayer(config, w, rngs=rngs) for _ in range(config.num_layers)])
        self.final_norm = RMSNorm(config.hidden_size, config.rms_norm_eps, w, rngs=rngs)
        if not config.tie_word_embeddings:
            self.lm_head = make_param(
                rngs, normal_init(config.initializer_range), (config.hidden_size, config.vocab_size), w,
                ("embed", "vocab"), (),
            )

    # --- cache

    def init_cache(self, batch: int, max_len: int, dtype=None) -> KVCache:
        """An empty cache for ``batch`` rows of up to ``max_len`` tokens (default: compute dtype)."""
        cfg = self.config
        shape = (cfg.num_layers, batch, max_len, cfg.num_kv_heads, cfg.head_dim)
        dtype = jnp.dtype(dtype or self.runtime.compute_dtype)
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
        cache_start: int | None = None,
        frozen_layers: int = 0,
        segment_ancestors: jax.Array | None = None,
        tree: TreeExpansion | None = None,
        trunk: jax.Array | None = None,
        trunk_only: bool = False,
    ) -> tuple[jax.Array, KVCache | None]:
        """Final-norm hidden states ``[B, T, hidden]`` (compute dtype) and the advanced cache.

        ``cache_start``: with a cache, the slots written before this call when the caller knows them
        statically (a prefill: 0, or the shared prefix's length). It lets a fused kernel attend over
        slots ``[0, cache_start + T)`` instead of scoring every slot (``prefill_uses_kernel``).

        ``frozen_layers``: no gradient flows into the embedding and the first this many decoder
        layers (their output is ``stop_gradient``-ed), so a backward pass stops there
        (``optim.trainable_layers``, docs/training.md §2). Those layers' output, the *trunk*, is the
        same until they change: ``trunk_only`` returns it (``[B, T, hidden]``, no final norm) and a later
        call given it as ``trunk`` skips the embedding and those layers (cache-free only;
        ``milegpo_jax.train.trunk``, docs/training.md §3.2).

        ``segment_ancestors [B, T, D]``: tree-packed rows (cache-free only, with their ``positions``):
        a token also sees every token of the segments listed at its position, laid out before it
        (shared prompt prefixes, docs/training.md §3.1); a fused kernel needs their ``tree``
        expansion (``train/packing.py`` lays out both)."""
        cfg, options, sh = self.config, self.runtime, self.sharding
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be [batch, time], got shape {input_ids.shape}")
        b, t = input_ids.shape
        segments = _segment_ids(attention_mask, (b, t))
        if positions is not None and positions.shape != (b, t):
            raise ValueError(f"positions has shape {positions.shape}, input_ids {(b, t)}")

        impl, platform = options.attention_impl, self.platform()
        if cache is None:
            if positions is None:
                positions = positions_within_segments(segments)
            plan = plan_attention(impl, platform, segments, options.attention_block, segment_ancestors, tree)
            kv, cache_index = None, None
        else:
            if segment_ancestors is not None:
                raise ValueError("segment_ancestors: tree-packed rows are for cache-free forwards only")
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
            plan = plan_cache_attention(impl, platform, segments, slot_segments, cache_index, cache_start)
            kv = (cache.keys, cache.values)

        if not 0 <= frozen_layers <= cfg.num_layers:
            raise ValueError(f"frozen_layers={frozen_layers}: the model has {cfg.num_layers} layers")
        if (trunk is not None or trunk_only) and (cache is not None or not frozen_layers):
            raise ValueError("trunk: a cache-free forward with frozen_layers > 0 only")
        if trunk is None:
            x = jnp.take(self.embedding[...], input_ids, axis=0).astype(options.compute_dtype)
        elif trunk.shape != (b, t, cfg.hidden_size):
            raise ValueError(f"trunk has shape {trunk.shape}, expected {(b, t, cfg.hidden_size)}")
        else:
            x = jax.lax.stop_gradient(trunk.astype(options.compute_dtype))
        x = constrain(x, ("batch", "seq", "act_embed"), sh)
        cos, sin = rope_tables(positions, rope_inverse_frequencies(cfg))
        first, last = (frozen_layers if trunk is not None else 0), (frozen_layers if trunk_only else cfg.num_layers)
        x, kv = self._decoder_stack(x, cos, sin, plan, kv, cache_index, frozen_layers, (first, last))
        if trunk_only:
            return x, None
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

    def platform(self) -> str:
        """The platform the model's programs are built for: the mesh's devices (a TPU topology when
        compiling ahead of time on a CPU host), else the default backend."""
        return self.sharding.mesh.devices.flat[0].platform if self.sharding is not None else jax.default_backend()

    def prefill_attention(self, length: int, cache_start: int | None) -> str:
        """The form of a cached forward of ``length`` positions on top of ``cache_start`` written slots:
        a kernel's name or "xla", the dense form over every slot (always when ``cache_start`` is not
        known; ``choose_cache_attention``, docs/models.md §7.1)."""
        return choose_cache_attention(self.runtime.attention_impl, self.platform(), length, cache_start)

    def prefill_uses_kernel(self, length: int, cache_start: int | None) -> bool:
        """Whether that prefill runs a fused kernel. Then the sampler prefills the prompt in one pass,
        not in chunks: the kernel never holds the scores that chunking bounds."""
        return self.prefill_attention(length, cache_start) in KERNEL_PLATFORMS

    def _decoder_stack(self, x, cos, sin, plan: AttentionPlan, kv, cache_index, frozen_layers: int = 0,
                       layer_range: tuple[int, int] | None = None):
        """Layers ``layer_range`` (default all) over the residual ``x``; no gradient below ``frozen_layers``."""
        cfg, options, sh = self.config, self.runtime, self.sharding
        first, last = layer_range or (0, cfg.num_layers)
        policy = _REMAT.get(options.remat)

        def run(layer_params, graphdef, x, kv, layer_index):
            x = checkpoint_name(x, LAYER_INPUT)  # the residual the "offload" policy moves to the host
            layer = nnx.merge(graphdef, layer_params)
            return layer(x, cos, sin, plan, sh, kv, layer_index, cache_index)

        if options.scan_layers:
            graphdef, params = nnx.split(self.layers)

            def body(carry, xs):
                x, kv = carry
                layer_params, layer_index = xs
                return run(layer_params, graphdef, x, kv, layer_index), None

            if options.remat != "none":
                body = jax.checkpoint(body, policy=policy)
            # frozen layers: a scan of their own whose output takes no gradient
            spans = [(first, min(frozen_layers, last)), (max(frozen_layers, first), last)] if frozen_layers else [(first, last)]
            for begin, end in spans:
                if begin == end:
                    continue
                part = jax.tree.map(lambda a, b=begin, e=end: a[b:e], params)
                (x, kv), _ = jax.lax.scan(body, (x, kv), (part, jnp.arange(begin, end)))
                if end == frozen_layers:
                    x = jax.lax.stop_gradient(x)
            return x, kv

        for layer_index in range(first, last):
            layer = self.layers[layer_index]
            if options.remat == "none":
                x, kv = layer(x, cos, sin, plan, sh, kv, layer_index, cache_index)
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


def init_model(config: ModelConfig, runtime: RuntimeOptions | None = None, *, seed: int = 0,
               sharding: LogicalSharding | None = None) -> Decoder:
    """A randomly initialised model (HF's normal(initializer_range) init; zero biases, unit norms).

    One jitted initialiser; with ``sharding`` every parameter is created directly in its place.
    """
    graphdef, abstract_state = nnx.split(abstract_model(config, runtime, sharding))
    out_shardings = None if sharding is None else state_shardings(abstract_state, sharding)

    def create():
        return nnx.state(Decoder(config, runtime, rngs=nnx.Rngs(seed), sharding=sharding))

    return nnx.merge(graphdef, jax.jit(create, out_shardings=out_shardings)())


def abstract_model(config: ModelConfig, runtime: RuntimeOptions | None = None,
                   sharding: LogicalSharding | None = None) -> Decoder:
    """The model's structure with ``ShapeDtypeStruct`` leaves: no memory, no computation."""
    return nnx.eval_shape(lambda: Decoder(config, runtime, rngs=nnx.Rngs(0), sharding=sharding))


def num_params(model_or_config: Decoder | ModelConfig | ModelSpec) -> int:
    """Parameters of a model or of the architecture (the same count whatever the runtime options)."""
    if isinstance(model_or_config, Decoder):
        model = model_or_config
    else:
        model = abstract_model(model_or_config.config if isinstance(model_or_config, ModelSpec) else model_or_config)
    return sum(math.prod(x.shape) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))

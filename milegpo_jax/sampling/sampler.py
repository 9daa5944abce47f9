"""Batched generation over the policy (a ``Decoder``): one prefill, then KV-cache decoding in one jitted loop.

``generate(model, prompts, config, key=...)`` takes token-id prompts of any lengths and returns, per
row, the generated ids, their log-probabilities under the policy (temperature 1: what the PPO ratio
needs) and under the sampling distribution, the number of tokens and why the row stopped.

How a call runs:

1. Host: prompts are checked (non-empty, ids inside the vocabulary, prompt + budget within the cache
   limit) and left-padded to a length bucket (``plan.length_bucket``: 8 steps between two powers of
   two); the batch is padded to a power of two with rows that are finished from the start. A new
   prompt length or batch size therefore recompiles only when it crosses a bucket. These shapes and
   the compile-time switches come from ``milegpo_jax.sampling.plan.plan_generation``, the planner ``experiments.aot``
   uses too.
2. ``prefill`` (jit): the padded batch through the model in chunks of prompt positions (a
   ``lax.scan``; ``config.prefill_chunk_tokens`` bounds the attention scores held at once), writing the
   KV cache (``bucket + budget`` slots), the LM head on the last position only, and the first token
   chosen.
3. ``decode`` (jit, decode state donated, so the cache is updated in place): a ``lax.while_loop``
   that feeds each row's newest token, chooses the next one and records it, until every row has
   finished (EOS id, stop sequence, its own token limit) or the budget is spent.

With ``config.prefix_sharing`` step 2 is ``prefill_shared``: the batch's common prefix and each
repeated prompt are prefilled once and their cache copied to the rows that share them
(``milegpo_jax.sampling.prefix``). The call's result says how many positions the prefill ran and how
long prefill and decode took (the trainer logs them as ``time/prefill_s``, ``time/decode_s``).

Under a mesh (a model re-laid out with ``parallel.shard_model(model, mesh, "sample")``) the batch is
placed over the ``data``/``fsdp`` axes and the model shards heads over ``tensor``; the same code runs
on one device. Sampling uses ``fold_in(key, step)`` per decode step, so results depend only on the
key, the prompts and the config (and are the same sharded or not).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from milegpo_jax.models.attention import KERNEL_BLOCK
from milegpo_jax.models.decoder import CACHE_AXES, Decoder, KVCache
from milegpo_jax.parallel import LogicalSharding, constrain
from milegpo_jax.sampling.config import SamplingConfig, SamplingError
from milegpo_jax.sampling.logits import choose_tokens
from milegpo_jax.sampling.prefix import left_padded, share_prefixes
from milegpo_jax.sampling.plan import MIN_PROMPT_BUCKET, Switches, plan_generation
from milegpo_jax.sampling.stopping import (
    EOS,
    FINISH_REASONS,
    LENGTH,
    NO_TOKEN,
    RUNNING,
    STOP,
    StopTable,
    build_stop_table,
    hits_eos,
    matches_stop,
    push_token,
)

# --------------------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class GeneratedSequence:
    """One row of a ``GenerationBatch``, trimmed to its length."""

    token_ids: np.ndarray  # [n] int32, ending with the EOS id / stop sequence when that stopped it
    policy_logprobs: np.ndarray  # [n] float32, log p(token | prefix) at temperature 1
    sampling_logprobs: np.ndarray  # [n] float32, under the distribution sampled from (0 when greedy)
    finish_reason: str  # "eos", "stop" or "length"


@dataclasses.dataclass(frozen=True)
class GenerationBatch:
    """What ``generate`` returns for a batch of prompts: per-row padded numpy arrays
    (``N`` = ``config.max_new_tokens``). Entries at and after ``lengths[b]`` are 0 (ids and
    log-probabilities).
    """

    token_ids: np.ndarray  # [B, N] int32
    policy_logprobs: np.ndarray  # [B, N] float32
    sampling_logprobs: np.ndarray  # [B, N] float32
    lengths: np.ndarray  # [B] int32
    finish_reasons: tuple[str, ...]  # [B]
    # where the call's time went: token positions the prefill ran (padding included; fewer than
    # rows x prompt bucket with prefix sharing), and the seconds of prefill and decode
    prefill_positions: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0

    def __len__(self) -> int:
        return len(self.finish_reasons)

    def row(self, index: int) -> GeneratedSequence:
        n = int(self.lengths[index])
        return GeneratedSequence(
            token_ids=self.token_ids[index, :n],
            policy_logprobs=self.policy_logprobs[index, :n],
            sampling_logprobs=self.sampling_logprobs[index, :n],
            finish_reason=self.finish_reasons[index],
        )

    def rows(self) -> list[GeneratedSequence]:
        return [self.row(i) for i in range(len(self))]


# ------------------------------------------------------------------------------ jitted prefill/decode


@flax.struct.dataclass
class Controls:
    """Runtime inputs that stay fixed during a call."""

    temperature: jax.Array  # [] float32
    top_p: jax.Array  # [] float32
    stops: StopTable
    row_budgets: jax.Array  # [B] int32; 0 for batch padding (finished from the start)
    key: jax.Array


@flax.struct.dataclass
class DecodeState:
    """The loop carry: cache, per-row outputs so far, and where each row stands."""

    cache: KVCache
    token_ids: jax.Array  # [B, N] int32
    policy_logprobs: jax.Array  # [B, N] float32
    sampling_logprobs: jax.Array  # [B, N] float32
    newest: jax.Array  # [B] int32, the token the next decode step feeds
    lengths: jax.Array  # [B] int32
    finish: jax.Array  # [B] int32, RUNNING or a finish reason
    window: jax.Array  # [B, W] int32, newest generated tokens for stop-sequence matching
    step: jax.Array  # [] int32, the output column the next token goes to


def _placed(state: DecodeState, sharding: LogicalSharding | None) -> DecodeState:
    """Rows over the batch axes; the same layout in and out of the loop keeps donation effective."""
    rows = functools.partial(constrain, sharding=sharding)
    return state.replace(
        token_ids=rows(state.token_ids, ("batch", None)),
        policy_logprobs=rows(state.policy_logprobs, ("batch", None)),
        sampling_logprobs=rows(state.sampling_logprobs, ("batch", None)),
        newest=rows(state.newest, ("batch",)),
        lengths=rows(state.lengths, ("batch",)),
        finish=rows(state.finish, ("batch",)),
        window=rows(state.window, ("batch", None)),
    )


def _record_next_token(state: DecodeState, logits: jax.Array, controls: Controls, switches: Switches):
    """Choose each row's next token from ``logits [B, V]``, write it, and update who has finished."""
    token, policy_logprob, sampling_logprob = choose_tokens(
        logits.astype(jnp.float32),
        jax.random.fold_in(controls.key, state.step),
        greedy=switches.greedy,
        temperature=controls.temperature,
        top_k=switches.top_k,
        top_p=controls.top_p if switches.use_top_p else None,
    )
    running = state.finish == RUNNING
    # Finished rows keep computing (static shapes) but record nothing.
    token = jnp.where(running, token, 0)
    column = (0, state.step)

    def write(buffer, values):
        return jax.lax.dynamic_update_slice(buffer, values[:, None].astype(buffer.dtype), column)

    lengths = state.lengths + running.astype(jnp.int32)
    window = jnp.where(running[:, None], push_token(state.window, token), state.window)
    finish = jnp.select(
        [
            ~running,
            hits_eos(token, controls.stops),
            matches_stop(window, controls.stops),
            lengths >= controls.row_budgets,
        ],
        [state.finish, EOS, STOP, LENGTH],
        RUNNING,
    )
    return state.replace(
        token_ids=write(state.token_ids, token),
        policy_logprobs=write(state.policy_logprobs, jnp.where(running, policy_logprob, 0.0)),
        sampling_logprobs=write(state.sampling_logprobs, jnp.where(running, sampling_logprob, 0.0)),
        newest=token,
        lengths=lengths,
        finish=finish.astype(jnp.int32),
        window=window,
        step=state.step + 1,
    )


def _prefill_rows(model: Decoder, cache: KVCache, ids, mask, chunk: int, start: int):
    """``ids [B, L]`` through the model into ``cache`` (``start`` slots already written), ``chunk``
    positions per step (a ``lax.scan``: scores are [batch, heads, chunk, cache slots], not the prompt's
    square); returns the advanced cache and each row's hidden state at its last position ``[B, hidden]``.

    Where a fused kernel serves the prefill (TPU, GPU: ``model.prefill_uses_kernel``) the prompt goes
    in one pass: the kernel holds no scores, and one pass reads the weights once instead of once per chunk."""
    batch, length = ids.shape
    if model.prefill_uses_kernel(length, start):
        hidden, cache = model.hidden_states(ids, attention_mask=mask, cache=cache, cache_start=start)
        return cache, hidden[:, -1]

    def prefill_chunk(cache, chunk_arrays):
        ids, mask = chunk_arrays
        hidden, cache = model.hidden_states(ids, attention_mask=mask, cache=cache)
        return cache, hidden[:, -1]

    whole = length // chunk * chunk

    def chunked(x):  # [B, whole] -> [chunks, B, chunk]
        return x[:, :whole].reshape(batch, whole // chunk, chunk).swapaxes(0, 1)

    cache, last_hidden = jax.lax.scan(prefill_chunk, cache, (chunked(ids), chunked(mask)))
    last_hidden = last_hidden[-1]
    if whole < length:  # a bucket capped by max_cache_len need not be a multiple of the chunk
        cache, last_hidden = prefill_chunk(cache, (ids[:, whole:], mask[:, whole:]))
    return cache, last_hidden


def _first_state(model: Decoder, cache: KVCache, logits, controls: Controls, switches: Switches) -> DecodeState:
    """The decode state after a prefill: the first token chosen from ``logits [B, V]``."""
    batch = logits.shape[0]
    outputs = jnp.zeros((batch, switches.budget), jnp.float32)
    state = DecodeState(
        cache=cache,
        token_ids=jnp.zeros((batch, switches.budget), jnp.int32),
        policy_logprobs=outputs,
        sampling_logprobs=outputs,
        newest=jnp.zeros((batch,), jnp.int32),
        lengths=jnp.zeros((batch,), jnp.int32),
        finish=jnp.where(controls.row_budgets > 0, RUNNING, LENGTH).astype(jnp.int32),
        window=jnp.full((batch, controls.stops.window), NO_TOKEN, jnp.int32),
        step=jnp.zeros((), jnp.int32),
    )
    return _placed(_record_next_token(state, logits, controls, switches), model.sharding)


def _take_rows(cache: KVCache, rows: jax.Array, sharding: LogicalSharding | None) -> KVCache:
    """The cache of rows ``rows`` (a gather: each output row copies the given input row)."""
    return KVCache(
        keys=constrain(cache.keys[:, rows], CACHE_AXES, sharding),
        values=constrain(cache.values[:, rows], CACHE_AXES, sharding),
        segment_ids=constrain(cache.segment_ids[rows], ("batch", "cache_seq"), sharding),
        index=cache.index,
    )


@functools.partial(jax.jit, static_argnames=("graphdef", "switches"))
def prefill(params, prompt_ids, prompt_mask, controls: Controls, *, graphdef, switches: Switches):
    model = nnx.merge(graphdef, params)
    batch, bucket = prompt_ids.shape
    cache = model.init_cache(batch, bucket + switches.budget)
    cache, last_hidden = _prefill_rows(model, cache, prompt_ids, prompt_mask, switches.prefill_chunk, 0)
    logits = model.logits(last_hidden[:, None])[:, 0]  # prompts are left-padded: the last slot is real
    return _first_state(model, cache, logits, controls, switches)


@functools.partial(jax.jit, static_argnames=("graphdef", "switches", "prefix_chunk"))
def prefill_shared(params, prefix_ids, prefix_mask, suffix_ids, suffix_mask, row_suffix, controls: Controls, *,
                   graphdef, switches: Switches, prefix_chunk: int):
    """``prefill`` with the batch's common prefix and repeated prompts computed once
    (``milegpo_jax.sampling.prefix``): the prefix as one row, its cache copied to every distinct
    suffix, the suffixes prefilled, then every batch row takes its suffix's cache and logits."""
    model = nnx.merge(graphdef, params)
    cache = model.init_cache(1, prefix_ids.shape[1] + suffix_ids.shape[1] + switches.budget)
    if prefix_ids.shape[1]:
        cache, _ = _prefill_rows(model, cache, prefix_ids, prefix_mask, prefix_chunk, 0)
    cache = _take_rows(cache, jnp.zeros(suffix_ids.shape[0], jnp.int32), model.sharding)
    cache, last_hidden = _prefill_rows(model, cache, suffix_ids, suffix_mask, switches.prefill_chunk,
                                       prefix_ids.shape[1])
    logits = model.logits(last_hidden[:, None])[:, 0]
    return _first_state(model, _take_rows(cache, row_suffix, model.sharding), logits[row_suffix], controls, switches)


@functools.partial(jax.jit, static_argnames=("graphdef", "switches"), donate_argnames=("state",))
def decode(params, state: DecodeState, controls: Controls, *, graphdef, switches: Switches):
    model = nnx.merge(graphdef, params)

    def unfinished(state):
        return (state.step < switches.budget) & jnp.any(state.finish == RUNNING)

    def decode_one(state):
        logits, cache = model(state.newest[:, None], cache=state.cache)
        state = _record_next_token(state.replace(cache=cache), logits[:, 0], controls, switches)
        return _placed(state, model.sharding)

    return jax.lax.while_loop(unfinished, decode_one, state)


# ------------------------------------------------------------------------------------ host side


def _check_prompts(prompts, vocab_size: int) -> list[np.ndarray]:
    if isinstance(prompts, (str, bytes)):
        raise SamplingError("prompts must be a sequence of token-id sequences, got a string")
    if not isinstance(prompts, Sequence):  # an array of equal-length prompts
        prompts = np.asarray(prompts)
        if prompts.ndim != 2:
            raise SamplingError(f"an array of prompts must be [batch, length], got shape {prompts.shape}")
    if len(prompts) == 0:
        raise SamplingError("no prompts: give at least one")
    checked = []
    for row, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            raise SamplingError(f"prompt {row} is a string; tokenize it first or use generate_text")
        ids = np.asarray(prompt)
        if ids.ndim != 1:
            raise SamplingError(f"prompt {row} must be a 1-D sequence of token ids, got shape {ids.shape}")
        if ids.size == 0:
            raise SamplingError(f"prompt {row} is empty; every prompt needs at least one token")
        if not np.issubdtype(ids.dtype, np.integer):
            raise SamplingError(f"prompt {row} must hold integer token ids, got dtype {ids.dtype}")
        if ids.min() < 0 or ids.max() >= vocab_size:
            raise SamplingError(
                f"prompt {row} has token id {int(ids.min() if ids.min() < 0 else ids.max())} outside the "
                f"model's vocabulary [0, {vocab_size})"
            )
        checked.append(ids.astype(np.int32))
    return checked


def _check_row_budgets(max_new_tokens, rows: int, budget: int) -> np.ndarray:
    if max_new_tokens is None:
        return np.full(rows, budget, np.int32)
    limits = np.asarray(max_new_tokens)
    if limits.shape != (rows,) or not np.issubdtype(limits.dtype, np.integer):
        raise SamplingError(f"max_new_tokens must be {rows} ints (one per prompt), got {max_new_tokens!r}")
    bad = np.flatnonzero((limits < 1) | (limits > budget))
    if bad.size:
        raise SamplingError(
            f"max_new_tokens[{bad[0]}] = {limits[bad[0]]}: each row's limit must be in [1, {budget}] "
            "(config.max_new_tokens is the budget)"
        )
    return limits.astype(np.int32)


def _check_token_ids(config: SamplingConfig, vocab_size: int) -> None:
    for what, ids in (("eos_ids", config.eos_ids), ("stop_sequences", sum(config.stop_sequences, ()))):
        outside = [t for t in ids if t >= vocab_size]
        if outside:
            raise SamplingError(f"{what} has token id {outside[0]} outside the model's vocabulary [0, {vocab_size})")


def _as_key(key, config: SamplingConfig) -> jax.Array:
    if key is None:
        if not config.greedy:
            raise SamplingError("sampling (temperature > 0) needs a PRNG key: pass key=jax.random.key(seed)")
        return jax.random.key(0)  # unused by greedy decoding; any fixed key keeps one compiled shape
    if isinstance(key, int) and not isinstance(key, bool):
        return jax.random.key(key)
    return key


def _put(value, sharding: LogicalSharding | None, axes):
    """Host array -> device, laid out by logical axes under a mesh (a transfer, never a compile)."""
    return jax.device_put(value, None if sharding is None else sharding.named(axes, np.shape(value)))


def generate(
    model: Decoder,
    prompts: Sequence[Sequence[int]],
    config: SamplingConfig,
    *,
    key: jax.Array | int | None = None,
    max_new_tokens: Sequence[int] | None = None,
) -> GenerationBatch:
    """Continue each token-id prompt; see the module docstring.

    ``key``: a ``jax.random.key`` (or an int seed); required unless greedy. ``max_new_tokens``: one
    limit per prompt, each in ``[1, config.max_new_tokens]`` (default: the budget for every row).
    Raises ``SamplingError`` for bad input before anything is compiled.
    """
    vocab_size = model.config.vocab_size
    prompts = _check_prompts(prompts, vocab_size)
    budget = config.max_new_tokens
    row_budgets = _check_row_budgets(max_new_tokens, len(prompts), budget)
    _check_token_ids(config, vocab_size)
    cache_limit = config.max_cache_len or model.config.max_position_embeddings
    longest = max(p.size for p in prompts)
    if longest + budget > cache_limit:
        row = int(np.argmax([p.size for p in prompts]))
        raise SamplingError(
            f"prompt {row} has {longest} tokens: with max_new_tokens={budget} it needs {longest + budget} "
            f"cache slots, more than the {cache_limit} allowed "
            f"({'config.max_cache_len' if config.max_cache_len else 'the model max_position_embeddings'})"
        )
    key = _as_key(key, config)

    # where a fused kernel can take the prefill, buckets are whole kernel blocks
    block = KERNEL_BLOCK if model.prefill_uses_kernel(KERNEL_BLOCK, 0) else MIN_PROMPT_BUCKET
    plan = plan_generation(len(prompts), longest, config, cache_limit, block)
    batch, bucket, switches = plan.batch, plan.bucket, plan.switches
    ids, mask = left_padded(prompts, batch, bucket)
    padded_budgets = np.zeros(batch, np.int32)
    padded_budgets[: len(prompts)] = row_budgets
    sharding = model.sharding
    stops = build_stop_table(config.eos_ids, config.stop_sequences)
    controls = Controls(
        temperature=_put(np.float32(config.temperature or 1.0), sharding, ()),
        top_p=_put(np.float32(config.top_p), sharding, ()),
        stops=jax.tree.map(lambda x: _put(x, sharding, (None,) * x.ndim), stops),
        row_budgets=_put(padded_budgets, sharding, ("batch",)),
        key=key if sharding is None else jax.device_put(key, sharding.named(())),
    )
    graphdef, params = nnx.split(model)
    started = time.perf_counter()
    shared = None
    if config.prefix_sharing:
        shared = share_prefixes(prompts, batch, bucket, budget, cache_limit, config.prefill_chunk_tokens, block)
    if shared is None:
        positions = ids.size
        state = prefill(
            params, _put(ids, sharding, ("batch", "seq")), _put(mask, sharding, ("batch", "seq")), controls,
            graphdef=graphdef, switches=switches,
        )
    else:
        positions = shared.positions_computed
        state = prefill_shared(
            params, _put(shared.prefix_ids, sharding, (None, "seq")), _put(shared.prefix_mask, sharding, (None, "seq")),
            _put(shared.suffix_ids, sharding, ("batch", "seq")), _put(shared.suffix_mask, sharding, ("batch", "seq")),
            _put(shared.row_suffix, sharding, ("batch",)), controls, graphdef=graphdef,
            switches=dataclasses.replace(switches, prefill_chunk=shared.suffix_chunk), prefix_chunk=shared.prefix_chunk,
        )
    jax.block_until_ready(state.newest)  # the split of the call's time (prefill / decode) is logged
    prefilled = time.perf_counter()
    state = decode(params, state, controls, graphdef=graphdef, switches=switches)
    result = _to_generation_batch(state, len(prompts))
    return dataclasses.replace(result, prefill_positions=int(positions), prefill_s=prefilled - started,
                               decode_s=time.perf_counter() - prefilled)


def _to_generation_batch(state: DecodeState, rows: int) -> GenerationBatch:
    token_ids, policy, sampling, lengths, finish = jax.device_get(
        (state.token_ids, state.policy_logprobs, state.sampling_logprobs, state.lengths, state.finish)
    )
    finish = finish[:rows]
    if np.any(finish == RUNNING):  # the loop ends only when every row has a reason
        raise AssertionError("decode loop ended with unfinished rows")
    return GenerationBatch(
        token_ids=np.asarray(token_ids[:rows]),
        policy_logprobs=np.asarray(policy[:rows]),
        sampling_logprobs=np.asarray(sampling[:rows]),
        lengths=np.asarray(lengths[:rows]),
        finish_reasons=tuple(FINISH_REASONS[int(code)] for code in finish),
    )

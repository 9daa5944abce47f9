"""The LM head and token log-probabilities, chunked over time so that neither the forward nor the
backward pass holds the full ``[B, T, vocab]`` float32 logits.

``token_logprobs(model, input_ids, targets, ..., chunk_size=C)`` returns float32 ``[B, T]``
``log p(targets | prefix)``; the PPO loss takes ``logprobs_from_hidden(..., with_entropy=True)``
(the same chunking, plus the entropy of every position's next-token distribution). With
``chunk_size`` the head runs over ``C`` positions at a time inside ``lax.map`` with
rematerialisation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from milegpo_jax.parallel import LogicalSharding, constrain

if TYPE_CHECKING:
    from milegpo_jax.models.decoder import Decoder


def project_to_vocab(hidden: jax.Array, weight: jax.Array, tied: bool, sharding=None) -> jax.Array:
    """``[B, T, hidden]`` -> ``[B, T, vocab]`` logits; ``tied``: ``weight`` is the embedding ``[vocab, hidden]``."""
    equation = "btd,vd->btv" if tied else "btd,dv->btv"
    logits = jnp.einsum(equation, hidden, weight.astype(hidden.dtype))
    return constrain(logits, ("batch", "seq", "act_vocab"), sharding)


def _over_time_chunks(per_chunk: Callable, hidden: jax.Array, targets: jax.Array, chunk_size: int | None):
    """``per_chunk(hidden[:, s], targets[:, s])`` over time slices ``s`` of ``chunk_size`` positions,
    reassembled to ``[B, T]`` (a pytree of them); one call on everything when ``chunk_size`` is None."""
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    b, t = targets.shape
    if chunk_size is None or chunk_size >= t:
        return per_chunk(hidden, targets)
    n = -(-t // chunk_size)
    pad = n * chunk_size - t
    h = jnp.pad(hidden, ((0, 0), (0, pad), (0, 0))).reshape(b, n, chunk_size, -1).swapaxes(0, 1)
    tg = jnp.pad(targets, ((0, 0), (0, pad))).reshape(b, n, chunk_size).swapaxes(0, 1)
    # Recomputed in the backward pass: only one chunk's [B, C, vocab] logits are ever alive.
    out = jax.lax.map(jax.checkpoint(lambda args: per_chunk(*args)), (h, tg))
    return jax.tree.map(lambda x: x.swapaxes(0, 1).reshape(b, n * chunk_size)[:, :t], out)


def logprobs_from_hidden(
    hidden: jax.Array,
    weight: jax.Array,
    targets: jax.Array,
    *,
    tied: bool,
    chunk_size: int | None = None,
    sharding: LogicalSharding | None = None,
    with_entropy: bool = False,
):
    """float32 ``log softmax(hidden @ head)[targets]``, ``[B, T]``, chunked over time when asked;
    ``with_entropy``: ``(log-probs, entropy of every position's next-token distribution)``."""

    def per_chunk(h, tgt):
        logits = project_to_vocab(h, weight, tied, sharding).astype(jnp.float32)
        if not with_entropy:
            picked = jnp.take_along_axis(logits, tgt[..., None], axis=-1)[..., 0]
            return picked - jax.nn.logsumexp(logits, axis=-1)
        log_probs = jax.nn.log_softmax(logits, axis=-1)  # needed whole for the entropy anyway
        picked = jnp.take_along_axis(log_probs, tgt[..., None], axis=-1)[..., 0]
        return picked, -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)

    return _over_time_chunks(per_chunk, hidden, targets, chunk_size)


def token_logprobs(
    model: Decoder,
    input_ids: jax.Array,
    targets: jax.Array,
    *,
    positions: jax.Array | None = None,
    attention_mask: jax.Array | None = None,
    chunk_size: int | None = None,
) -> jax.Array:
    """float32 ``[B, T]`` log-probability of ``targets[b, t]`` given ``input_ids[b, :t + 1]``.

    For a sequence ``ids``: ``token_logprobs(model, ids[:, :-1], ids[:, 1:])``. ``chunk_size`` bounds
    the logits held at once to ``[B, chunk_size, vocab]`` (forward and backward).
    """
    if targets.shape != input_ids.shape:
        raise ValueError(f"targets has shape {targets.shape}, input_ids {input_ids.shape}")
    if chunk_size is not None and chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    hidden, _ = model.hidden_states(input_ids, positions=positions, attention_mask=attention_mask)
    weight, tied = model.output_projection()
    return logprobs_from_hidden(
        hidden, weight, targets, tied=tied, chunk_size=chunk_size, sharding=model.sharding
    )

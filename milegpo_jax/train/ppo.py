"""The PPO update over step rows: packing rows into token arrays, reference log-probs, and one
optimizer step per mini-batch with gradient accumulation over micro-batches.

A row is one environment step: its prompt tokens, the response tokens the sampler produced with their
behaviour log-probs, and the step's scalar advantage from the credit engine. Rows are right-padded
into ``inputs = ids[:-1]``, ``targets = ids[1:]``, with the response positions marked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from milegpo_jax.models.qwen2 import Qwen2, token_logprobs
from milegpo_jax.multihost import to_host
from milegpo_jax.rollout.collector import Generation
from milegpo_jax.shapes import bucket_size
from milegpo_jax.train.loss import PPOLossConfig, ppo_loss, token_logprobs_and_entropy


def pack_rows(
    generations: Sequence[Generation], advantages: Sequence[float], pad_id: int, min_length: int = 16
) -> dict[str, np.ndarray]:
    """Token arrays for a list of rows (lengths bucketed to powers of two)."""
    length = bucket_size(max(len(g.prompt_ids) + len(g.response_ids) for g in generations) - 1, min_length)
    rows = len(generations)
    arrays = {
        "inputs": np.full((rows, length), pad_id, np.int32),
        "targets": np.full((rows, length), pad_id, np.int32),
        "attention_mask": np.zeros((rows, length), np.int32),
        "response_mask": np.zeros((rows, length), np.float32),
        "old_logprobs": np.zeros((rows, length), np.float32),
        "advantages": np.asarray(advantages, np.float32),
    }
    for row, generation in enumerate(generations):
        ids = list(generation.prompt_ids) + list(generation.response_ids)
        n, start = len(ids) - 1, len(generation.prompt_ids) - 1
        arrays["inputs"][row, :n] = ids[:-1]
        arrays["targets"][row, :n] = ids[1:]
        arrays["attention_mask"][row, :n] = 1
        arrays["response_mask"][row, start:n] = 1.0
        arrays["old_logprobs"][row, start:n] = generation.logprobs
    return arrays


def padded_rows(batch: dict[str, np.ndarray], pick: np.ndarray, rows: int) -> dict[str, np.ndarray]:
    """``batch``'s rows ``pick``, padded to ``rows`` rows (copies of the first, with an empty response
    mask, so they add exactly nothing): every micro-batch has one shape, so it compiles once per length
    bucket rather than once per leftover row count."""
    missing = rows - len(pick)
    if missing <= 0:
        return {key: value[pick] for key, value in batch.items()}
    index = np.concatenate([pick, np.repeat(pick[:1], missing)])
    out = {key: value[index] for key, value in batch.items()}
    if "response_mask" in out:
        out["response_mask"][len(pick) :] = 0.0
    return out


def reference_logprobs_of_rows(
    model: Qwen2, batch: dict[str, np.ndarray], *, microbatch_rows: int,
    place: Callable[[np.ndarray], jax.Array] = jnp.asarray, chunk_size: int | None = None,
) -> np.ndarray:
    """``[B, T]`` reference log-probs of every row, ``microbatch_rows`` rows per (fixed-shape) call."""
    rows = batch["inputs"].shape[0]
    keys = ("inputs", "targets", "attention_mask")
    pieces = []
    for start in range(0, rows, microbatch_rows):
        pick = np.arange(start, min(start + microbatch_rows, rows))
        micro = padded_rows({key: batch[key] for key in keys}, pick, microbatch_rows)
        logprobs = reference_logprobs(model, {key: place(value) for key, value in micro.items()}, chunk_size=chunk_size)
        pieces.append(to_host(logprobs)[: len(pick)])
    return np.concatenate(pieces)


@nnx.jit(static_argnames="chunk_size")
def reference_logprobs(model: Qwen2, batch: dict[str, jax.Array], chunk_size: int | None = None) -> jax.Array:
    """``[B, T]`` log-probs of the targets under ``model`` (the frozen reference policy)."""
    return token_logprobs(
        model, batch["inputs"], batch["targets"], attention_mask=batch["attention_mask"], chunk_size=chunk_size
    )


def _loss(model, batch, ref_logprobs, token_count, cfg, chunk_size):
    hidden, _ = model.hidden_states(batch["inputs"], attention_mask=batch["attention_mask"])
    weight, tied = model.output_projection()
    logprobs, entropy = token_logprobs_and_entropy(hidden, weight, batch["targets"], tied=tied, chunk_size=chunk_size)
    return ppo_loss(
        logprobs, batch["old_logprobs"], ref_logprobs, entropy, batch["advantages"], batch["response_mask"],
        token_count, cfg,
    )


@nnx.jit(static_argnames=("cfg", "chunk_size"))
def _gradients(model, batch, ref_logprobs, token_count, cfg, chunk_size):
    (loss, metrics), grads = nnx.value_and_grad(_loss, has_aux=True)(model, batch, ref_logprobs, token_count, cfg, chunk_size)
    return grads, {"loss": loss, **metrics}


@nnx.jit
def _apply(model, optimizer, grads):
    optimizer.update(model, grads)
    return optax.tree.norm(grads)


def ppo_update(
    model: Qwen2,
    optimizer: nnx.Optimizer,
    batch: dict[str, np.ndarray],
    ref_logprobs: np.ndarray,
    cfg: PPOLossConfig,
    *,
    minibatch_rows: int,
    microbatch_rows: int,
    rng: np.random.Generator,
    chunk_size: int | None = None,
    place: Callable[[np.ndarray], jax.Array] = jnp.asarray,
) -> list[dict[str, float]]:
    """One epoch over the rows in shuffled mini-batches; one optimizer step per mini-batch.

    Micro-batch gradients are summed with the loss divided by the mini-batch's response-token count,
    which makes the sum exactly the mini-batch token-mean gradient. ``place`` puts a host array of
    rows on device (under a mesh: split over the batch axes; on many hosts every host passes the same
    rows and keeps its own slice).
    """
    rows = batch["advantages"].shape[0]
    order = rng.permutation(rows)
    history = []
    for start in range(0, rows, minibatch_rows):
        minibatch = order[start : start + minibatch_rows]
        token_count = float(batch["response_mask"][minibatch].sum())
        total, metrics = None, []
        for micro_start in range(0, len(minibatch), microbatch_rows):
            pick = minibatch[micro_start : micro_start + microbatch_rows]
            micro = {key: place(value) for key, value in padded_rows(batch, pick, microbatch_rows).items()}
            ref = place(padded_rows({"ref": ref_logprobs}, pick, microbatch_rows)["ref"])
            grads, micro_metrics = _gradients(model, micro, ref, token_count, cfg, chunk_size)
            total = grads if total is None else jax.tree.map(jnp.add, total, grads)
            metrics.append(micro_metrics)
        grad_norm = _apply(model, optimizer, total)
        metrics = [{key: to_host(value) for key, value in m.items()} for m in metrics]
        summary = {key: float(sum(m[key] for m in metrics)) for key in ("loss", "policy_loss", "kl", "entropy", "clip_fraction", "approx_kl_behaviour", "logprob_gap")}
        summary["ratio_min"] = float(min(m["ratio_min"] for m in metrics))
        summary["ratio_max"] = float(max(m["ratio_max"] for m in metrics))
        summary["grad_norm"] = float(to_host(grad_norm))
        history.append(summary)
    return history

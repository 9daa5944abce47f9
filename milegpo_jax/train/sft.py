"""Supervised fine-tuning on (prompt, response) pairs: the warm start before RL.

Each example is a chat prompt and the response the policy should give (for the demo, the expert's
action wrapped in the response tags). Loss: mean negative log-likelihood of the response tokens and
the closing end-of-turn token, the prompt tokens are context only. The update is the project's one
train step (``milegpo_jax.train.step.TrainStep`` with ``SFTLoss``) on packed rows, with the
optimizer from ``make_optimizer``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx

from milegpo_jax.train.options import OptimizerConfig
from milegpo_jax.models.decoder import Decoder
from milegpo_jax.multihost import to_host
from milegpo_jax.train.optim import make_optimizer
from milegpo_jax.train.packing import (
    NO_SHARING,
    Head,
    Rows,
    Sharing,
    as_micro_batches,
    capacity_for_length,
    pack_micro_batches,
)
from milegpo_jax.train.step import SFTLoss, TrainStep, jit_train_step, update_sharing

SFT_WEIGHT_DECAY = 1e-4  # what the warm start has always used (optax.adamw's default)


@dataclasses.dataclass(frozen=True)
class SFTExample:
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]  # ends with the end-of-turn token


def sft_rows(examples: Sequence[SFTExample]) -> Rows:
    """Rows whose loss mask covers the response tokens (targets after the prompt)."""
    tokens, masks = [], []
    for example in examples:
        ids = np.asarray(list(example.prompt_ids) + list(example.response_ids), np.int32)
        mask = np.zeros(len(ids) - 1, np.float32)
        mask[len(example.prompt_ids) - 1 :] = 1.0
        tokens.append(ids)
        masks.append(mask)
    return Rows(tuple(tokens), {"loss_mask": tuple(masks)})


def sft_optimizer_config(learning_rate: float) -> OptimizerConfig:
    """The warm start's optimizer: constant learning rate, clipping at 1, AdamW."""
    return OptimizerConfig(learning_rate=learning_rate, weight_decay=SFT_WEIGHT_DECAY, grad_clip_norm=1.0)


def packed_sft_batch(rows: Rows, pick: Sequence[int], pad_id: int, max_sequences: int, capacity: int,
                     head: Head | None = None, sharing: Sharing = NO_SHARING) -> dict[str, np.ndarray]:
    """Rows ``pick`` packed (``sharing``: shared prompt prefixes once), the LM head at the loss-masked
    positions (``head``: default from all ``rows``)."""
    head = head or Head.for_rows(rows, SFTLoss.weight_key, sharing.capacity(capacity))
    packed, micro = pack_micro_batches(rows, pick, capacity, max_sequences, pad_id, head, sharing)
    return as_micro_batches(packed.arrays, micro)


def train_sft(
    model: Decoder,
    examples: Sequence[SFTExample],
    *,
    pad_id: int,
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int = 0,
    chunk_size: int | None = None,
    progress=None,
    share_prefixes: bool = True,
) -> tuple[Decoder, list[dict[str, float]]]:
    """``steps`` optimizer steps on random mini-batches of ``examples``; returns the fine-tuned model
    (``model``'s buffers are donated to it) and the per-step metrics. ``share_prefixes``: each
    mini-batch's shared prompt prefixes computed once (the same steps to float rounding)."""
    if not examples:
        raise ValueError("no SFT examples")
    graphdef, params = nnx.split(model)
    step = TrainStep(graphdef, make_optimizer(sft_optimizer_config(learning_rate)), SFTLoss(chunk_size))
    opt_state = step.tx.init(params)
    jitted = jit_train_step(step)
    rows = sft_rows(examples)
    capacity = capacity_for_length(int(rows.lengths.max()))  # one for every step: fewer shapes to compile
    sharing = update_sharing(model, capacity, share_prefixes)
    head = Head.for_rows(rows, SFTLoss.weight_key, sharing.capacity(capacity))
    rng = np.random.default_rng(seed)
    history = []
    for index in range(steps):
        chosen = rng.choice(len(examples), size=min(batch_size, len(examples)), replace=False)
        batch = {k: jax.numpy.asarray(v) for k, v in packed_sft_batch(rows, chosen, pad_id, batch_size, capacity, head, sharing).items()}
        params, opt_state, metrics = jitted(params, opt_state, batch)
        history.append({k: float(to_host(v)) for k, v in metrics.items()})
        if progress is not None:
            progress(index, history[-1])
    return nnx.merge(graphdef, params), history


__all__ = ["SFTExample", "sft_optimizer_config", "sft_rows", "train_sft"]

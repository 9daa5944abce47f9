"""The PPO update over step rows (host side): rows from the rollout, reference log-probs, and one
epoch of shuffled mini-batches, each packed (``milegpo_jax.train.packing``) and fed to the jitted
``TrainStep`` (``milegpo_jax.train.step``).

A row is one environment step: its prompt tokens, the response tokens the sampler produced with their
behaviour log-probs, and the step's scalar advantage from the credit engine (docs/training.md §3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from milegpo_jax.models.logprobs import logprobs_from_hidden
from milegpo_jax.models.decoder import Decoder
from milegpo_jax.multihost import to_host
from milegpo_jax.rollout.collector import PolicyResponse
from milegpo_jax.train.packing import (
    NO_SHARING,
    Head,
    Rows,
    Sharing,
    as_micro_batches,
    capacity_for_length,
    map_micro_batches,
    pack_micro_batches,
    prefix_order,
    unpack_head,
)
from milegpo_jax.train.step import TRUNK_KEY, PPOLoss, layout_arguments
from milegpo_jax.train.trunk import TrunkStates


Place = Callable[[np.ndarray], jax.Array]  # host array [micro, rows, T] -> device (rows over the batch axes)


def ppo_rows(responses: Sequence[PolicyResponse], advantages: Sequence[float]) -> Rows:
    """Rows of the PPO update: response mask, behaviour log-probs and the advantage on every position."""
    tokens, response_masks, old, adv = [], [], [], []
    for response, advantage in zip(responses, advantages, strict=True):
        ids = np.asarray(list(response.prompt_ids) + list(response.response_ids), np.int32)
        n, start = len(ids) - 1, len(response.prompt_ids) - 1
        mask = np.zeros(n, np.float32)
        mask[start:] = 1.0
        logprobs = np.zeros(n, np.float32)
        logprobs[start:] = response.logprobs
        tokens.append(ids)
        response_masks.append(mask)
        old.append(logprobs)
        adv.append(np.full(n, advantage, np.float32))
    return Rows(tuple(tokens), {"response_mask": tuple(response_masks), "old_logprobs": tuple(old), "advantages": tuple(adv)})


def sequence_capacity(rows: Rows) -> int:
    """Positions per packed sequence of an update over ``rows`` (``capacity_for_length`` of the longest)."""
    return capacity_for_length(int(rows.lengths.max()))


@nnx.jit(static_argnames="chunk_size")
def reference_logprobs(model: Decoder, batch: dict[str, jax.Array], chunk_size: int | None = None) -> jax.Array:
    """``[B, K]`` log-probs of the targets at ``head_index`` under ``model`` (the frozen reference policy)."""
    hidden, _ = model.hidden_states(batch["inputs"], **layout_arguments(batch))
    hidden = jnp.take_along_axis(hidden, batch["head_index"][..., None], axis=1)
    weight, tied = model.output_projection()
    return logprobs_from_hidden(hidden, weight, batch["targets"], tied=tied, chunk_size=chunk_size,
                                sharding=model.sharding)


def with_reference_logprobs(
    model: Decoder, rows: Rows, *, capacity: int, max_sequences: int, pad_id: int, place: Place,
    chunk_size: int | None = None, quantum: int = 1, sharing: Sharing = NO_SHARING,
) -> Rows:
    """``rows`` plus a ``ref_logprobs`` field at the response positions (0 elsewhere: the loss reads no
    other): every row packed as the update packs them, the LM head at the response positions,
    ``max_sequences`` sequences per call (a multiple of ``quantum``, the number of batch shards)."""
    everything = list(range(len(rows)))
    head = Head.for_rows(rows, PPOLoss.weight_key, sharing.capacity(capacity))
    packed, micro = pack_micro_batches(rows, everything, capacity, max_sequences, pad_id, head, sharing, quantum)
    layout = {k: v for k, v in packed.arrays.items() if k not in rows.fields}
    logprobs = map_micro_batches(layout, micro, place,
                                 lambda part: to_host(reference_logprobs(model, part, chunk_size=chunk_size)))
    ref = unpack_head(logprobs, packed, rows.fields[PPOLoss.weight_key])
    return Rows(rows.tokens, {**rows.fields, "ref_logprobs": tuple(ref)})


@dataclasses.dataclass
class UpdateStats:
    """What one iteration's update processed: real and total (padded) token positions."""

    real_tokens: int = 0  # the rows' own positions (each row alone)
    total_tokens: int = 0  # positions of the packed sequences, padding included
    computed_tokens: int = 0  # non-padding positions computed: each shared prefix once per sequence

    @property
    def padding_fraction(self) -> float:
        return 1.0 - self.computed_tokens / self.total_tokens if self.total_tokens else 0.0

    @property
    def sharing_factor(self) -> float:
        """The rows' positions per position computed (1 without shared prefixes)."""
        return self.real_tokens / self.computed_tokens if self.computed_tokens else 1.0


def ppo_epoch(
    step, params, opt_state, rows: Rows, *, minibatch_rows: int, microbatch_rows: int, capacity: int,
    rng: np.random.Generator, pad_id: int, place: Place, stats: UpdateStats | None = None, quantum: int = 1,
    head: Head | None = None, sharing: Sharing = NO_SHARING, row_order: str = "shuffled",
    trunk: TrunkStates | None = None,
):
    """One epoch over ``rows`` in mini-batches of ``minibatch_rows`` rows; one optimizer step (``step``,
    a jitted ``TrainStep``) per mini-batch. Each mini-batch is packed into sequences of ``capacity``
    positions (``sharing.span`` times that when tree-packed), at most ``microbatch_rows`` sequences'
    worth per micro-batch (a multiple of ``quantum``, the number of batch shards).

    ``row_order`` (``ppo.row_order``): "shuffled", a random permutation of the rows; "prefix", the
    rows' prefix-tree order (``packing.prefix_order``) cut into mini-batches that are visited in a
    random order, so rows that share prompts share mini-batches (docs/training.md §3.1).

    The LM head runs at the response positions only, ``head_width`` of them per sequence
    (``milegpo_jax.train.packing``); ``head`` overrides that width (the LM-head benchmark's baseline
    sets it to ``capacity``: every position). ``sharing``: each mini-batch's shared prompt prefixes
    computed once (``update_sharing``; the same update to float rounding). ``trunk``: the frozen layers'
    output for every row, computed once (``trunk_states``); each mini-batch then runs only the trained
    layers (the same update to float rounding).

    Returns ``(params, opt_state, history)``: the inputs are donated; ``history`` has one dict of
    float metrics per mini-batch.
    """
    if head is None:
        head = Head.for_rows(rows, PPOLoss.weight_key, sharing.capacity(capacity))
    history = []
    for pick in minibatches(rows, minibatch_rows, rng, row_order):
        packed, micro = pack_micro_batches(rows, pick, capacity, microbatch_rows, pad_id, head, sharing, quantum)
        if stats is not None:
            stats.real_tokens += packed.real_tokens
            stats.total_tokens += packed.arrays["inputs"].size
            stats.computed_tokens += packed.positions_computed
        arrays = packed.arrays if trunk is None else {**packed.arrays, TRUNK_KEY: trunk.gather(packed, pick)}
        batch = {k: place(v) for k, v in as_micro_batches(arrays, micro).items()}
        params, opt_state, metrics = step(params, opt_state, batch)
        history.append({key: float(to_host(value)) for key, value in metrics.items()})
    return params, opt_state, history


ROW_ORDERS = ("shuffled", "prefix")  # ppo.row_order (the config checks the same names; it imports nothing of train/)


def minibatches(rows: Rows, size: int, rng: np.random.Generator, row_order: str = "shuffled") -> list[np.ndarray]:
    """The row indices of each mini-batch of one epoch, in ``row_order`` (``ppo_epoch``)."""
    if row_order == "shuffled":
        order = rng.permutation(len(rows))
        return [order[start : start + size] for start in range(0, len(rows), size)]
    if row_order != "prefix":
        raise ValueError(f"row_order={row_order!r}: choose one of {', '.join(ROW_ORDERS)}")
    order = prefix_order(rows, PPOLoss.weight_key)
    chunks = [order[start : start + size] for start in range(0, len(rows), size)]
    return [chunks[i] for i in rng.permutation(len(chunks))]


def place_on_default_device(array: np.ndarray) -> jax.Array:
    return jnp.asarray(array)


__all__ = ["ROW_ORDERS", "UpdateStats", "minibatches", "place_on_default_device", "ppo_epoch", "ppo_rows",
           "reference_logprobs", "sequence_capacity", "with_reference_logprobs"]

"""The frozen trunk, computed once per update (docs/training.md §3.2).

With ``optim.trainable_layers`` = N the update trains only the top N decoder layers: the embedding
and the layers below them (the *trunk*) never change during an update, so their output at a row's
positions is the same in every mini-batch and epoch. ``trunk_states`` computes it once for all rows,
tree-packed as the reference pass packs them (every shared prompt prefix once in the whole batch, not
once per shuffled mini-batch), and ``TrunkStates.gather`` lays it out for a mini-batch's packing; the
train step then runs only the top N layers from it (``Decoder.hidden_states(trunk=...)``). Each row
sees the same tokens at the same positions with the same causal context either way, so the update is
the same to float rounding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx

from milegpo_jax.models.decoder import Decoder
from milegpo_jax.multihost import to_host
from milegpo_jax.train.packing import LAYOUT_KEYS, Head, Packed, Rows, Sharing, map_micro_batches, pack_micro_batches
from milegpo_jax.train.step import PPOLoss, layout_arguments


@dataclasses.dataclass(frozen=True)
class TrunkStates:
    """The trunk's output for every row: ``values [slots, hidden]`` and, per row, the slot of each of
    its positions (``row_slots[i]``, as ``Packed.row_slots``); ``positions_computed``: the trunk pass's
    non-padding positions (each shared prefix once)."""

    values: np.ndarray
    row_slots: tuple[np.ndarray, ...]
    positions_computed: int

    def gather(self, packed: Packed, pick: Sequence[int]) -> np.ndarray:
        """``[sequences, capacity, hidden]``: the trunk at every slot of ``packed`` (the rows ``pick``);
        padding slots hold the first slot's state, which no real position reads."""
        sequences, capacity = packed.arrays["attention_mask"].shape
        index = np.zeros(sequences * capacity, np.int64)
        for local, slots in enumerate(packed.row_slots):
            index[slots] = self.row_slots[int(pick[local])]
        return self.values[index].reshape(sequences, capacity, -1)


@nnx.jit(static_argnames="layers")
def trunk_forward(model: Decoder, batch: dict[str, jax.Array], layers: int) -> jax.Array:
    """``[B, T, hidden]``: the residual stream after the embedding and the first ``layers`` layers."""
    states, _ = model.hidden_states(batch["inputs"], frozen_layers=layers, trunk_only=True, **layout_arguments(batch))
    return states


def trunk_states(model: Decoder, rows: Rows, *, layers: int, capacity: int, max_sequences: int, pad_id: int,
                 place, sharing: Sharing, quantum: int = 1) -> TrunkStates:
    """The trunk (the embedding and the first ``layers`` layers) at every position of ``rows``: all rows
    packed at once with ``sharing``, ``max_sequences`` sequences of ``capacity`` positions' worth per
    call (a multiple of ``quantum``, the number of batch shards), as ``with_reference_logprobs`` does
    but with no LM head."""
    everything = list(range(len(rows)))
    # This pass has no LM head, so a sequence's weighted positions need no limit (a head as wide as the
    # sequence): the update's head width would hold about half as many rows per sequence.
    head = Head(PPOLoss.weight_key, sharing.capacity(capacity))
    packed, micro = pack_micro_batches(rows, everything, capacity, max_sequences, pad_id, head, sharing, quantum)
    layout = {k: packed.arrays[k] for k in LAYOUT_KEYS if k in packed.arrays}
    values = map_micro_batches(layout, micro, place, lambda part: to_host(trunk_forward(model, part, layers)))
    return TrunkStates(values.reshape(-1, values.shape[-1]), packed.row_slots, packed.positions_computed)


__all__ = ["TrunkStates", "trunk_forward", "trunk_states"]

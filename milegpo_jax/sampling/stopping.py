"""When a row stops: EOS ids and multi-token stop sequences, matched inside the decode loop.

Finish reasons are small ints inside jitted code (``RUNNING`` until a row ends) and strings outside.
A stop sequence matches when a row's newest generated tokens equal it. Each row keeps a window of its
last ``W`` generated tokens (``W`` >= the longest stop sequence), which starts filled with ``-1`` so a
match can never reach back into the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from milegpo_jax.shapes import bucket_size

RUNNING, EOS, STOP, LENGTH = 0, 1, 2, 3
FINISH_REASONS = {EOS: "eos", STOP: "stop", LENGTH: "length"}
NO_TOKEN = -1  # never a token id: empty window slots and padding of the tables below


@flax.struct.dataclass
class StopTable:
    """EOS ids ``[E]`` and right-aligned stop sequences ``[S, W]`` (padding marked invalid)."""

    eos_ids: jax.Array  # [E] int32, NO_TOKEN-padded
    stop_ids: jax.Array  # [S, W] int32, each sequence right-aligned
    stop_valid: jax.Array  # [S, W] bool, False on the left padding

    @property
    def window(self) -> int:
        return self.stop_ids.shape[1]


MIN_TABLE_SIZE = 4  # table sizes are padded to powers of two from here, so they rarely recompile


def build_stop_table(eos_ids: Sequence[int], stop_sequences: Sequence[Sequence[int]]) -> StopTable:
    """Host-side numpy tables, every size padded to a power of two (at least ``MIN_TABLE_SIZE``)."""
    eos = np.full(bucket_size(len(eos_ids), MIN_TABLE_SIZE), NO_TOKEN, np.int32)
    eos[: len(eos_ids)] = eos_ids
    width = bucket_size(max([1, *(len(seq) for seq in stop_sequences)]), MIN_TABLE_SIZE)
    ids = np.full((bucket_size(len(stop_sequences), MIN_TABLE_SIZE), width), NO_TOKEN, np.int32)
    valid = np.zeros(ids.shape, bool)
    for row, seq in enumerate(stop_sequences):
        ids[row, width - len(seq) :] = seq
        valid[row, width - len(seq) :] = True
    return StopTable(eos_ids=eos, stop_ids=ids, stop_valid=valid)


def hits_eos(tokens: jax.Array, table: StopTable) -> jax.Array:
    """``[B]`` bool: the token is one of the EOS ids."""
    return jnp.any(tokens[:, None] == table.eos_ids[None, :], axis=-1)


def push_token(window: jax.Array, tokens: jax.Array) -> jax.Array:
    """The window ``[B, W]`` shifted left by one with ``tokens [B]`` as its newest entry."""
    return jnp.concatenate([window[:, 1:], tokens[:, None]], axis=1)


def matches_stop(window: jax.Array, table: StopTable) -> jax.Array:
    """``[B]`` bool: the window ends with one of the stop sequences."""
    equal = window[:, None, :] == table.stop_ids[None, :, :]  # [B, S, W]
    complete = jnp.all(equal | ~table.stop_valid[None], axis=-1)
    has_sequence = jnp.any(table.stop_valid, axis=-1)  # padding rows of the table match nothing
    return jnp.any(complete & has_sequence[None], axis=-1)

"""Packing training rows several to a sequence (pure numpy; see docs/training.md §3).

A row is one next-token example: ``inputs = ids[:-1]``, ``targets = ids[1:]`` and per-token float
fields (response mask, behaviour log-probs, the advantage broadcast over the row, ...). Rows are
placed into sequences of ``capacity`` tokens by first-fit decreasing; inside a sequence each row gets
its own segment id (1, 2, ...) in ``attention_mask`` and 0 marks the padding at the end. The model
then attends within a segment only and restarts the RoPE positions at every segment, so each row's
log-probs are those it has alone in a right-padded row (``milegpo_jax.models.qwen2``).

The sequences of one mini-batch form ``[micro_batches, sequences_per_micro, capacity]`` with
``sequences_per_micro`` at most the configured micro-batch size and a multiple of ``quantum`` (the
number of batch shards, so every device gets whole sequences), the count of quanta rounded up to three
significant bits (8, 9, ..., 15, 16, 18, ..., 30, 32, 36, ...): at most 12.5 % all-padding
sequences, and few shapes, each compiled once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from milegpo_jax.shapes import bucket_size

MIN_SEQUENCE = 16  # short packed sequences are a power of two of at least this many positions
CAPACITY_STEP = 128  # longer ones a multiple of this: a power of two would waste up to half of each


@dataclasses.dataclass(frozen=True)
class Rows:
    """Rows of next-token examples, each as its own (unpadded) arrays.

    ``tokens[i]``: the row's ids (prompt + response), so it contributes ``len - 1`` positions;
    ``fields[name][i]``: a float32 array of those ``len - 1`` positions.
    """

    tokens: tuple[np.ndarray, ...]
    fields: Mapping[str, tuple[np.ndarray, ...]]

    def __post_init__(self):
        for name, values in self.fields.items():
            if len(values) != len(self.tokens):
                raise ValueError(f"field {name!r} has {len(values)} rows, tokens {len(self.tokens)}")
            for row, (ids, value) in enumerate(zip(self.tokens, values)):
                if len(value) != len(ids) - 1:
                    raise ValueError(f"row {row}: field {name!r} has {len(value)} positions, expected {len(ids) - 1}")

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def lengths(self) -> np.ndarray:
        """Positions per row (``len(ids) - 1``)."""
        return np.asarray([len(ids) - 1 for ids in self.tokens], np.int64)


def first_fit_decreasing(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Row indices per sequence: longest rows first, each into the first sequence with room.

    Deterministic (ties keep the given order); every row must fit ``capacity``."""
    lengths = np.asarray(lengths, np.int64)
    if lengths.size and lengths.max() > capacity:
        raise ValueError(f"a row of {int(lengths.max())} positions does not fit sequences of {capacity}")
    order = np.argsort(-lengths, kind="stable")
    bins: list[list[int]] = []
    room: list[int] = []
    for index in order:
        n = int(lengths[index])
        for b, free in enumerate(room):
            if n <= free:
                bins[b].append(int(index))
                room[b] -= n
                break
        else:
            bins.append([int(index)])
            room.append(capacity - n)
    return bins


def capacity_for_length(longest: int) -> int:
    """Positions per packed sequence for rows of at most ``longest`` positions: the power-of-two
    bucket up to ``CAPACITY_STEP``, above it the next multiple of ``CAPACITY_STEP`` (few shapes, and
    at most ``CAPACITY_STEP - 1`` positions more than the longest row)."""
    if longest <= CAPACITY_STEP:
        return bucket_size(longest, MIN_SEQUENCE)
    return -(-longest // CAPACITY_STEP) * CAPACITY_STEP


def _three_significant_bits(n: int) -> int:
    """``n`` rounded up to the next number of the form ``m * 2**e`` with ``8 <= m < 16`` (or ``n``
    itself below 8): less than 12.5 % larger, and only 8 values per octave, so few shapes compile."""
    if n <= 8:
        return n
    step = 1 << (n.bit_length() - 4)
    return -(-n // step) * step


def micro_batch_shape(sequences: int, max_per_micro: int, quantum: int = 1) -> tuple[int, int]:
    """``(micro_batches, sequences_per_micro)`` holding ``sequences`` with at most ``max_per_micro``
    per micro-batch: ``sequences_per_micro`` is a multiple of ``quantum`` (capped at
    ``max_per_micro``), its count of quanta rounded to three significant bits."""
    if sequences < 1 or max_per_micro < 1 or quantum < 1:
        raise ValueError(f"sequences={sequences}, max_per_micro={max_per_micro}, quantum={quantum}: all must be >= 1")
    micro = -(-sequences // max_per_micro)
    per_micro = -(-sequences // micro)
    per_micro = min(max_per_micro, quantum * _three_significant_bits(-(-per_micro // quantum)))
    return micro, per_micro


@dataclasses.dataclass(frozen=True)
class Packed:
    """``arrays``: ``[sequences, capacity]`` inputs, targets, attention_mask (segment ids) and every
    field; ``placement[i] = (sequence, start)`` of row ``i`` of the packed subset."""

    arrays: dict[str, np.ndarray]
    placement: tuple[tuple[int, int], ...]
    real_tokens: int

    @property
    def padding_fraction(self) -> float:
        total = self.arrays["inputs"].size
        return 1.0 - self.real_tokens / total if total else 0.0


def pack(rows: Rows, pick: Sequence[int], capacity: int, sequences: int, pad_id: int) -> Packed:
    """Rows ``pick`` of ``rows`` packed into ``sequences`` sequences of ``capacity`` positions
    (first-fit decreasing; sequences beyond those needed are all padding)."""
    pick = [int(i) for i in pick]
    lengths = rows.lengths[pick] if pick else np.zeros(0, np.int64)
    bins = first_fit_decreasing(lengths, capacity)
    if len(bins) > sequences:
        raise ValueError(f"{len(pick)} rows need {len(bins)} sequences of {capacity}, only {sequences} given")
    arrays = {
        "inputs": np.full((sequences, capacity), pad_id, np.int32),
        "targets": np.full((sequences, capacity), pad_id, np.int32),
        "attention_mask": np.zeros((sequences, capacity), np.int32),
    }
    for name in rows.fields:
        arrays[name] = np.zeros((sequences, capacity), np.float32)
    placement: list[tuple[int, int]] = [(0, 0)] * len(pick)
    for seq, members in enumerate(bins):
        start = 0
        for segment, local in enumerate(members, start=1):
            row = pick[local]
            ids = np.asarray(rows.tokens[row], np.int32)
            n = len(ids) - 1
            arrays["inputs"][seq, start : start + n] = ids[:-1]
            arrays["targets"][seq, start : start + n] = ids[1:]
            arrays["attention_mask"][seq, start : start + n] = segment
            for name, values in rows.fields.items():
                arrays[name][seq, start : start + n] = values[row]
            placement[local] = (seq, start)
            start += n
    return Packed(arrays, tuple(placement), int(lengths.sum()))


def sequences_needed(rows: Rows, pick: Sequence[int], capacity: int) -> int:
    return len(first_fit_decreasing(rows.lengths[list(pick)], capacity))


def unpack(values: np.ndarray, packed: Packed, lengths: Sequence[int]) -> list[np.ndarray]:
    """Per-row slices of a ``[sequences, capacity]`` result (e.g. log-probs) in ``pick`` order."""
    return [values[seq, start : start + n].copy() for (seq, start), n in zip(packed.placement, lengths)]


def as_micro_batches(arrays: Mapping[str, np.ndarray], micro: int) -> dict[str, np.ndarray]:
    """``[micro * per_micro, ...]`` -> ``[micro, per_micro, ...]``."""
    return {k: v.reshape(micro, v.shape[0] // micro, *v.shape[1:]) for k, v in arrays.items()}


__all__ = ["CAPACITY_STEP", "MIN_SEQUENCE", "Packed", "Rows", "as_micro_batches", "capacity_for_length",
           "first_fit_decreasing", "micro_batch_shape", "pack", "sequences_needed", "unpack"]

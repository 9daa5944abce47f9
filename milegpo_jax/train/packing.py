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

The losses read only the positions a row's loss weight covers (its response tokens), so ``pack``
can also lay those out apart (``head=``): ``head_index`` ``[sequences, width]`` lists each sequence's
weighted positions and every per-position array except ``inputs`` and ``attention_mask`` is taken at
them. The LM head then projects ``width`` positions per sequence instead of ``capacity``, and packing
keeps each sequence's weighted positions within ``width`` (``head_width``: a quarter of the capacity
or the longest row's, whichever is larger).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from milegpo_jax.shapes import bucket_size

MIN_SEQUENCE = 16  # short packed sequences are a power of two of at least this many positions
CAPACITY_STEP = 128  # longer ones a multiple of this: a power of two would waste up to half of each
# An agent's step row is mostly prompt (the observation history): its response is well under a quarter
# of its positions, so a quarter bounds the LM head's work without splitting many sequences.
HEAD_SHARE = 4
FULL_LENGTH_KEYS = ("inputs", "attention_mask")  # what the model reads at every position


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

    def weighted_positions(self, weight_key: str, pick: Sequence[int] | None = None) -> np.ndarray:
        """Positions per row (of ``pick``, default all) whose ``weight_key`` field is positive (those the
        loss reads)."""
        weights = self.fields[weight_key]
        rows = range(len(weights)) if pick is None else pick
        return np.asarray([int(np.count_nonzero(weights[i] > 0)) for i in rows], np.int64)


@dataclasses.dataclass(frozen=True)
class Head:
    """Lay out the positions of ``weight_key`` apart, ``width`` per sequence (see the module doc)."""

    weight_key: str
    width: int

    @classmethod
    def for_rows(cls, rows: Rows, weight_key: str, capacity: int) -> Head:
        """The head an update over ``rows`` in sequences of ``capacity`` uses (``head_width``)."""
        return cls(weight_key, head_width(capacity, int(rows.weighted_positions(weight_key).max())))


def first_fit_decreasing(
    lengths: Sequence[int], capacity: int, heads: Sequence[int] | None = None, head_width: int | None = None,
) -> list[list[int]]:
    """Row indices per sequence: longest rows first, each into the first sequence with room for its
    positions (and, given ``heads``, for its ``heads[i]`` weighted positions within ``head_width``).

    Deterministic (ties keep the given order); every row must fit ``capacity`` (and ``head_width``)."""
    lengths = np.asarray(lengths, np.int64)
    heads = np.zeros_like(lengths) if heads is None else np.asarray(heads, np.int64)
    head_width = capacity if head_width is None else head_width
    if lengths.size and lengths.max() > capacity:
        raise ValueError(f"a row of {int(lengths.max())} positions does not fit sequences of {capacity}")
    if heads.size and heads.max() > head_width:
        raise ValueError(f"a row of {int(heads.max())} weighted positions does not fit a head of {head_width}")
    order = np.argsort(-lengths, kind="stable")
    bins: list[list[int]] = []
    room: list[list[int]] = []  # per sequence: [free positions, free weighted positions]
    for index in order:
        n, h = int(lengths[index]), int(heads[index])
        for b, (free, free_head) in enumerate(room):
            if n <= free and h <= free_head:
                bins[b].append(int(index))
                room[b][0] -= n
                room[b][1] -= h
                break
        else:
            bins.append([int(index)])
            room.append([capacity - n, head_width - h])
    return bins


def capacity_for_length(longest: int) -> int:
    """Positions per packed sequence for rows of at most ``longest`` positions: the power-of-two
    bucket up to ``CAPACITY_STEP``, above it the next multiple of ``CAPACITY_STEP`` (few shapes, and
    at most ``CAPACITY_STEP - 1`` positions more than the longest row)."""
    if longest <= CAPACITY_STEP:
        return bucket_size(longest, MIN_SEQUENCE)
    return -(-longest // CAPACITY_STEP) * CAPACITY_STEP


def head_width(capacity: int, longest_head: int) -> int:
    """Weighted positions per packed sequence of ``capacity`` positions: ``capacity / HEAD_SHARE``, or
    the longest row's ``longest_head`` if larger (rounded as ``capacity_for_length``), at most ``capacity``."""
    return min(capacity, capacity_for_length(max(capacity // HEAD_SHARE, longest_head, 1)))


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


def _bins(rows: Rows, pick: Sequence[int], capacity: int, head: Head | None) -> list[list[int]]:
    pick = list(pick)
    lengths = rows.lengths[pick] if pick else np.zeros(0, np.int64)
    if head is None:
        return first_fit_decreasing(lengths, capacity)
    return first_fit_decreasing(lengths, capacity, rows.weighted_positions(head.weight_key, pick), head.width)


def pack(rows: Rows, pick: Sequence[int], capacity: int, sequences: int, pad_id: int, head: Head | None = None) -> Packed:
    """Rows ``pick`` of ``rows`` packed into ``sequences`` sequences of ``capacity`` positions
    (first-fit decreasing; sequences beyond those needed are all padding); with ``head``, the weighted
    positions laid out apart (module doc)."""
    pick = [int(i) for i in pick]
    lengths = rows.lengths[pick] if pick else np.zeros(0, np.int64)
    bins = _bins(rows, pick, capacity, head)
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
    if head is not None:
        arrays = _at_weighted_positions(arrays, head, pad_id)
    return Packed(arrays, tuple(placement), int(lengths.sum()))


def _at_weighted_positions(arrays: dict[str, np.ndarray], head: Head, pad_id: int) -> dict[str, np.ndarray]:
    """``arrays`` with ``head_index`` added and every array but ``FULL_LENGTH_KEYS`` taken at it; the
    slots past a sequence's weighted positions point at position 0 with weight 0 (and pad targets)."""
    weights = arrays[head.weight_key]
    index = np.zeros((len(weights), head.width), np.int32)
    valid = np.zeros((len(weights), head.width), bool)
    for seq, row_weights in enumerate(weights):
        positions = np.flatnonzero(row_weights > 0)
        index[seq, : len(positions)] = positions
        valid[seq, : len(positions)] = True
    out = {key: arrays[key] for key in FULL_LENGTH_KEYS}
    for key, values in arrays.items():
        if key not in FULL_LENGTH_KEYS:
            fill = pad_id if key == "targets" else 0
            out[key] = np.where(valid, np.take_along_axis(values, index, axis=1), fill).astype(values.dtype)
    out["head_index"] = index
    return out


def sequences_needed(rows: Rows, pick: Sequence[int], capacity: int, head: Head | None = None) -> int:
    return len(_bins(rows, pick, capacity, head))


def unpack(values: np.ndarray, packed: Packed, lengths: Sequence[int]) -> list[np.ndarray]:
    """Per-row slices of a ``[sequences, capacity]`` result (e.g. log-probs) in ``pick`` order."""
    return [values[seq, start : start + n].copy() for (seq, start), n in zip(packed.placement, lengths)]


def as_micro_batches(arrays: Mapping[str, np.ndarray], micro: int) -> dict[str, np.ndarray]:
    """``[micro * per_micro, ...]`` -> ``[micro, per_micro, ...]``."""
    return {k: v.reshape(micro, v.shape[0] // micro, *v.shape[1:]) for k, v in arrays.items()}


__all__ = ["CAPACITY_STEP", "FULL_LENGTH_KEYS", "HEAD_SHARE", "MIN_SEQUENCE", "Head", "Packed", "Rows",
           "as_micro_batches", "capacity_for_length", "first_fit_decreasing", "head_width", "micro_batch_shape", "pack",
           "sequences_needed", "unpack"]

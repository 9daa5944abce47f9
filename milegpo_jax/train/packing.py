"""Packing training rows several to a sequence (pure numpy; see docs/training.md §3).

A row is one next-token example: ``inputs = ids[:-1]``, ``targets = ids[1:]`` and per-token float
fields (response mask, behaviour log-probs, the advantage broadcast over the row, ...). Rows are
placed into sequences of ``capacity`` tokens by first-fit decreasing; inside a sequence each row gets
its own segment id (1, 2, ...) in ``attention_mask`` and 0 marks the padding at the end. The model
then attends within a segment only and restarts the RoPE positions at every segment, so each row's
log-probs are those it has alone in a right-padded row (``milegpo_jax.models.decoder``).

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
from milegpo_jax.train.prefix_tree import (
    MAX_DEPTH,
    MIN_SHARED,
    TREE_SPAN,
    PrefixForest,
    build_forest,
    place_rows,
    unshared,
)

MIN_SEQUENCE = 16  # short packed sequences are a power of two of at least this many positions
CAPACITY_STEP = 128  # longer ones a multiple of this: a power of two would waste up to half of each
# An agent's step row is mostly prompt (the observation history): its response is well under a quarter
# of its positions, so a quarter bounds the LM head's work without splitting many sequences.
HEAD_SHARE = 4
# what the model reads at every position (or, for the kernel path's expansion, per expanded slot): the
# head layout keeps these whole and takes every other array at the weighted positions
LAYOUT_KEYS = ("inputs", "attention_mask", "positions", "segment_ancestors", "expand_index", "expand_segments",
               "collect_index")


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

    Deterministic (ties keep the given order); every row must fit ``capacity`` (and ``head_width``).
    Packing without shared prefixes (``place_rows`` of the ``unshared`` forest)."""
    return [placed.rows for placed in place_rows(unshared(lengths), lengths, capacity, heads, head_width)]


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
class Sharing:
    """How ``pack`` shares prompt prefixes between rows (``prefix_tree``, docs/training.md §3.1).

    ``max_depth``: shared nodes on a row's path (0: none, every row alone as before trees);
    ``min_shared``: the shortest shared node; ``span``: a tree-packed sequence holds this many times
    the rows' capacity (more rows share one copy of a prefix; a micro-batch then holds as many fewer
    sequences, ``sequences_per_micro``); ``expand_block`` > 0: also lay out the index arrays of the
    fused-kernel path (each segment's queries after its ancestors' keys, ``expand_*`` and
    ``collect_index``, in a length that is a multiple of ``expand_block``)."""

    max_depth: int = MAX_DEPTH
    min_shared: int = MIN_SHARED
    span: int = TREE_SPAN
    expand_block: int = 0

    def capacity(self, base_capacity: int) -> int:
        """Positions per packed sequence for rows whose own capacity is ``base_capacity``."""
        return self.span * base_capacity

    def __post_init__(self):
        if self.max_depth < 0 or self.min_shared < 1 or self.expand_block < 0 or self.span < 1:
            raise ValueError(f"{self}: max_depth and expand_block must be >= 0, min_shared and span >= 1")


NO_SHARING = Sharing(max_depth=0, span=1)


@dataclasses.dataclass(frozen=True)
class Packed:
    """``arrays``: ``[sequences, capacity]`` inputs, targets, attention_mask (segment ids) and every
    field (with sharing also ``positions``, ``segment_ancestors`` and the kernel path's arrays);
    ``placement[i] = (sequence, start)`` of row ``i``'s leaf (its positions from ``leaf_starts[i]`` on;
    without sharing the whole row, ``leaf_starts`` all 0); ``row_slots[i]``: where each of row ``i``'s
    positions is computed, as ``sequence * capacity + slot`` (a shared prefix's slots are its node's)."""

    arrays: dict[str, np.ndarray]
    placement: tuple[tuple[int, int], ...]
    leaf_starts: tuple[int, ...]
    real_tokens: int  # the rows' positions, each row counted alone
    row_slots: tuple[np.ndarray, ...]

    @property
    def padding_fraction(self) -> float:
        total = self.arrays["inputs"].size
        return 1.0 - self.positions_computed / total if total else 0.0

    @property
    def positions_computed(self) -> int:
        """Non-padding positions the model computes (each shared node once per sequence)."""
        return int(np.count_nonzero(self.arrays["attention_mask"]))


def shareable_lengths(rows: Rows, pick: Sequence[int], weight_key: str) -> list[int]:
    """Per row of ``pick``: its positions before the first weighted one, which rows may share (at
    least one position stays the row's own)."""
    out = []
    for i in pick:
        weighted = np.flatnonzero(rows.fields[weight_key][i] > 0)
        n = len(rows.tokens[i]) - 1
        out.append(min(int(weighted[0]) if weighted.size else n, n - 1))
    return out


def _placed(rows: Rows, pick: Sequence[int], capacity: int, head: Head | None, sharing: Sharing):
    """The forest of the rows ``pick`` (local indices) and their sequences."""
    pick = list(pick)
    lengths = rows.lengths[pick] if pick else np.zeros(0, np.int64)
    if sharing.max_depth and head is None:
        raise ValueError("prefix sharing needs a Head: its weight key says which positions rows may share")
    if sharing.max_depth:
        limits = shareable_lengths(rows, pick, head.weight_key)
        prefixes = [np.asarray(rows.tokens[i][:s]) for i, s in zip(pick, limits)]
        forest = build_forest(prefixes, lengths, min_shared=sharing.min_shared, max_depth=sharing.max_depth)
    else:
        forest = unshared(lengths)
    heads = None if head is None else rows.weighted_positions(head.weight_key, pick)
    return forest, place_rows(forest, lengths, capacity, heads, None if head is None else head.width)


def pack(rows: Rows, pick: Sequence[int], capacity: int, sequences: int, pad_id: int, head: Head | None = None,
         sharing: Sharing = NO_SHARING) -> Packed:
    """Rows ``pick`` of ``rows`` packed into ``sequences`` sequences of ``capacity`` positions (first
    fit; sequences beyond those needed are all padding); with ``sharing`` each shared prompt prefix
    once per sequence; with ``head``, the weighted positions laid out apart (module doc)."""
    pick = [int(i) for i in pick]
    return _lay_out(rows, pick, *_placed(rows, pick, capacity, head, sharing), capacity, sequences, pad_id, head, sharing)


def _lay_out(rows: Rows, pick: list[int], forest: PrefixForest, placed: list, capacity: int, sequences: int,
             pad_id: int, head: Head | None, sharing: Sharing) -> Packed:
    """``pack`` once the rows' forest and sequences are known (``_placed``)."""
    if len(placed) > sequences:
        raise ValueError(f"{len(pick)} rows need {len(placed)} sequences of {capacity}, only {sequences} given")
    layout = TreeLayout(sequences, capacity, sharing.max_depth)
    arrays = {
        "inputs": np.full((sequences, capacity), pad_id, np.int32),
        "targets": np.full((sequences, capacity), pad_id, np.int32),
        "attention_mask": np.zeros((sequences, capacity), np.int32),
    }
    for name in rows.fields:
        arrays[name] = np.zeros((sequences, capacity), np.float32)
    placement: list[tuple[int, int]] = [(0, 0)] * len(pick)
    row_slots: list[np.ndarray] = [np.zeros(0, np.int64)] * len(pick)
    for seq, sequence in enumerate(placed):
        segment_of: dict[int, int] = {}
        node_slots: dict[int, np.ndarray] = {}
        for node in sequence.nodes:  # ascending ids: parents first
            ids = np.asarray(rows.tokens[pick[forest.source[node]]], np.int32)
            a, b = forest.start[node], forest.end[node]
            ancestors = _ancestors(forest, node, segment_of)
            at = layout.add(seq, a, b - a, ancestors)
            segment_of[node] = layout.segment
            node_slots[node] = seq * capacity + at + np.arange(b - a)
            arrays["inputs"][seq, at : at + b - a] = ids[a:b]
            arrays["targets"][seq, at : at + b - a] = ids[a + 1 : b + 1]
            arrays["attention_mask"][seq, at : at + b - a] = layout.segment
        for local in sequence.rows:
            row, a = pick[local], forest.leaf_start(local)
            ids = np.asarray(rows.tokens[row], np.int32)
            n = len(ids) - 1
            at = layout.add(seq, a, n - a, [segment_of[k] for k in forest.paths[local]])
            arrays["inputs"][seq, at : at + n - a] = ids[a:-1]
            arrays["targets"][seq, at : at + n - a] = ids[a + 1 :]
            arrays["attention_mask"][seq, at : at + n - a] = layout.segment
            for name, values in rows.fields.items():
                arrays[name][seq, at : at + n - a] = values[row][a:]
            placement[local] = (seq, at)
            own = seq * capacity + at + np.arange(n - a)
            row_slots[local] = np.concatenate([node_slots[k] for k in forest.paths[local]] + [own])
    arrays.update(layout.arrays(sharing.expand_block))
    if head is not None:
        arrays = _at_weighted_positions(arrays, head, pad_id)
    lengths = rows.lengths[pick] if pick else np.zeros(0, np.int64)
    leaf_starts = tuple(forest.leaf_start(local) for local in range(len(pick)))
    return Packed(arrays, tuple(placement), leaf_starts, int(lengths.sum()), tuple(row_slots))


def _ancestors(forest: PrefixForest, node: int, segment_of: dict[int, int]) -> list[int]:
    """Segment ids of ``node``'s ancestors in this sequence, top first."""
    chain, parent = [], forest.parent[node]
    while parent >= 0:
        chain.append(segment_of[parent])
        parent = forest.parent[parent]
    return chain[::-1]


class TreeLayout:
    """The segments of packed sequences as they are placed: where each starts, its RoPE positions
    and its ancestors' segments; then the model's arrays of a tree (``arrays``)."""

    def __init__(self, sequences: int, capacity: int, depth: int):
        self.capacity, self.depth = capacity, depth
        self.positions = np.zeros((sequences, capacity), np.int32)
        self.ancestors = np.zeros((sequences, capacity, depth), np.int32)
        self.spans: list[list[tuple[int, int, list[int]]]] = [[] for _ in range(sequences)]  # (start, length, ancestors)
        self.segment = 0

    def add(self, seq: int, first_position: int, length: int, ancestors: list[int]) -> int:
        """Places a segment of ``length`` positions whose RoPE positions start at ``first_position``;
        returns where it starts in the sequence."""
        spans = self.spans[seq]
        at = spans[-1][0] + spans[-1][1] if spans else 0
        self.segment = len(spans) + 1
        self.positions[seq, at : at + length] = np.arange(first_position, first_position + length)
        self.ancestors[seq, at : at + length, : len(ancestors)] = ancestors
        spans.append((at, length, ancestors))
        return at

    def arrays(self, expand_block: int) -> dict[str, np.ndarray]:
        """``positions`` and ``segment_ancestors`` of a tree (none without sharing: the model's own
        positions within segments are then these), and with ``expand_block`` the kernel path's
        ``expand_index``, ``expand_segments`` ``[sequences, E]`` and ``collect_index``."""
        if not self.depth:
            return {}
        out = {"positions": self.positions, "segment_ancestors": self.ancestors}
        if expand_block:
            out.update(self._expansion(expand_block))
        return out

    def _expansion(self, block: int) -> dict[str, np.ndarray]:
        """Each segment as ``[its ancestors' positions..., its own]``: there causal attention within
        segment ids is exactly the tree's attention (models/attention.py ``expand_tree``)."""
        expanded = []
        for spans in self.spans:
            slots, owners, collect = [], [], np.zeros(self.capacity, np.int32)
            for segment, (at, length, ancestors) in enumerate(spans, start=1):
                gathered = [np.arange(spans[a - 1][0], spans[a - 1][0] + spans[a - 1][1]) for a in ancestors]
                own = np.arange(at, at + length)
                collect[own] = sum(len(s) for s in slots) + sum(len(g) for g in gathered) + np.arange(length)
                slots += gathered + [own]
                owners.append(np.full(sum(len(g) for g in gathered) + length, segment, np.int32))
            expanded.append((np.concatenate(slots) if slots else np.zeros(0, np.int64),
                             np.concatenate(owners) if owners else np.zeros(0, np.int32), collect))
        longest = max((len(e[0]) for e in expanded), default=0)  # as expanded_width counts it
        width = block * _three_significant_bits(max(1, -(-longest // block)))
        index = np.zeros((len(expanded), width), np.int32)
        segments = np.zeros((len(expanded), width), np.int32)
        for seq, (slots, owners, _) in enumerate(expanded):
            index[seq, : len(slots)] = slots
            segments[seq, : len(owners)] = owners
        return {"expand_index": index, "expand_segments": segments,
                "collect_index": np.stack([e[2] for e in expanded])}


def _at_weighted_positions(arrays: dict[str, np.ndarray], head: Head, pad_id: int) -> dict[str, np.ndarray]:
    """``arrays`` with ``head_index`` added and every array but ``LAYOUT_KEYS`` taken at it; the
    slots past a sequence's weighted positions point at position 0 with weight 0 (and pad targets)."""
    weights = arrays[head.weight_key]
    index = np.zeros((len(weights), head.width), np.int32)
    valid = np.zeros((len(weights), head.width), bool)
    for seq, row_weights in enumerate(weights):
        positions = np.flatnonzero(row_weights > 0)
        index[seq, : len(positions)] = positions
        valid[seq, : len(positions)] = True
    out = {key: value for key, value in arrays.items() if key in LAYOUT_KEYS}
    for key, values in arrays.items():
        if key not in LAYOUT_KEYS:
            fill = pad_id if key == "targets" else 0
            out[key] = np.where(valid, np.take_along_axis(values, index, axis=1), fill).astype(values.dtype)
    out["head_index"] = index
    return out


def sequences_needed(rows: Rows, pick: Sequence[int], capacity: int, head: Head | None = None,
                     sharing: Sharing = NO_SHARING) -> int:
    return len(_placed(rows, pick, capacity, head, sharing)[1])


def expanded_width(rows: Rows, pick: Sequence[int], capacity: int, head: Head | None, sharing: Sharing) -> int:
    """Slots per sequence of the fused-kernel expansion (0 without it): a segment expands to its
    ancestors' positions and its own, so a shared node to its ``end`` and a row's leaf to the whole
    row; the longest sequence's total, in whole ``expand_block``s (rounded as micro-batch counts)."""
    return _expanded_width(rows, pick, *_placed(rows, pick, capacity, head, sharing), sharing)


def _expanded_width(rows: Rows, pick: Sequence[int], forest: PrefixForest, placed: list, sharing: Sharing) -> int:
    if not (sharing.max_depth and sharing.expand_block):
        return 0
    lengths = rows.lengths[list(pick)]
    longest = max((sum(forest.end[k] for k in p.nodes) + int(lengths[p.rows].sum()) for p in placed), default=0)
    return sharing.expand_block * _three_significant_bits(max(1, -(-longest // sharing.expand_block)))


def sequences_per_micro(max_sequences: int, base_capacity: int, slots: int, quantum: int = 1) -> int:
    """Sequences a micro-batch may hold when each has ``slots`` positions (a tree's ``span`` times the
    rows' ``base_capacity``, or on the kernel path its expanded slots if more): as many as keep its
    positions and attention slots within ``max_sequences * base_capacity``, what the rows packed alone
    would hold, so a tree-packed micro-batch never holds more activations (docs/training.md §3.1).
    A multiple of ``quantum`` (batch shards), at least one."""
    if slots <= base_capacity:
        return max_sequences
    fitting = max_sequences * base_capacity // slots
    return max(quantum, fitting // quantum * quantum)


def pack_micro_batches(rows: Rows, pick: Sequence[int], base_capacity: int, max_sequences: int, pad_id: int,
                       head: Head, sharing: Sharing = NO_SHARING, quantum: int = 1) -> tuple[Packed, int]:
    """Rows ``pick`` packed in ``sharing.capacity(base_capacity)`` positions per sequence, as
    ``(packed, micro_batches)``: at most ``max_sequences`` sequences of ``base_capacity`` positions'
    worth per micro-batch (``sequences_per_micro``), a multiple of ``quantum`` (batch shards)."""
    capacity = sharing.capacity(base_capacity)
    pick = [int(i) for i in pick]
    forest, placed = _placed(rows, pick, capacity, head, sharing)  # once: the forest is most of the host's work
    slots = max(capacity, _expanded_width(rows, pick, forest, placed, sharing))
    micro, per_micro = micro_batch_shape(len(placed), sequences_per_micro(max_sequences, base_capacity, slots, quantum),
                                         quantum)
    return _lay_out(rows, pick, forest, placed, capacity, micro * per_micro, pad_id, head, sharing), micro


def prefix_order(rows: Rows, weight_key: str) -> np.ndarray:
    """All rows in the depth-first order of their shared prompt prefixes: rows that share a prefix are
    neighbours, so mini-batches cut from this order share most (``ppo.row_order = "prefix"``)."""
    everything = list(range(len(rows)))
    limits = shareable_lengths(rows, everything, weight_key)
    prefixes = [np.asarray(rows.tokens[i][:s]) for i, s in zip(everything, limits)]
    return np.asarray(build_forest(prefixes, rows.lengths).order, np.int64)


def unpack(values: np.ndarray, packed: Packed, lengths: Sequence[int]) -> list[np.ndarray]:
    """Per-row values of a ``[sequences, capacity]`` result (e.g. log-probs) in ``pick`` order, at
    each row's own (leaf) positions; a shared prefix's positions (before ``leaf_starts``) are 0."""
    out = []
    for (seq, at), start, n in zip(packed.placement, packed.leaf_starts, lengths):
        row = np.zeros(n, values.dtype)
        row[start:] = values[seq, at : at + n - start]
        out.append(row)
    return out


def unpack_head(values: np.ndarray, packed: Packed, weights: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per-row values of a ``[sequences, width]`` result at ``head_index`` (``pack(..., head=)``) in
    ``pick`` order: each row's weighted positions (``weights[i] > 0``) filled, 0 elsewhere."""
    index = packed.arrays["head_index"]
    out = []
    for (seq, at), start, weight in zip(packed.placement, packed.leaf_starts, weights):
        own = np.flatnonzero(weight > 0)
        # a sequence's weighted positions fill its first slots in ascending order (padding slots repeat 0 after them)
        count = int(np.count_nonzero(np.diff(index[seq]) > 0)) + 1
        slots = np.searchsorted(index[seq][:count], at + own - start)
        row = np.zeros(len(weight), values.dtype)
        row[own] = values[seq, slots]
        out.append(row)
    return out


def as_micro_batches(arrays: Mapping[str, np.ndarray], micro: int) -> dict[str, np.ndarray]:
    """``[micro * per_micro, ...]`` -> ``[micro, per_micro, ...]``."""
    return {k: v.reshape(micro, v.shape[0] // micro, *v.shape[1:]) for k, v in arrays.items()}


def map_micro_batches(arrays: Mapping[str, np.ndarray], micro: int, place, forward) -> np.ndarray:
    """``forward`` (returning host arrays) on each of the ``micro`` micro-batches of ``arrays``, each
    placed on the devices by ``place``; the outputs concatenated along the sequence axis (the
    reference and trunk passes over all of an update's rows)."""
    batches = as_micro_batches(arrays, micro)
    return np.concatenate([forward({k: place(v[index : index + 1])[0] for k, v in batches.items()})
                           for index in range(micro)])


__all__ = ["CAPACITY_STEP", "HEAD_SHARE", "LAYOUT_KEYS", "MIN_SEQUENCE", "NO_SHARING", "Head", "Packed", "Rows",
           "Sharing", "as_micro_batches", "capacity_for_length", "first_fit_decreasing", "head_width",
           "expanded_width", "map_micro_batches", "micro_batch_shape", "pack", "pack_micro_batches", "prefix_order", "sequences_needed", "sequences_per_micro", "shareable_lengths",
           "unpack", "unpack_head"]

"""An open-addressing table numbering pairs of small non-negative integers, for the host passes.

The passes number keys such as an edge (u, v) or a history (s_{t-1}, s_t) per group, 0, 1, ... in
order of first appearance. A dict per group costs a hash of a Python object per step; this table is
two int64 arrays reused across groups (linear probing, Fibonacci hashing, kept at most half full),
and ``clear`` empties only the slots a group filled. Only the order of first appearance decides an
id, so the hashing never shows in the results.
"""

from __future__ import annotations

import numba
import numpy as np

EMPTY = -1
FIBONACCI = np.int64(-7046029254386353131)  # 2^64 / golden ratio, as a signed 64-bit integer


@numba.njit(cache=True)
def pair_table(most_keys: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, ids, filled slots) of an empty table for up to ``most_keys`` keys per use."""
    size = 2
    while size < 2 * most_keys:
        size *= 2
    return np.full(size, EMPTY, np.int64), np.empty(size, np.int32), np.empty(max(most_keys, 1), np.int64)


@numba.njit(cache=True, inline="always")  # inlined: a call per key would cost more than the look-up
def pair_id(keys, ids, filled, count, first, second):
    """(id of the pair (first, second), count of numbered pairs after it): a new pair gets id ``count``.
    ``first`` and ``second`` lie in [0, 2^30)."""
    key = (np.int64(first) << 30) | np.int64(second)
    mask = len(keys) - 1
    slot = ((key * FIBONACCI) >> 40) & mask
    while keys[slot] != EMPTY and keys[slot] != key:
        slot = (slot + 1) & mask
    if keys[slot] == EMPTY:
        keys[slot], ids[slot], filled[count] = key, count, slot
        count += 1
    return ids[slot], count


@numba.njit(cache=True)
def clear(keys, filled, count):
    """Empties the ``count`` slots the last use filled."""
    for i in range(count):
        keys[filled[i]] = EMPTY


@numba.njit(cache=True)
def largest_group_steps(lengths, group_sizes) -> int:
    """Steps of the largest group (what sizes a table used per group)."""
    largest, trajectory = 1, 0
    for g in range(len(group_sizes)):
        count = 0
        for _ in range(group_sizes[g]):
            count += lengths[trajectory]
            trajectory += 1
        largest = max(largest, count)
    return largest

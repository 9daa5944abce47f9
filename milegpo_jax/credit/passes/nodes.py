"""Node and action numbering, the pass every batch needs (docs/credit.md §1.1, docs/credit-implementation.md §1.1).

Node ids per group: the sink 0, then the group's states 1, 2, ... in order of first appearance in
(s_0, s_1 of step 0, s_1, s_2 of step 1, ...) order, where the last next state of a successful
trajectory (episode reward > 0, summed in step order) is the sink and numbers nothing. Action ids:
0, 1, ... per group in order of first appearance. One compiled pass over the steps
(trajectory-major): a table indexed by state code holds the current group's ids and is cleared entry
by entry before the next group.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

SINK = 0  # node id of the success sink in every group


class NodeNumbering(NamedTuple):
    src: np.ndarray  # int32 [S] node id of s_t
    dst: np.ndarray  # int32 [S] node id of s_{t+1} (SINK on the last step of a successful trajectory)
    action: np.ndarray  # int32 [S] per-group action id
    succeeded: np.ndarray  # bool [trajectories] episode reward > 0
    states_per_group: np.ndarray  # int64 [groups] real states (nodes besides the sink)
    state_codes: np.ndarray  # int64 [sum of states_per_group] each group's state codes in node id order


@numba.njit(cache=True)
def dense_codes(codes, size):
    """``codes`` (``size`` of them, their own or a column's share) renumbered 0.. in sorted order if
    they are sparse, and the original of each new code (empty when the codes were kept). Only
    equality of codes matters; sparse codes (a run-long interner over a huge input) are renumbered so
    that the per-group tables stay small."""
    if len(codes) == 0 or codes.max() <= 4 * size + 4096:
        return codes, np.empty(0, np.int64)
    originals = np.unique(codes)
    return np.searchsorted(originals, codes).astype(np.int64), originals


@numba.njit(cache=True)
def number_nodes(state, next_state, action, reward, lengths, group_sizes) -> NodeNumbering:
    """The node and action ids of every step (columns as in ``RolloutColumns``, trajectory-major)."""
    steps, groups = len(state), len(group_sizes)
    states, original_of = dense_codes(np.concatenate((state, next_state)), 2 * steps)
    state, next_state = states[:steps], states[steps:]
    action = dense_codes(action, steps)[0]
    src, dst = np.empty(steps, np.int32), np.empty(steps, np.int32)
    action_ids = np.empty(steps, np.int32)
    succeeded = np.zeros(len(lengths), np.bool_)
    states_per_group = np.zeros(groups, np.int64)
    ordered = np.empty(2 * steps, np.int64)  # the codes of the states numbered so far, in id order
    node_of = np.full(states.max() + 1, -1, np.int32)
    action_of = np.full(action.max() + 1, -1, np.int32)
    group_actions = np.empty(steps, np.int64)
    step, trajectory, numbered = 0, 0, 0
    for g in range(groups):
        first_of_group, count, action_count = numbered, 0, 0
        for _ in range(group_sizes[g]):
            end = step + lengths[trajectory]
            total = 0.0
            for s in range(step, end):
                total += reward[s]
            success = total > 0.0
            succeeded[trajectory] = success
            for s in range(step, end):
                for side in range(2):
                    if side == 1 and success and s == end - 1:
                        dst[s] = SINK
                        continue
                    code = state[s] if side == 0 else next_state[s]
                    if node_of[code] < 0:
                        count += 1
                        node_of[code] = count
                        ordered[numbered] = code
                        numbered += 1
                    if side == 0:
                        src[s] = node_of[code]
                    else:
                        dst[s] = node_of[code]
                a = action[s]
                if action_of[a] < 0:
                    action_of[a] = action_count
                    group_actions[action_count] = a
                    action_count += 1
                action_ids[s] = action_of[a]
            step = end
            trajectory += 1
        for i in range(first_of_group, numbered):
            node_of[ordered[i]] = -1
        for i in range(action_count):
            action_of[group_actions[i]] = -1
        states_per_group[g] = count
    codes = ordered[:numbered]
    if len(original_of):
        codes = original_of[codes]
    return NodeNumbering(
        src=src, dst=dst, action=action_ids, succeeded=succeeded, states_per_group=states_per_group, state_codes=codes
    )

"""The paper's credit diagnostics (MileGPO Fig. 4 and 9), computed on the host from MileGPO terms.

* ``tie_share``: share of same-state action pairs (two step rows of one group leaving the same state
  with different actions) whose GraphGPO return r^G is tied.
* ``tie_correction_rate``: of the tied pairs whose trajectories have opposite outcomes, the share that
  the shaped return r^M orders correctly (the successful trajectory's row strictly higher).
* candidate support partition of the milestone candidates: local evidence (progress or branch
  contrast > 0) / coverage only (m >= θ_m without local evidence) / weak (neither).
* PCC evidence split of the candidates with local evidence: positive progress, positive branch
  contrast, both.
* ``zero_advantage_fraction``: share of real step rows whose final advantage is 0.
* ``shared_state_fraction``: share of step rows leaving a state visited by >= 2 trajectories.
"""

from __future__ import annotations

import numpy as np

from milegpo_jax.credit.batch import CreditBatch
from milegpo_jax.credit.estimators import MileGPOTerms

TIE_TOLERANCE = 1e-6  # float32 returns of equal graph distance are bit-equal; this only absorbs noise
ZERO_TOLERANCE = 1e-6


# Pair cells compared at once. A pair matrix over all rows of a group ([R, R], R up to K*T) would
# need ~30 bytes a cell, 17 GB for two 12,000-step trajectories; rows are compared only with rows
# leaving the same state, a block of them at a time, so the temporaries stay near 25 MB
# (``limits.host_bytes`` counts them; docs/credit-implementation.md §3).
PAIR_BLOCK_CELLS = 1 << 19


def _same_state_pair_counts(src, action, success, graph, mix) -> tuple[int, int, int, int]:
    """(same-state action pairs, tied ones, tied with opposite outcomes, those r^M orders correctly)
    over the unordered pairs of rows; each row is compared with the later rows of its own state."""
    order = np.argsort(src, kind="stable")
    ordered_src = src[order]
    starts = np.flatnonzero(np.r_[True, ordered_src[1:] != ordered_src[:-1]])
    ends = np.r_[starts[1:], order.size]
    pairs = tied = opposite_tied = corrected = 0
    for start, end in zip(starts, ends):
        n = end - start
        if n < 2:
            continue
        members = order[start:end]
        act, won, r_g, r_m = action[members], success[members], graph[members], mix[members]
        block = max(1, PAIR_BLOCK_CELLS // n)
        for first in range(0, n - 1, block):
            last = min(first + block, n - 1)
            i = slice(first, last)
            j = slice(first + 1, n)
            later = np.arange(first + 1, n)[None, :] > np.arange(first, last)[:, None]
            pair = later & (act[i, None] != act[None, j])
            is_tied = pair & (np.abs(r_g[i, None] - r_g[None, j]) <= TIE_TOLERANCE)
            opposite = is_tied & (won[i, None] != won[None, j])
            # Orient each opposite pair as (successful row, failed row) and compare shaped returns.
            mix_gap = np.where(won[i, None], r_m[i, None] - r_m[None, j], r_m[None, j] - r_m[i, None])
            pairs += int(pair.sum())
            tied += int(is_tied.sum())
            opposite_tied += int(opposite.sum())
            corrected += int((opposite & (mix_gap > TIE_TOLERANCE)).sum())
    return pairs, tied, opposite_tied, corrected


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def credit_diagnostics(
    batch: CreditBatch, terms: MileGPOTerms, advantages: np.ndarray, theta_m: float
) -> dict[str, float | int | None]:
    """Diagnostics of one batch; ratios are None when their denominator is empty."""
    src, action = np.asarray(batch.src), np.asarray(batch.action)
    step_mask, traj_mask = np.asarray(batch.step_mask), np.asarray(batch.traj_mask)
    reward = np.where(step_mask, np.asarray(batch.reward), 0.0)
    success = traj_mask & (reward.sum(-1) > 0)
    r_graph, r_mix = np.asarray(terms.r_graph), np.asarray(terms.r_mix)
    G, K, T = src.shape
    num_nodes = np.asarray(batch.node_mask).shape[-1]

    pairs = tied = opposite_tied = corrected = shared_rows = 0
    for g in range(G):
        rows = np.flatnonzero(step_mask[g].ravel())
        row_src, row_action = src[g].ravel()[rows], action[g].ravel()[rows]
        row_success = np.repeat(success[g], T)[rows]
        row_graph, row_mix = r_graph[g].ravel()[rows], r_mix[g].ravel()[rows]
        row_traj = np.repeat(np.arange(K), T)[rows]
        counts = _same_state_pair_counts(row_src, row_action, row_success, row_graph, row_mix)
        pairs, tied, opposite_tied, corrected = (a + b for a, b in zip((pairs, tied, opposite_tied, corrected), counts))
        visitors = np.zeros(num_nodes, int)  # distinct trajectories leaving each state
        np.add.at(visitors, np.unique(np.stack([row_traj, row_src], 1), axis=0)[:, 1], 1)
        shared_rows += int((visitors[row_src] >= 2).sum())

    milestone = np.asarray(terms.is_milestone)
    progress_pos = milestone & (np.asarray(terms.progress) > 0)
    branch_pos = milestone & (np.asarray(terms.branch) > 0)
    local = progress_pos | branch_pos
    coverage_only = milestone & ~local & (np.asarray(terms.coverage) >= theta_m)
    n_candidates, n_local = int(milestone.sum()), int(local.sum())
    real_rows = int(step_mask.sum())
    zero_rows = int((step_mask & (np.abs(np.asarray(advantages)) < ZERO_TOLERANCE)).sum())
    return {
        "same_state_action_pairs": pairs,
        "tie_share": _ratio(tied, pairs),
        "opposite_outcome_tied_pairs": opposite_tied,
        "tie_correction_rate": _ratio(corrected, opposite_tied),
        "milestone_candidates": n_candidates,
        "candidates_local_evidence": _ratio(n_local, n_candidates),
        "candidates_coverage_only": _ratio(int(coverage_only.sum()), n_candidates),
        "candidates_weak": _ratio(n_candidates - n_local - int(coverage_only.sum()), n_candidates),
        "evidence_positive_progress": _ratio(int(progress_pos.sum()), n_local),
        "evidence_positive_branch": _ratio(int(branch_pos.sum()), n_local),
        "evidence_both": _ratio(int((progress_pos & branch_pos).sum()), n_local),
        "traps": int(np.asarray(terms.is_trap).sum()),
        "zero_advantage_fraction": _ratio(zero_rows, real_rows),
        "shared_state_fraction": _ratio(shared_rows, real_rows),
    }

"""MileGPO (docs/credit.md §5): milestone and trap potentials on the rollout graph of one group,
calibrated by branch contrast and local progress (PCC), shaping GraphGPO's return."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from milegpo_jax.credit.batch import SINK, CreditBatch
from milegpo_jax.credit.config import THRESHOLD_TOLERANCE, CreditConfig
from milegpo_jax.credit.estimators.terms import (
    anchor_normalize,
    episode_advantage,
    graph_return,
    invalid_penalty,
    masked_max,
    return_distances,
    safe_div,
    sink_distances,
)
from milegpo_jax.credit.graph import float_dtype, group_graph, max_product_potentials


class MileGPOTerms(NamedTuple):
    """Per-row ([K, T]) and per-node ([N]) intermediates of MileGPO for one group (vmapped: +[G])."""

    # rows; returns are before the invalid penalty, as in the test vectors (docs/credit.md §9)
    r_graph: jax.Array
    delta_pos: jax.Array
    delta_neg: jax.Array
    r_mix: jax.Array
    adv_graph: jax.Array
    adv_mix: jax.Array
    adv_res: jax.Array
    adv_episode: jax.Array
    advantage: jax.Array
    # nodes
    distance: jax.Array  # d(v, g)
    is_milestone: jax.Array
    is_trap: jax.Array
    lift: jax.Array  # ℓ+
    coverage: jax.Array  # m
    centrality: jax.Array  # C
    score0: jax.Array  # S0+
    branch: jax.Array  # b
    progress: jax.Array  # ψ̄
    retained: jax.Array  # z
    score_pcc: jax.Array  # S_pcc+
    lift_neg: jax.Array  # ℓ-
    fail_coverage: jax.Array  # f-
    revisit: jax.Array  # L
    trap_score: jax.Array  # S-
    potential_pos: jax.Array  # Φ+
    potential_neg: jax.Array  # Φ-


def milegpo_group_terms(b: CreditBatch, cfg: CreditConfig) -> MileGPOTerms:
    """Every MileGPO intermediate of one group (docs/credit.md §5, equation numbers of the paper)."""
    N = b.node_mask.shape[-1]
    nodes = jnp.arange(N)
    not_sink = nodes != SINK
    graph = group_graph(
        b.src, b.step_mask, b.traj_mask, b.last_state, b.reward, b.edge, b.first_use, N, b.edge_mask.shape[-1],
        sources_only=cfg.visit_states == "sources",
    )
    success = graph.success.astype(float_dtype())
    failure = graph.failure.astype(float_dtype())
    n_traj = jnp.sum(b.traj_mask)
    n_success, n_failure = jnp.sum(success), jnp.sum(failure)
    p_group_pos = n_success / jnp.maximum(n_traj, 1)  # Eq. 2
    p_group_neg = 1.0 - p_group_pos

    # ---- node statistics (§5.4): T(v), T+(v), T-(v), revisits
    visited = (graph.visits > 0).astype(float_dtype())
    n_visit = jnp.sum(visited, axis=0)
    n_visit_pos = success @ visited
    n_visit_neg = failure @ visited
    p_pos = safe_div(n_visit_pos, n_visit)
    p_neg = safe_div(n_visit_neg, n_visit)
    revisits = jnp.sum(jnp.maximum(graph.visits - 1.0, 0.0), axis=0)
    lift = jnp.maximum(p_pos - p_group_pos, 0.0)  # Eq. 3
    coverage = n_visit_pos / jnp.maximum(n_success, 1.0)  # Eq. 4
    lift_neg = jnp.maximum(p_neg - p_group_neg, 0.0)
    fail_coverage = n_visit_neg / jnp.maximum(n_failure, 1.0)
    revisit = revisits / jnp.maximum(n_visit, 1.0)

    is_start = jnp.zeros(N, bool).at[b.src[:, 0]].max(b.traj_mask)
    is_milestone = b.node_mask & not_sink & (n_visit_pos >= cfg.min_node_support)
    if not cfg.include_start_state:
        is_milestone &= ~is_start
    trap_score = cfg.w_failure * lift_neg + cfg.w_revisit * fail_coverage * revisit  # Eq. 6
    if cfg.trap_score_strict:
        trap_admitted = trap_score > cfg.min_trap_score + THRESHOLD_TOLERANCE
    else:
        trap_admitted = trap_score >= cfg.min_trap_score - THRESHOLD_TOLERANCE
    is_trap = (
        b.node_mask
        & not_sink
        & (n_visit > 0)
        & (n_visit_pos == 0)
        & ((n_visit_neg >= cfg.min_trap_visits) | (revisits >= 1))
        & trap_admitted
    )

    # Degree centrality (R7): distinct edges (a self-loop counts as in and out) or step rows.
    if cfg.degree_mode == "distinct":
        ends, edge_uses = jnp.concatenate([b.edge_src, b.edge_dst]), b.edge_mask
    else:
        ends, edge_uses = jnp.concatenate([b.src.ravel(), b.dst.ravel()]), b.step_mask.ravel()
    degree = jnp.zeros(N, float_dtype()).at[ends].add(jnp.tile(edge_uses.astype(float_dtype()), 2))
    # Normaliser over the success-visited states (§5.4), independent of R6 and min_node_support.
    degree_pool = b.node_mask & not_sink & (n_visit_pos > 0)
    if cfg.degree_norm_include_sink:
        degree_pool |= (nodes == SINK) & b.node_mask
    centrality = safe_div(degree, masked_max(degree, degree_pool))
    score0 = cfg.w_success * lift + cfg.w_coverage * coverage + cfg.w_centrality * centrality  # Eq. 5

    distance = sink_distances(b)

    # ---- PCC (§5.7): branch-contrastive calibration and local progress, per distinct edge u -> v
    # (the host's edge list): per-source sibling sums count each edge once, and maxima over edges are
    # maxima over the step rows that use them.
    u, v = b.edge_src, b.edge_dst
    n_edge, n_edge_pos = graph.edge_users, graph.edge_winners
    is_branch = b.edge_mask if cfg.bcc_self_loops else b.edge_mask & (u != v)
    edge_pos = safe_div(n_edge_pos, n_edge)  # Eq. 11
    edge_neg = safe_div(n_edge - n_edge_pos, n_edge)

    per_source = jnp.zeros((N, 3), float_dtype()).at[u].add(
        jnp.where(is_branch[:, None], jnp.stack([jnp.ones_like(edge_pos), edge_pos, edge_neg], axis=-1), 0.0)
    )
    branch_count, branch_pos_sum, branch_neg_sum = per_source.T

    n_siblings = branch_count[u] - 1.0
    has_siblings = is_branch & (n_siblings > 0)
    sibling_pos = safe_div(branch_pos_sum[u] - edge_pos, n_siblings)
    sibling_neg = safe_div(branch_neg_sum[u] - edge_neg, n_siblings)
    contrast = jnp.where(has_siblings, edge_pos - sibling_pos, 0.0)  # Eq. 12
    contrast = safe_div(contrast, masked_max(jnp.abs(contrast), is_branch))  # Eq. 13
    positive_contrast = is_branch & (contrast > THRESHOLD_TOLERANCE)

    finite_step = jnp.isfinite(distance[u]) & jnp.isfinite(distance[v])
    progress_hops = jnp.where(finite_step, distance[u] - distance[v], 0.0)  # Δd; R12: ∞ -> 0
    edge_lift_neg = jnp.where(
        has_siblings,
        jnp.maximum(edge_neg - sibling_neg, 0.0),
        jnp.maximum(p_neg - p_group_neg, 0.0)[v],  # no sibling: node-level failure lift of v
    )
    psi = cfg.alpha_d * progress_hops + cfg.alpha_s * (p_pos - p_group_pos)[v] - cfg.alpha_f * edge_lift_neg  # Eq. 15
    if cfg.successful_edge == "any":
        successful_edge = n_edge_pos >= 1
    else:
        successful_edge = n_edge_pos > 0.5 * n_edge
    incoming = is_branch & successful_edge & (psi > THRESHOLD_TOLERANCE)
    branch, progress_raw = jnp.zeros((N, 2)).at[v].max(  # Eq. 14, and ψ̄'s numerator
        jnp.stack([jnp.where(positive_contrast, contrast, 0.0), jnp.where(incoming, psi, 0.0)], axis=-1)
    ).T
    progress_pool = b.node_mask if cfg.progress_norm == "all_nodes" else is_milestone
    progress = safe_div(progress_raw, masked_max(progress_raw, progress_pool))  # Eq. 16

    evidence = cfg.w_bc * branch + cfg.w_pg * progress  # Eq. 17
    retained = (progress > 0) | (coverage >= cfg.theta_m - THRESHOLD_TOLERANCE) | ((cfg.kappa_bc == 1) & (branch > 0))
    score_pcc = jnp.where(retained, score0 * (1.0 + cfg.w_pcc * evidence), cfg.rho * score0)  # Eq. 18

    # ---- potentials (Eqs. 7, 8, 19) by ablation stage (§5.9)
    def normalized(scores, members):
        scores = jnp.where(members, scores, 0.0)
        return safe_div(scores, jnp.max(scores))

    if cfg.stage == "full":
        weight_pos, weight_neg = normalized(score_pcc, is_milestone), normalized(trap_score, is_trap)
    elif cfg.stage == "rcs":
        weight_pos, weight_neg = normalized(score0, is_milestone), normalized(trap_score, is_trap)
    else:
        weight_pos, weight_neg = is_milestone.astype(float_dtype()), is_trap.astype(float_dtype())
    potential_pos, potential_neg = max_product_potentials(
        jnp.stack([weight_pos, weight_neg]), b.edge_src, b.edge_dst, b.edge_mask, cfg.omega
    )

    # ---- shaped return and advantage (Eqs. 9, 10, 20-22)
    delta_pos = jnp.maximum(
        cfg.gamma_phi * cfg.w_pos * potential_pos[b.dst] - cfg.w_pos * potential_pos[b.src], 0.0
    )
    delta_neg = jnp.maximum(
        cfg.gamma_phi * cfg.w_neg * potential_neg[b.dst] - cfg.w_neg * potential_neg[b.src], 0.0
    )
    delta_pos = jnp.where(b.step_mask, delta_pos, 0.0)
    delta_neg = jnp.where(b.step_mask, delta_neg, 0.0)
    r_graph = graph_return(b, return_distances(distance, b.node_mask, cfg), cfg.graph_gamma, cfg)
    r_mix = r_graph + cfg.success_reward * cfg.shaping_coef * (delta_pos - delta_neg)
    penalty = invalid_penalty(b, cfg)
    no_penalty = jnp.zeros_like(penalty)
    graph_penalty = penalty if cfg.invalid_penalty_target == "both" else no_penalty
    mix_penalty = no_penalty if cfg.invalid_penalty_target == "none" else penalty
    returns, penalties = jnp.stack([r_graph, r_mix], axis=-1), jnp.stack([graph_penalty, mix_penalty], axis=-1)
    adv_graph, adv_mix = jnp.moveaxis(anchor_normalize(returns, penalties, b, cfg), -1, 0)  # in the same scatters
    adv_res = adv_mix - adv_graph
    adv_episode = episode_advantage(b, cfg)
    advantage = cfg.step_weight * (adv_graph + cfg.eta * adv_res) + cfg.episode_weight * adv_episode
    return MileGPOTerms(
        r_graph=r_graph,
        delta_pos=delta_pos,
        delta_neg=delta_neg,
        r_mix=jnp.where(b.step_mask, r_mix, 0.0),
        adv_graph=adv_graph,
        adv_mix=adv_mix,
        adv_res=adv_res,
        adv_episode=adv_episode,
        advantage=jnp.where(b.step_mask, advantage, 0.0),
        distance=distance,
        is_milestone=is_milestone,
        is_trap=is_trap,
        lift=lift,
        coverage=coverage,
        centrality=centrality,
        score0=score0,
        branch=branch,
        progress=progress,
        retained=retained & is_milestone,
        score_pcc=score_pcc,
        lift_neg=lift_neg,
        fail_coverage=fail_coverage,
        revisit=revisit,
        trap_score=trap_score,
        potential_pos=potential_pos,
        potential_neg=potential_neg,
    )


def milegpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    """The registry's program: the terms as a dict, like every other estimator's."""
    return milegpo_group_terms(b, cfg)._asdict()

"""Credit estimators as pure jnp functions ``advantages = f(batch, cfg)`` behind one registry.

Each estimator maps a padded ``CreditBatch`` ([G, K, T] step arrays, [G, N] node masks) and a frozen
``CreditConfig`` to advantages [G, K, T] (float32, or float64 with ``precision``), exactly 0 on
padded steps. Per-group maths is
written for one group and vmapped over G. Formulas and equation numbers: docs/credit.md §1-5.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from milegpo_jax.credit.batch import SINK, CreditBatch
from milegpo_jax.credit.config import THRESHOLD_TOLERANCE, CreditConfig
from milegpo_jax.credit.graph import (
    float_dtype,
    group_graph,
    max_product_potentials,
    segment_normalize,
)


def _safe_div(numerator, denominator):
    """numerator / denominator where denominator > 0, else 0 ("0 if the max is 0", R9 of docs/credit.md §5.12)."""
    return jnp.where(denominator > 0, numerator / jnp.where(denominator > 0, denominator, 1.0), 0.0)


def _masked_max(values, mask, axis=None):
    """Max of ``values`` over ``mask`` (0 where the mask is empty); values are >= 0 where it is used."""
    return jnp.max(jnp.where(mask, values, 0.0), axis=axis)


# ----------------------------------------------------------------------------------------- shared terms


def episode_returns(b: CreditBatch) -> jax.Array:
    """[K] episode env reward R_i of one group."""
    return jnp.sum(jnp.where(b.step_mask, b.reward, 0.0), axis=-1)


def invalid_penalty(b: CreditBatch, cfg: CreditConfig) -> jax.Array:
    """[K, T] p·1[row invalid] (docs/credit.md §1.2), 0 on padded rows."""
    return jnp.where(b.step_mask & ~b.valid, cfg.invalid_penalty, 0.0)


def episode_advantage(b: CreditBatch, cfg: CreditConfig) -> jax.Array:
    """Norm_q(Z) (docs/credit.md §1.3-1.4, R15, R16). One group: [K, T].

    cross_steps (verl-agent): one value per step row, Z_row = R_i - p·1[row invalid], statistics over
    all rows of the group. per_trajectory (the papers' form): one value per trajectory,
    Z_i = R_i - p·#invalid steps, normalised over the K trajectories and shared by its rows. A group of
    one member uses mean 0 and std 1 (episode-level singleton rule).
    """
    mode = cfg.resolved_episode_norm_mode
    episode = episode_returns(b)
    if cfg.episode_stats == "cross_steps":
        penalty = invalid_penalty(b, cfg)
        values = jnp.broadcast_to(episode[:, None], penalty.shape)
        mask = b.step_mask
        advantage = segment_normalize(values, penalty, jnp.zeros_like(b.src), mask, 1, mode, cfg.epsilon)
    else:
        penalty = jnp.sum(invalid_penalty(b, cfg), axis=-1)
        values, mask = episode, b.traj_mask
        per_trajectory = segment_normalize(values, penalty, jnp.zeros_like(b.traj_mask, jnp.int32), mask, 1, mode, cfg.epsilon)
        advantage = per_trajectory[:, None]
    singleton = values - penalty
    if mode == "mean_std":
        singleton = singleton / (1.0 + cfg.epsilon)
    single_member = jnp.sum(mask) == 1
    if cfg.episode_stats != "cross_steps":
        singleton = singleton[:, None]
    return jnp.where(b.step_mask, jnp.where(single_member, singleton, advantage), 0.0)


def anchor_normalize(values: jax.Array, penalty: jax.Array, b: CreditBatch, cfg: CreditConfig) -> jax.Array:
    """Norm of ``values - penalty`` over rows sharing the source state s_t (GiGPO anchors)."""
    return segment_normalize(values, penalty, b.src, b.step_mask, b.node_mask.shape[-1], cfg.norm_mode, cfg.epsilon)


def sink_distances(b: CreditBatch) -> jax.Array:
    """[N] d(v, g): hops to the success sink, inf when unreachable or the group has no success (the
    host's breadth-first search, docs/credit.md §10.1)."""
    return jnp.where(b.sink_hops >= 0, b.sink_hops.astype(float_dtype()), jnp.inf)


def return_distances(distance: jax.Array, node_mask: jax.Array, cfg: CreditConfig) -> jax.Array:
    """Distances used by the graph return: inf kept ("zero"), or GraphGPO code's d_max + 1 rule."""
    if cfg.unreachable == "zero":
        return distance
    finite = jnp.isfinite(distance) & node_mask
    d_max = _masked_max(distance, finite)
    # GraphGPO code: unreachable -> d_max + 1; a group without any success -> every node at d = 1.
    return jnp.where(jnp.any(finite), jnp.where(jnp.isfinite(distance), distance, d_max + 1.0), 1.0)


def graph_return(b: CreditBatch, distance: jax.Array, gamma: float, cfg: CreditConfig) -> jax.Array:
    """[K, T] r^G = c·γ^d(s_{t+1}) (0 if unreachable); with normalize_distance c·γ^(d(s') - d(s) + 1)."""
    if not cfg.normalize_distance:
        # Hops are whole numbers <= N, so c·γ^d is a lookup in a table the host computes once (in float64,
        # rounded once): a pow here would be fused into, and recomputed by, every gather of the value.
        reachable = jnp.isfinite(distance)
        hops = jnp.where(reachable, distance, 0.0).astype(jnp.int32)
        table = cfg.success_reward * np.float64(gamma) ** np.arange(distance.shape[-1] + 1)
        value = jnp.asarray(table, float_dtype())[hops]
        return jnp.where(b.step_mask & reachable[b.dst], value[b.dst], 0.0)
    d_next = distance[b.dst]
    exponent = d_next - distance[b.src] + 1.0
    reachable = jnp.isfinite(d_next) & jnp.isfinite(exponent)
    value = cfg.success_reward * jnp.power(gamma, jnp.where(reachable, exponent, 0.0))
    return jnp.where(b.step_mask & reachable, value, 0.0)


# ----------------------------------------------------------------------------------------- baselines


def _grpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    adv_episode = episode_advantage(b, cfg)
    return {"adv_episode": adv_episode, "advantage": adv_episode}


def discounted_returns(b: CreditBatch, gamma: float) -> jax.Array:
    """[K, T] R_t = Σ_{j>=t} γ^{j-t} r_j of one group, before any invalid penalty."""
    T = b.src.shape[-1]
    t = jnp.arange(T)
    later = t[None, :] - t[:, None]  # [t, j] = j - t
    discount = jnp.where(later >= 0, jnp.power(gamma, jnp.maximum(later, 0).astype(float_dtype())), 0.0)
    return jnp.where(b.step_mask, b.reward, 0.0) @ discount.T


def _gigpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    step_return = discounted_returns(b, cfg.gamma)  # the penalty -p comes after
    penalty = invalid_penalty(b, cfg)
    adv_step = anchor_normalize(step_return, penalty, b, cfg)
    adv_episode = episode_advantage(b, cfg)
    return {
        "step_return": jnp.where(b.step_mask, step_return - penalty, 0.0),
        "adv_episode": adv_episode,
        "adv_step": adv_step,
        "advantage": cfg.episode_weight * adv_episode + cfg.step_weight * adv_step,
    }


def _graphgpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    distance = return_distances(sink_distances(b), b.node_mask, cfg)
    step_reward = graph_return(b, distance, cfg.graph_gamma, cfg)
    penalty = invalid_penalty(b, cfg)
    adv_graph = anchor_normalize(step_reward, penalty, b, cfg)
    adv_episode = episode_advantage(b, cfg)
    return {
        "step_reward": jnp.where(b.step_mask, step_reward - penalty, 0.0),
        "adv_graph": adv_graph,
        "adv_episode": adv_episode,
        "advantage": cfg.step_weight * adv_graph + cfg.episode_weight * adv_episode,
    }


# ----------------------------------------------------------------------------------------- MileGPO


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


def _milegpo_group(b: CreditBatch, cfg: CreditConfig) -> MileGPOTerms:
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
    p_pos = _safe_div(n_visit_pos, n_visit)
    p_neg = _safe_div(n_visit_neg, n_visit)
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
    centrality = _safe_div(degree, _masked_max(degree, degree_pool))
    score0 = cfg.w_success * lift + cfg.w_coverage * coverage + cfg.w_centrality * centrality  # Eq. 5

    distance = sink_distances(b)

    # ---- PCC (§5.7): branch-contrastive calibration and local progress, per distinct edge u -> v
    # (the host's edge list): per-source sibling sums count each edge once, and maxima over edges are
    # maxima over the step rows that use them.
    u, v = b.edge_src, b.edge_dst
    n_edge, n_edge_pos = graph.edge_users, graph.edge_winners
    is_branch = b.edge_mask if cfg.bcc_self_loops else b.edge_mask & (u != v)
    edge_pos = _safe_div(n_edge_pos, n_edge)  # Eq. 11
    edge_neg = _safe_div(n_edge - n_edge_pos, n_edge)

    per_source = jnp.zeros((N, 3), float_dtype()).at[u].add(
        jnp.where(is_branch[:, None], jnp.stack([jnp.ones_like(edge_pos), edge_pos, edge_neg], axis=-1), 0.0)
    )
    branch_count, branch_pos_sum, branch_neg_sum = per_source.T

    n_siblings = branch_count[u] - 1.0
    has_siblings = is_branch & (n_siblings > 0)
    sibling_pos = _safe_div(branch_pos_sum[u] - edge_pos, n_siblings)
    sibling_neg = _safe_div(branch_neg_sum[u] - edge_neg, n_siblings)
    contrast = jnp.where(has_siblings, edge_pos - sibling_pos, 0.0)  # Eq. 12
    contrast = _safe_div(contrast, _masked_max(jnp.abs(contrast), is_branch))  # Eq. 13
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
    progress = _safe_div(progress_raw, _masked_max(progress_raw, progress_pool))  # Eq. 16

    evidence = cfg.w_bc * branch + cfg.w_pg * progress  # Eq. 17
    retained = (progress > 0) | (coverage >= cfg.theta_m - THRESHOLD_TOLERANCE) | ((cfg.kappa_bc == 1) & (branch > 0))
    score_pcc = jnp.where(retained, score0 * (1.0 + cfg.w_pcc * evidence), cfg.rho * score0)  # Eq. 18

    # ---- potentials (Eqs. 7, 8, 19) by ablation stage (§5.9)
    def normalized(scores, members):
        scores = jnp.where(members, scores, 0.0)
        return _safe_div(scores, jnp.max(scores))

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


# ----------------------------------------------------------------------------------------- registry

_GROUP_ESTIMATORS: dict[str, Callable[[CreditBatch, CreditConfig], dict[str, jax.Array]]] = {
    "grpo": _grpo_group,
    "gigpo": _gigpo_group,
    "graphgpo": _graphgpo_group,
    "milegpo": lambda b, cfg: _milegpo_group(b, cfg)._asdict(),
}


def _as_arrays(batch: CreditBatch) -> CreditBatch:
    return batch._replace(reward=jnp.asarray(batch.reward, float_dtype()))


def _family():
    # The six estimators of docs/credit-family.md live in family.py, which builds on the shared terms
    # above; importing it here, at trace time, keeps the import graph one-way.
    from milegpo_jax.credit import family

    return family


def _batch_terms(batch: CreditBatch, cfg: CreditConfig, ema_prev: jax.Array) -> dict[str, jax.Array]:
    """Every intermediate of ``cfg.estimator``; "ema_new" is MVPO's success EMA (passed through for the rest)."""
    family = _family()
    if cfg.estimator in family.BATCH_ESTIMATORS:  # estimators with batch-level state (MVPO's kappa)
        return family.BATCH_ESTIMATORS[cfg.estimator](_as_arrays(batch), cfg, ema_prev)
    per_group = {**_GROUP_ESTIMATORS, **family.GROUP_ESTIMATORS}[cfg.estimator]
    return {**jax.vmap(lambda group: per_group(group, cfg))(_as_arrays(batch)), "ema_new": ema_prev}


@functools.partial(jax.jit, static_argnums=1)
def _jit_estimator_terms(batch: CreditBatch, cfg: CreditConfig, ema_prev: jax.Array) -> dict[str, jax.Array]:
    return _batch_terms(batch, cfg, ema_prev)


@functools.partial(jax.jit, static_argnums=1)
def _jit_advantages(batch: CreditBatch, cfg: CreditConfig, ema_prev: jax.Array) -> tuple[jax.Array, jax.Array]:
    terms = _batch_terms(batch, cfg, ema_prev)  # XLA prunes the unused intermediates
    return jnp.where(batch.step_mask, terms["advantage"], 0.0), terms["ema_new"]


@functools.partial(jax.jit, static_argnums=1)
def _jit_milegpo_terms(batch: CreditBatch, cfg: CreditConfig) -> MileGPOTerms:
    return jax.vmap(lambda group: _milegpo_group(group, cfg))(_as_arrays(batch))


# Estimators whose programs read the host's graph structure: distinct edges, hops to the sink, regions
# (a batch built ``with_graph=False`` has E = 0 and none of it), and those that read its row clusters
# (HGPO's histories, ECPO's (state, action) pairs, ProGPO's first visits; a batch built
# ``with_row_clusters=False`` has 4 step planes). docs/credit.md §10.1.
GRAPH_ESTIMATORS = frozenset({"graphgpo", "milegpo", "mvpo"})
CLUSTER_ESTIMATORS = frozenset({"hgpo", "ecpo", "progpo"})


def batch_structure(estimator: str) -> dict[str, bool]:
    """``padded_batch``'s options for what the program of ``estimator`` reads (the host skips the rest)."""
    return {"with_graph": estimator in GRAPH_ESTIMATORS, "with_row_clusters": estimator in CLUSTER_ESTIMATORS}


def _missing_structure(batch: CreditBatch, estimator: str) -> str | None:
    if estimator in GRAPH_ESTIMATORS and batch.edge_mask.shape[-1] == 0:
        return "graph structure (padded_batch with_graph=False)"
    if estimator in CLUSTER_ESTIMATORS and batch.step_ints.shape[-3] < 7:
        return "row clusters (padded_batch with_row_clusters=False)"
    return None


def _in_precision(jitted, carries_ema=True, outputs=lambda out: out, missing=_missing_structure):
    """Runs ``jitted(batch, cfg[, ema_prev])`` in cfg.precision: float64 needs JAX's x64 mode, scoped to
    the call. ``ema_prev`` (MVPO's success EMA, m_0 = 0) enters as an array of the working float type,
    so that a new value never retraces. A batch without structure the program reads is refused."""

    @functools.wraps(jitted)
    def run(batch: CreditBatch, cfg: CreditConfig, ema_prev: float = 0.0):
        lacking = missing(batch, cfg.estimator)
        if lacking:
            raise ValueError(f"{cfg.estimator}: the batch was built without its {lacking}")
        dtype = np.float64 if cfg.precision == "float64" else np.float32
        args = (batch, cfg, np.asarray(ema_prev, dtype)) if carries_ema else (batch, cfg)
        if cfg.precision == "float64":
            with jax.enable_x64(True):
                return outputs(jitted(*args))
        return outputs(jitted(*args))

    run.clear_cache = jitted.clear_cache
    run._cache_size = jitted._cache_size
    return run


estimator_terms = _in_precision(_jit_estimator_terms)
estimator_terms.__doc__ = """Every intermediate of ``cfg.estimator`` ([G, K, T] rows, [G, N] nodes), incl. "advantage"."""
estimate_advantages = _in_precision(_jit_advantages, outputs=lambda out: out[0])
estimate_advantages.__doc__ = """[G, K, T] advantages of ``cfg.estimator`` (cfg.precision); exactly 0 on padded rows."""
advantages_and_ema = _in_precision(_jit_advantages)
advantages_and_ema.__doc__ = """([G, K, T] advantages, MVPO's updated success EMA) from ``ema_prev``; the same
compiled function as ``estimate_advantages`` (the EMA passes through unchanged for other estimators)."""
milegpo_terms = _in_precision(
    _jit_milegpo_terms, carries_ema=False, missing=lambda batch, _: _missing_structure(batch, "milegpo")
)
milegpo_terms.__doc__ = """Every MileGPO intermediate, [G, ...] (diagnostics, tests, replay tables)."""


def registered_estimators() -> tuple[str, ...]:
    return (*_GROUP_ESTIMATORS, *_family().GROUP_ESTIMATORS, *_family().BATCH_ESTIMATORS)

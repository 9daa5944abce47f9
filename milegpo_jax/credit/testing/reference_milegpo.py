"""Plain-Python reference of MileGPO (docs/credit.md §5): milestone/trap mining (MD), RCS
potentials, PCC re-weighting, the residual mix.

Test oracle only (see ``reference_baselines.py`` for the conventions). Every reconstruction choice
R1–R16 of docs/credit.md §5.12 follows the corresponding ``CreditConfig`` option.
"""

from __future__ import annotations

import math

from milegpo_jax.credit.config import THRESHOLD_TOLERANCE, CreditConfig
from milegpo_jax.credit.rollouts import SUCCESS_STATE, Group
from milegpo_jax.credit.testing.reference_baselines import (
    INF,
    Edge,
    RolloutGraph,
    anchor_keys,
    build_graph,
    distances_to,
    episode_advantages,
    graph_return,
    normalize_groups,
    return_distances,
    step_penalty,
    unflatten,
)


# ---------------------------------------------------------------------------------------------------
# §5.4 MileGPO: milestone and trap statistics (Eqs. 2-6)
# ---------------------------------------------------------------------------------------------------


def successful_trajectories(graph: RolloutGraph) -> set[int]:
    return {i for i, ok in enumerate(graph.succeeded) if ok}


def success_share(graph: RolloutGraph) -> float:
    """p_q^+ = |T_q^+| / K (Eq. 2)."""
    return len(successful_trajectories(graph)) / graph.num_trajectories


def outcome_rates(trajectories: set[int], successes: set[int]) -> tuple[float, float]:
    """(p^+, p^−) = (|T^+|/|T|, |T^−|/|T|) of a node or an edge (Eqs. 2, 11).

    Choice: (0, 0) when T is empty (possible with ``visit_states="sources"`` for final states).
    """
    if not trajectories:
        return 0.0, 0.0
    n_success = len(trajectories & successes)
    return n_success / len(trajectories), (len(trajectories) - n_success) / len(trajectories)


def revisit_count(graph: RolloutGraph, v: str) -> int:
    """n_re(v) = Σ_i (#visits of v in τ_i − 1)_+ (§5.4)."""
    return sum(max(sequence.count(v) - 1, 0) for sequence in graph.visits)


def node_degrees(graph: RolloutGraph, cfg: CreditConfig) -> dict[str, int]:
    """indeg(v) + outdeg(v) (R7).

    ``distinct``: over distinct edges; a self-loop counts once as in- and once as out-edge.
    ``multigraph``: one edge per step row.
    """
    transitions = graph.edges if cfg.degree_mode == "distinct" else [(r.state, r.next_state) for r in graph.rows]
    degree = {v: 0 for v in graph.nodes}
    for u, v in transitions:
        degree[u] += 1  # out-degree of u
        degree[v] += 1  # in-degree of v
    return degree


def centrality(graph: RolloutGraph, cfg: CreditConfig) -> dict[str, float]:
    """C(v) = (indeg + outdeg)(v) / max over success-visited v' of (indeg + outdeg)(v') (§5.4).

    The normaliser runs over the states with |T^+(v')| ≥ 1, g excluded unless
    ``degree_norm_include_sink`` (R7). Choice: the normaliser follows the §5.4 formula
    ("success-visited states"), independent of ``min_node_support`` and R6; C = 0 if it is 0.
    """
    degree = node_degrees(graph, cfg)
    successes = successful_trajectories(graph)
    pool = [v for v in graph.nodes if v != SUCCESS_STATE and graph.node_trajectories[v] & successes]
    if cfg.degree_norm_include_sink and SUCCESS_STATE in degree:
        pool.append(SUCCESS_STATE)
    normaliser = max((degree[v] for v in pool), default=0)
    return {v: degree[v] / normaliser if normaliser > 0 else 0.0 for v in graph.nodes}


def milestone_statistics(graph: RolloutGraph, cfg: CreditConfig) -> dict[str, dict[str, float]]:
    """ℓ^+(v), m(v), C(v) and S_0^+(v) for every node (Eqs. 2-5)."""
    successes = successful_trajectories(graph)
    p_q = success_share(graph)
    cen = centrality(graph, cfg)
    stats = {}
    for v in graph.nodes:
        p_pos, _ = outcome_rates(graph.node_trajectories[v], successes)  # Eq. 2
        lift = max(p_pos - p_q, 0.0)  # Eq. 3
        coverage = len(graph.node_trajectories[v] & successes) / max(len(successes), 1)  # Eq. 4
        score0 = cfg.w_success * lift + cfg.w_coverage * coverage + cfg.w_centrality * cen[v]  # Eq. 5
        stats[v] = {"lift": lift, "coverage": coverage, "centrality": cen[v], "score0": score0}
    return stats


def trap_statistics(graph: RolloutGraph, cfg: CreditConfig) -> dict[str, dict[str, float]]:
    """ℓ^−(v), f^−(v), L(v) and S^−(v) for every node (Eq. 6 and §5.4)."""
    successes = successful_trajectories(graph)
    n_failed = graph.num_trajectories - len(successes)
    p_q_neg = 1.0 - success_share(graph)
    stats = {}
    for v in graph.nodes:
        visitors = graph.node_trajectories[v]
        _, p_neg = outcome_rates(visitors, successes)
        lift_neg = max(p_neg - p_q_neg, 0.0)
        fail_coverage = len(visitors - successes) / max(n_failed, 1)
        revisit = revisit_count(graph, v) / max(len(visitors), 1)
        score = cfg.w_failure * lift_neg + cfg.w_revisit * fail_coverage * revisit  # Eq. 6
        stats[v] = {"lift_neg": lift_neg, "fail_coverage": fail_coverage, "revisit": revisit, "score": score}
    return stats


def milestone_candidates(graph: RolloutGraph, cfg: CreditConfig) -> list[str]:
    """S^+: non-final states visited by ≥ min_node_support successful trajectories (§5.4).

    R6: with ``include_start_state=False`` the start states s_0 of the group are not candidates.
    """
    successes = successful_trajectories(graph)
    return [
        v
        for v in graph.nodes
        if v != SUCCESS_STATE
        and len(graph.node_trajectories[v] & successes) >= cfg.min_node_support
        and (cfg.include_start_state or v not in graph.start_states)
    ]


def trap_candidates(graph: RolloutGraph, cfg: CreditConfig, stats: dict[str, dict[str, float]]) -> list[str]:
    """S^−: states visited only by failed trajectories, in ≥ min_trap_visits failed trajectories or
    revisited, whose raw trap score passes the threshold (§5.4, R8: ≥, or > when strict)."""
    successes = successful_trajectories(graph)
    traps = []
    for v in graph.nodes:
        visitors = graph.node_trajectories[v]
        if v == SUCCESS_STATE or not visitors or visitors & successes:
            continue
        if len(visitors) < cfg.min_trap_visits and revisit_count(graph, v) < 1:
            continue
        score = stats[v]["score"]
        # THRESHOLD_TOLERANCE: a score that equals the threshold in exact arithmetic sits on it.
        if cfg.trap_score_strict:
            passes = score > cfg.min_trap_score + THRESHOLD_TOLERANCE
        else:
            passes = score >= cfg.min_trap_score - THRESHOLD_TOLERANCE
        if passes:
            traps.append(v)
    return traps


# ---------------------------------------------------------------------------------------------------
# §5.7 MileGPO: progress-consistent calibration (PCC, Eqs. 11-18)
# ---------------------------------------------------------------------------------------------------


def is_self_loop(edge: Edge) -> bool:
    return edge[0] == edge[1]


def branches(graph: RolloutGraph, cfg: CreditConfig) -> dict[str, list[Edge]]:
    """B(u) for every node u: the distinct observed outgoing edges of u; self-loops only if
    ``bcc_self_loops`` (R10)."""
    out: dict[str, list[Edge]] = {u: [] for u in graph.nodes}
    for e in graph.edges:
        if cfg.bcc_self_loops or not is_self_loop(e):
            out[e[0]].append(e)
    return out


def edge_rates(graph: RolloutGraph) -> dict[Edge, tuple[float, float]]:
    """(p^+(e), p^−(e)) for every distinct edge (Eq. 11)."""
    successes = successful_trajectories(graph)
    return {e: outcome_rates(graph.edge_trajectories[e], successes) for e in graph.edges}


def branch_contrast(graph: RolloutGraph, cfg: CreditConfig) -> dict[Edge, float]:
    """c_bcc(e) for every BCC branch (Eqs. 12-13).

    Eq. 12: c̃(e_i) = p^+(e_i) − mean_{e ∈ B(u)\\{e_i}} p^+(e), 0 if |B(u)| = 1.
    Eq. 13: c(e) = c̃(e) / max_{e'} |c̃(e')|; 0 if that maximum is 0 (R9).
    """
    rates = edge_rates(graph)
    raw = {}
    for branches_of_u in branches(graph, cfg).values():
        for e in branches_of_u:
            others = [rates[s][0] for s in branches_of_u if s != e]
            raw[e] = rates[e][0] - sum(others) / len(others) if others else 0.0  # Eq. 12
    normaliser = max((abs(c) for c in raw.values()), default=0.0)
    return {e: c / normaliser if normaliser > 0 else 0.0 for e, c in raw.items()}  # Eq. 13


def branch_credit(graph: RolloutGraph, cfg: CreditConfig) -> dict[str, float]:
    """b(v) = max of c_bcc(e) over the incoming branches e = (u, v) with c_bcc(e) > 0; 0 if none (Eq. 14)."""
    contrast = branch_contrast(graph, cfg)
    credit = {v: 0.0 for v in graph.nodes}
    for (_, v), c in contrast.items():
        if c > THRESHOLD_TOLERANCE:
            credit[v] = max(credit[v], c)
    return credit


def is_successful_edge(graph: RolloutGraph, e: Edge, cfg: CreditConfig) -> bool:
    """"Successful incoming transition" (R11): used by ≥ 1 successful trajectory (``any``) or by
    successful trajectories in more than half of the trajectories that use it (``majority``)."""
    users = graph.edge_trajectories[e]
    n_success = len(users & successful_trajectories(graph))
    return n_success >= 1 if cfg.successful_edge == "any" else n_success > len(users) / 2


def edge_progress(
    graph: RolloutGraph,
    cfg: CreditConfig,
    e: Edge,
    d_goal: dict[str, int],
    rates: dict[Edge, tuple[float, float]],
    branches_of_u: list[Edge],
) -> float:
    """ψ(e) = α_d·Δd(e) + α_s·[p^+(v) − p_q^+] − α_f·ℓ^−(e) for e = (u, v) (Eq. 15).

    Δd(e) = d(u, g) − d(v, g), 0 if either is ∞ (R12; true graph distances, independent of R4).
    ℓ^−(e) = max(p^−(e) − μ^−(e), 0) with μ^−(e) the mean failure rate of the siblings B(u)\\{e};
    with no sibling ℓ^−(e) = max(p^−(v) − p_q^−, 0).
    ``d_goal`` = distances_to(graph, g), ``rates`` = edge_rates(graph), ``branches_of_u`` = B(u).
    """
    u, v = e
    p_q = success_share(graph)
    d_u, d_v = d_goal.get(u, INF), d_goal.get(v, INF)
    delta_d = 0.0 if math.isinf(d_u) or math.isinf(d_v) else float(d_u - d_v)

    p_pos_v, p_neg_v = outcome_rates(graph.node_trajectories[v], successful_trajectories(graph))
    siblings = [s for s in branches_of_u if s != e]
    if siblings:
        mu_neg = sum(rates[s][1] for s in siblings) / len(siblings)
        lift_neg = max(rates[e][1] - mu_neg, 0.0)
    else:
        lift_neg = max(p_neg_v - (1.0 - p_q), 0.0)
    return cfg.alpha_d * delta_d + cfg.alpha_s * (p_pos_v - p_q) - cfg.alpha_f * lift_neg


def local_progress(graph: RolloutGraph, cfg: CreditConfig, candidates: list[str]) -> dict[str, float]:
    """ψ̄(v) for every node (Eq. 16).

    ψ̃(v) = max ψ(e) over the successful incoming edges e = (u, v) with ψ(e) > 0 (self-loops only if
    ``bcc_self_loops``, R10); 0 if none. ψ̄ = ψ̃ / max ψ̃ over V_q (``progress_norm="all_nodes"``,
    R13) or over S^+ (``"candidates"``); 0 if the normaliser is 0.
    """
    d_goal = distances_to(graph, SUCCESS_STATE)
    rates = edge_rates(graph)
    branch_map = branches(graph, cfg)
    raw = {v: 0.0 for v in graph.nodes}
    for e in graph.edges:
        if is_self_loop(e) and not cfg.bcc_self_loops:
            continue
        if not is_successful_edge(graph, e, cfg):
            continue
        psi = edge_progress(graph, cfg, e, d_goal, rates, branch_map[e[0]])
        if psi > THRESHOLD_TOLERANCE:
            raw[e[1]] = max(raw[e[1]], psi)
    pool = graph.nodes if cfg.progress_norm == "all_nodes" else candidates
    normaliser = max((raw[v] for v in pool), default=0.0)
    return {v: raw[v] / normaliser if normaliser > 0 else 0.0 for v in graph.nodes}


def pcc_scores(
    cfg: CreditConfig, score0: float, coverage: float, branch: float, progress: float
) -> tuple[int, float]:
    """(z(v), S_pcc^+(v)) for one candidate (Eqs. 17-18)."""
    evidence = cfg.w_bc * branch + cfg.w_pg * progress  # Eq. 17
    retained = progress > 0 or coverage >= cfg.theta_m - THRESHOLD_TOLERANCE or (cfg.kappa_bc == 1 and branch > 0)
    if retained:
        return 1, score0 * (1.0 + cfg.w_pcc * evidence)  # Eq. 18, z = 1
    return 0, cfg.rho * score0  # Eq. 18, z = 0


# ---------------------------------------------------------------------------------------------------
# §5.5 / §5.8 MileGPO: potentials (Eqs. 7, 8, 19) and increments (Eqs. 9-10)
# ---------------------------------------------------------------------------------------------------


def max_normalize(scores: dict[str, float]) -> dict[str, float]:
    """Task-wise max-normalisation over a candidate set; all 0 if the maximum is 0 (R9)."""
    top = max(scores.values(), default=0.0)
    return {v: s / top if top > 0 else 0.0 for v, s in scores.items()}


def candidate_potential(graph: RolloutGraph, weights: dict[str, float], omega: float) -> dict[str, float]:
    """Φ(s) = max_{v ∈ S} w(v)·ω^{d(s, v)} for every node s (Eqs. 7, 8, 19).

    d(s, s) = 0; an empty set or no reachable candidate gives Φ = 0.
    """
    phi = {s: 0.0 for s in graph.nodes}
    for v, weight in weights.items():
        for s, d in distances_to(graph, v).items():
            phi[s] = max(phi[s], weight * omega**d)
    return phi


def one_sided_increment(phi_now: float, phi_next: float, weight: float, gamma_phi: float) -> float:
    """δ = max(γ_Φ·w·Φ(s_{t+1}) − w·Φ(s_t), 0) (Eqs. 9-10)."""
    return max(gamma_phi * weight * phi_next - weight * phi_now, 0.0)


# ---------------------------------------------------------------------------------------------------
# §5 MileGPO: assembling the advantage (Eqs. 19-22)
# ---------------------------------------------------------------------------------------------------


def milegpo_details(group: Group, cfg: CreditConfig) -> dict:
    """MileGPO for one group (§5), with every intermediate quantity.

    Returns a dict with
      * "rows": per trajectory, per step: "r_graph" (r^G), "delta_pos" (δ^+), "delta_neg" (δ^−),
        "r_mix" (r^M; r^G and r^M before the invalid penalty), "adv_graph" (Â^G), "adv_mix" (Â^mix),
        "adv_res" (Â^res), "adv_episode" (Norm_q(Z)), "advantage" (A_t, Eq. 22);
      * "candidates": {v ∈ S^+: ℓ^+, m, C, S_0^+, b, ψ̄, z, S_pcc^+} under the keys "lift",
        "coverage", "centrality", "score0", "branch", "progress", "retained", "score_pcc"
        (PCC quantities are reported for every stage; only the full stage uses them);
      * "traps": {v ∈ S^−: "lift_neg", "fail_coverage", "revisit", "score"};
      * "potential_pos", "potential_neg": Φ^± of ``cfg.stage`` on every node incl. the sink (§5.9).
    """
    graph = build_graph(group, cfg.visit_states)

    # §5.4 candidate mining (MD).
    milestone_stats = milestone_statistics(graph, cfg)
    trap_stats = trap_statistics(graph, cfg)
    positives = milestone_candidates(graph, cfg)
    negatives = trap_candidates(graph, cfg, trap_stats)

    # §5.7 PCC.
    branch = branch_credit(graph, cfg)
    progress = local_progress(graph, cfg, positives)
    candidates = {}
    for v in positives:
        stats = milestone_stats[v]
        retained, score_pcc = pcc_scores(cfg, stats["score0"], stats["coverage"], branch[v], progress[v])
        candidates[v] = {
            **stats,
            "branch": branch[v],
            "progress": progress[v],
            "retained": retained,
            "score_pcc": score_pcc,
        }
    traps = {v: trap_stats[v] for v in negatives}

    # §5.9 stage-dependent potentials.
    if cfg.stage == "md":  # Eq. 7, uniform weights
        weights_pos = {v: 1.0 for v in positives}
        weights_neg = {v: 1.0 for v in negatives}
    else:  # Eq. 8 (Φ_R^−; Φ_R^+ for "rcs") and Eq. 19 (Φ^+ from S̄_pcc^+ for "full")
        field = "score_pcc" if cfg.stage == "full" else "score0"
        weights_pos = max_normalize({v: candidates[v][field] for v in positives})
        weights_neg = max_normalize({v: traps[v]["score"] for v in negatives})
    phi_pos = candidate_potential(graph, weights_pos, cfg.omega)
    phi_neg = candidate_potential(graph, weights_neg, cfg.omega)

    # Eqs. 9-10 and 20 per row; the invalid penalty (R14) is applied afterwards.
    distance = return_distances(graph, cfg)
    r_graph, delta_pos, delta_neg, r_mix = [], [], [], []
    for row in graph.rows:
        base = graph_return(row, distance, cfg)  # §5.3, Eq. 1
        d_pos = one_sided_increment(phi_pos[row.state], phi_pos[row.next_state], cfg.w_pos, cfg.gamma_phi)  # Eq. 9
        d_neg = one_sided_increment(phi_neg[row.state], phi_neg[row.next_state], cfg.w_neg, cfg.gamma_phi)  # Eq. 10
        r_graph.append(base)
        delta_pos.append(d_pos)
        delta_neg.append(d_neg)
        r_mix.append(base + cfg.success_reward * cfg.shaping_coef * (d_pos - d_neg))  # Eq. 20

    penalise_graph = cfg.invalid_penalty_target == "both"
    penalise_mix = cfg.invalid_penalty_target in ("both", "mix_only")
    r_graph_pen = [r - step_penalty(row, cfg) if penalise_graph else r for r, row in zip(r_graph, graph.rows)]
    r_mix_pen = [r - step_penalty(row, cfg) if penalise_mix else r for r, row in zip(r_mix, graph.rows)]

    # Eq. 21: separate normalisation within (task, source state) groups, then the residual.
    keys = anchor_keys(graph)
    adv_graph = normalize_groups(r_graph_pen, keys, cfg.norm_mode, cfg.epsilon)
    adv_mix = normalize_groups(r_mix_pen, keys, cfg.norm_mode, cfg.epsilon)
    adv_res = [m - g for m, g in zip(adv_mix, adv_graph)]
    adv_episode = episode_advantages(graph, cfg)

    rows = []
    for j in range(len(graph.rows)):
        step_term = cfg.step_weight * (adv_graph[j] + cfg.eta * adv_res[j])
        advantage = step_term + cfg.episode_weight * adv_episode[j]  # Eq. 22
        rows.append(
            {
                "r_graph": r_graph[j],
                "delta_pos": delta_pos[j],
                "delta_neg": delta_neg[j],
                "r_mix": r_mix[j],
                "adv_graph": adv_graph[j],
                "adv_mix": adv_mix[j],
                "adv_res": adv_res[j],
                "adv_episode": adv_episode[j],
                "advantage": advantage,
            }
        )
    return {
        "rows": unflatten(graph, rows),
        "candidates": candidates,
        "traps": traps,
        "potential_pos": phi_pos,
        "potential_neg": phi_neg,
    }

"""Plain-Python reference of the step-credit family (docs/credit-family.md): the test oracle and the
benchmark baseline of ``family.py``.

Written for reading, from the equations: float64 Python numbers, dicts and loops, one function per
estimator, reusing the building blocks of ``reference_baselines.py`` (rows, Norm, the episode term, GiGPO).
Every estimator returns ``{"rows": per trajectory, per step {"advantage": ..., ...}}``; MVPO also
takes its cross-iteration success EMA and returns the updated one.

* ``hgpo``   — weighted mean of population-std deviations over history-suffix clusters.
* ``g2po``   — anchor-normalised next-state value + group-normalised TD gain + the episode term.
* ``beacon`` — discounted reward to the next milestone, normalised within (group, segment).
* ``ecpo``   — [reconstructed] shrunk per-action deviations, gated by between-action variance.
* ``progpo`` — [reconstructed] GiGPO on first-visit novelty rewards in groups without a success.
* ``mvpo``   — [reconstructed] GiGPO anchor credit or κ·λ·ΔΦ of a viability potential.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from milegpo_jax.credit.config import TIE_RELATIVE_TOLERANCE, CreditConfig
from milegpo_jax.credit.testing.reference_baselines import (
    RolloutGraph,
    anchor_keys,
    build_graph,
    discounted_returns,
    episode_advantages,
    gigpo_details,
    grpo_details,
    normalize_groups,
    step_penalty,
    unflatten,
)
from milegpo_jax.credit.rollouts import Group, Trajectory


def _penalised_returns(graph: RolloutGraph, cfg: CreditConfig) -> list[float]:
    """G_{i,t} = R^γ_{i,t} − p·inv_{i,t} (GiGPO's step reward)."""
    return [r - step_penalty(row, cfg) for r, row in zip(discounted_returns(graph, cfg.gamma), graph.rows)]


def _rows(graph: RolloutGraph, **columns: list) -> dict:
    per_row = [dict(zip(columns, values)) for values in zip(*columns.values())]
    return {"rows": unflatten(graph, per_row)}


# ---------------------------------------------------------------------------------------------------
# HGPO
# ---------------------------------------------------------------------------------------------------


def hgpo_details(group: Group, cfg: CreditConfig) -> dict:
    """A = Σ (k+1)^α·a / (Σ (k+1)^α + ε) over the surviving items (k, a) of each row.

    Order-k key of row (i, t): the k most recent anchors (s_{i,t−k+1}, …, s_{i,t}), k = 1..H+1.
    a = (G − μ_C)/(σ_C + ε) with the population σ (``mean`` mode: G − μ_C); clusters of one row and
    items with a = 0 are dropped (a deviation within the tie tolerance of the magnitude counts as 0).
    ``hgpo_base_group`` adds the item (0, Norm_q(Z)).
    """
    graph = build_graph(group)
    returns = _penalised_returns(graph, cfg)
    histories = [[row.state for row in graph.rows if row.traj == i] for i in range(graph.num_trajectories)]
    clusters: dict[tuple, list[int]] = {}
    keys_of_row = []
    for j, row in enumerate(graph.rows):
        keys = []
        for k in range(1, cfg.hgpo_history + 2):
            if row.t + 1 >= k:
                key = (k, tuple(histories[row.traj][row.t - k + 1 : row.t + 1]))
                clusters.setdefault(key, []).append(j)
                keys.append(key)
        keys_of_row.append(keys)
    base = episode_advantages(graph, cfg) if cfg.hgpo_base_group else None

    advantages = []
    for j, keys in enumerate(keys_of_row):
        items = []
        for key in keys:
            members = [returns[m] for m in clusters[key]]
            if len(members) < 2:
                continue
            mean = sum(members) / len(members)
            std = math.sqrt(sum((x - mean) ** 2 for x in members) / len(members))
            deviation = returns[j] - mean
            if abs(deviation) <= TIE_RELATIVE_TOLERANCE * max(abs(x) for x in members):
                continue  # a = 0: dropped
            items.append((key[0], deviation / (std + cfg.epsilon) if cfg.norm_mode == "mean_std" else deviation))
        if base is not None and base[j] != 0.0:
            items.append((0, base[j]))
        weights = [(k + 1) ** cfg.hgpo_alpha for k, _ in items]
        advantages.append(sum(w * a for w, (_, a) in zip(weights, items)) / (sum(weights) + cfg.epsilon))
    return _rows(graph, step_return=returns, advantage=advantages)


# ---------------------------------------------------------------------------------------------------
# G2PO
# ---------------------------------------------------------------------------------------------------


def g2po_details(group: Group, cfg: CreditConfig) -> dict:
    """A = Norm_q(Z) + w·(Norm_{q,s}(V⁺ − p_a·inv) + Norm_q(V⁺ − V(s))).

    V(s) = mean over the anchor's rows of γ_v^{T_i − t}·R_i; V⁺ is V of the next row's anchor, or at
    the last step c on success and 0 on failure.
    """
    graph = build_graph(group)
    lengths = [len(traj.steps) for traj in group.trajectories]
    contributions: dict[str, list[float]] = {}
    for row in graph.rows:
        value = cfg.g2po_gamma ** (lengths[row.traj] - row.t) * graph.episode_rewards[row.traj]
        contributions.setdefault(row.state, []).append(value)
    value = {s: sum(v) / len(v) for s, v in contributions.items()}

    next_values = []
    for row in graph.rows:
        if row.t + 1 < lengths[row.traj]:
            next_values.append(value[group.trajectories[row.traj].steps[row.t + 1].state])
        else:
            next_values.append(cfg.success_reward if graph.succeeded[row.traj] else 0.0)
    anchored = [v - (cfg.g2po_anchor_penalty if not row.valid else 0.0) for v, row in zip(next_values, graph.rows)]
    adv_value = normalize_groups(anchored, anchor_keys(graph), cfg.norm_mode, cfg.epsilon)
    gains = [v - value[row.state] for v, row in zip(next_values, graph.rows)]
    adv_gain = normalize_groups(gains, [0] * len(gains), cfg.norm_mode, cfg.epsilon)  # one row: 0
    adv_episode = episode_advantages(graph, cfg)
    advantage = [e + cfg.step_weight * (c1 + c2) for e, c1, c2 in zip(adv_episode, adv_value, adv_gain)]
    return _rows(graph, next_value=next_values, adv_value=adv_value, adv_gain=adv_gain, advantage=advantage)


# ---------------------------------------------------------------------------------------------------
# BEACON
# ---------------------------------------------------------------------------------------------------


def beacon_details(group: Group, cfg: CreditConfig) -> dict:
    """A = Norm_q(Z) + λ·Norm_{(q, seg)}(r^seg − p·inv).

    With t_1 < … < t_M the flagged steps of a trajectory: r^seg_t = c·γ_m^{t_k − t} for the first
    t_k ≥ t, 0 after the last one; seg_t = number of milestones completed before step t.
    """
    graph = build_graph(group)
    rewards, segments = [], []
    for row in graph.rows:
        steps = group.trajectories[row.traj].steps
        flagged = [u for u, step in enumerate(steps) if step.milestone]
        ahead = [u for u in flagged if u >= row.t]
        reward = cfg.success_reward * cfg.beacon_gamma ** (ahead[0] - row.t) if ahead else 0.0
        rewards.append(reward - step_penalty(row, cfg))
        segments.append(sum(1 for u in flagged if u < row.t))
    adv_segment = normalize_groups(rewards, segments, cfg.norm_mode, cfg.epsilon)
    adv_episode = episode_advantages(graph, cfg)
    advantage = [e + cfg.step_weight * a for e, a in zip(adv_episode, adv_segment)]
    return _rows(graph, segment=segments, segment_reward=rewards, adv_segment=adv_segment, advantage=advantage)


# ---------------------------------------------------------------------------------------------------
# ECPO [reconstructed]
# ---------------------------------------------------------------------------------------------------

INVALID_ACTION = "<invalid>"


def ecpo_details(group: Group, cfg: CreditConfig) -> dict:
    """A = Norm_q(Z) + ω·ρ_s·A_act(s, u).

    At anchor s with n_s rows, mean μ_s and sample std σ_s of G, and action u (all invalid steps are
    one action) with n_u rows of mean Ḡ_u: A_act = n_u(Ḡ_u − μ_s)/((n_u + κ)(σ_s + ε)) (no divisor
    in ``mean`` mode); ρ_s = tanh(n_s/τ)·B/(B + W + ε_g) with B = Σ_u (n_u/n_s)(Ḡ_u − μ_s)² and
    W = Σ_u (n_u/n_s)·Var_pop(G | s, u); ρ = 0 if B = 0. Singleton and tied anchors give 0.
    """
    graph = build_graph(group)
    returns = _penalised_returns(graph, cfg)
    actions = [
        step.action if step.valid else INVALID_ACTION for traj in group.trajectories for step in traj.steps
    ]
    anchors: dict[str, list[int]] = {}
    for j, row in enumerate(graph.rows):
        anchors.setdefault(row.state, []).append(j)

    gate, action_advantage = [0.0] * len(returns), [0.0] * len(returns)
    for rows in anchors.values():
        values = [returns[j] for j in rows]
        n = len(values)
        if n < 2:
            continue
        mean = sum(values) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))
        if std <= TIE_RELATIVE_TOLERANCE * max(abs(x) for x in values):
            continue
        by_action: dict[str, list[float]] = {}
        for j in rows:
            by_action.setdefault(actions[j], []).append(returns[j])
        action_mean = {u: sum(v) / len(v) for u, v in by_action.items()}
        between = sum(len(v) / n * (action_mean[u] - mean) ** 2 for u, v in by_action.items())
        within = sum(len(v) / n * sum((x - action_mean[u]) ** 2 for x in v) / len(v) for u, v in by_action.items())
        rho = math.tanh(n / cfg.ecpo_tau) * between / (between + within + cfg.ecpo_gate_epsilon) if between > 0 else 0.0
        for j in rows:
            n_u = len(by_action[actions[j]])
            shrunk = n_u * (action_mean[actions[j]] - mean) / (n_u + cfg.ecpo_kappa)
            action_advantage[j] = shrunk / (std + cfg.epsilon) if cfg.norm_mode == "mean_std" else shrunk
            gate[j] = rho
    adv_episode = episode_advantages(graph, cfg)
    advantage = [e + cfg.step_weight * r * a for e, r, a in zip(adv_episode, gate, action_advantage)]
    return _rows(graph, gate=gate, adv_action=action_advantage, advantage=advantage)


# ---------------------------------------------------------------------------------------------------
# ProGPO [reconstructed]
# ---------------------------------------------------------------------------------------------------


def novelty(traj: Trajectory) -> list[int]:
    """n_t = 1 if s_{t+1} is not among s_0..s_t of the trajectory."""
    seen, out = set(), []
    for step in traj.steps:
        seen.add(step.state)
        out.append(int(step.next_state not in seen))
    return out


def progpo_details(group: Group, cfg: CreditConfig) -> dict:
    """A group with a success gets its base estimator (GiGPO, or GRPO with ``progpo_base="grpo"``);
    a group without one gets the base run on the novelty rewards r′ = c_cov·n_t."""
    base = gigpo_details if cfg.progpo_base == "gigpo" else grpo_details
    if any(traj.succeeded for traj in group.trajectories):
        return base(group, cfg)
    coverage_group = Group(
        tuple(
            Trajectory(
                tuple(
                    dataclasses.replace(step, reward=cfg.progpo_coverage_reward * n)
                    for step, n in zip(traj.steps, novelty(traj))
                )
            )
            for traj in group.trajectories
        )
    )
    return base(coverage_group, cfg)


# ---------------------------------------------------------------------------------------------------
# MVPO [reconstructed]
# ---------------------------------------------------------------------------------------------------


def mvpo_kappa(groups: Sequence[Group], cfg: CreditConfig, ema_prev: float) -> tuple[float, float]:
    """(m_t, κ_t): m_t = β·m_{t−1} + (1 − β)·(success share of the batch); κ = clip(1 − m_t/s_ref, 0, 1)."""
    outcomes = [traj.succeeded for group in groups for traj in group.trajectories]
    ema_new = cfg.mvpo_ema_beta * ema_prev + (1.0 - cfg.mvpo_ema_beta) * sum(outcomes) / len(outcomes)
    if not cfg.mvpo_kappa_decay:
        return ema_new, 1.0
    return ema_new, min(max(1.0 - ema_new / cfg.mvpo_success_ref, 0.0), 1.0)


def state_sequences(graph: RolloutGraph) -> list[list[str]]:
    """s_0..s_T of each trajectory (the sink closes a successful one)."""
    sequences: list[list[str]] = [[] for _ in range(graph.num_trajectories)]
    for row in graph.rows:
        sequences[row.traj].append(row.state)
    for row in graph.rows:
        if row.t == len(sequences[row.traj]) - 1:
            sequences[row.traj].append(row.next_state)
    return sequences


def viability_regions(sequences: list[list[str]]) -> dict[str, str]:
    """Union-find regions: a revisit s_u = s_t (t the previous visit) unions s_t, …, s_u.

    Returns each state's region, named by the region's first state in sorted order (any
    canonical name works: only equality matters)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for sequence in sequences:
        last_seen: dict[str, int] = {}
        for u, state in enumerate(sequence):
            find(state)
            if state in last_seen:
                for v in sequence[last_seen[state] : u]:
                    parent[find(v)] = find(state)
            last_seen[state] = u
    members: dict[str, list[str]] = {}
    for state in parent:
        members.setdefault(find(state), []).append(state)
    return {state: min(group) for group in members.values() for state in group}


def mvpo_details(group: Group, cfg: CreditConfig, kappa: float) -> dict:
    """A = Norm_q(Z) + (Norm_{q,s}(G) on informative anchors, else κ·λ_pot·(Φ_{t+1} − Φ_t)).

    Φ_{i,u} = w_f·F(ρ(s_u)) + w_p·(D_u − 1)/max(D_max − 1, 1) − w_l·(u − (D_u − 1))/max(u, 1) with
    F(ρ) the success share of the trajectories visiting region ρ and D_u the number of distinct
    regions in s_0..s_u. An anchor is informative with ≥ 2 rows whose penalty-free returns differ.
    """
    graph = build_graph(group)
    sequences = state_sequences(graph)
    region = viability_regions(sequences)
    visitors: dict[str, set[int]] = {}
    for i, sequence in enumerate(sequences):
        for state in sequence:
            visitors.setdefault(region[state], set()).add(i)
    future = {r: sum(graph.succeeded[i] for i in users) / len(users) for r, users in visitors.items()}

    distinct = []  # D_{i,u}
    for sequence in sequences:
        seen, counts = set(), []
        for state in sequence:
            seen.add(region[state])
            counts.append(len(seen))
        distinct.append(counts)
    most = max(counts[-1] for counts in distinct)
    potential = []
    for sequence, counts in zip(sequences, distinct):
        potential.append(
            [
                cfg.mvpo_w_future * future[region[state]]
                + cfg.mvpo_w_progress * (d - 1) / max(most - 1, 1)
                - cfg.mvpo_w_loop * (u - (d - 1)) / max(u, 1)
                for u, (state, d) in enumerate(zip(sequence, counts))
            ]
        )

    plain = discounted_returns(graph, cfg.gamma)
    by_anchor: dict[str, list[float]] = {}
    for r, row in zip(plain, graph.rows):
        by_anchor.setdefault(row.state, []).append(r)
    informative = {
        s: len(v) > 1 and max(v) - min(v) > TIE_RELATIVE_TOLERANCE * max(abs(x) for x in v)
        for s, v in by_anchor.items()
    }
    adv_anchor = normalize_groups(_penalised_returns(graph, cfg), anchor_keys(graph), cfg.norm_mode, cfg.epsilon)
    adv_episode = episode_advantages(graph, cfg)
    deltas, advantage = [], []
    for row, a_anchor, a_episode in zip(graph.rows, adv_anchor, adv_episode):
        delta = potential[row.traj][row.t + 1] - potential[row.traj][row.t]
        routed = cfg.mvpo_route == "anchor" and informative[row.state]
        deltas.append(delta)
        advantage.append(a_episode + (a_anchor if routed else kappa * cfg.mvpo_potential_weight * delta))
    return _rows(graph, delta=deltas, advantage=advantage)


# ---------------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------------

def mvpo_batch_details(groups: Sequence[Group], cfg: CreditConfig, ema_prev: float) -> tuple[list[dict], float]:
    """MVPO over a batch (its reference in the registry): κ from every group's successes and the EMA,
    then each group's details; (details per group, the updated EMA)."""
    ema_new, kappa = mvpo_kappa(groups, cfg, ema_prev)
    return [mvpo_details(group, cfg, kappa) for group in groups], ema_new

"""The step-credit family beside MileGPO: HGPO, G2PO, BEACON, ECPO, ProGPO, MVPO (docs/credit-family.md).

Same contract as ``baselines.py``: per-group maths over one group's padded [K, T] rows (MVPO: the
batch, for its success EMA), advantages exactly 0 on padded rows. They reuse the shared terms of
``terms.py`` (episode term Norm_q(Z), anchor normalisation, discounted returns) and GiGPO itself
rather than recomputing them. Clusters that are not keyed by one state (HGPO's history
suffixes, ECPO's (state, action) pairs) come numbered from the host (``CreditBatch.history2/3``, ``state_action``;
HGPO's orders above 3 get dense ids from a sort of their integer codes), then segment sums.

Exactness (docs/credit-family.md, "Exactness"): a value equal to its cluster's other members must
get a deviation of exactly 0, so values are shifted by their cluster maximum before the small
invalid penalty is subtracted, and spreads below TIE_RELATIVE_TOLERANCE of the magnitude count as
ties, exactly as ``terms.segment_normalize`` does (``terms.exact_shift``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from milegpo_jax.credit.batch import CreditBatch
from milegpo_jax.credit.config import TIE_RELATIVE_TOLERANCE, CreditConfig
from milegpo_jax.credit.estimators.baselines import gigpo_group, grpo_group
from milegpo_jax.credit.estimators.terms import (
    Clusters,
    anchor_normalize,
    discounted_returns,
    episode_advantage,
    episode_returns,
    invalid_penalty,
    safe_div,
    segment_normalize,
)
from milegpo_jax.credit.graph import Segments, dense_ids, float_dtype, scan_steps, trajectory_success

# ----------------------------------------------------------------------------------------- HGPO


def hgpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    """HGPO: a weighted mean of GiGPO-return deviations over history-suffix clusters k = 1..H+1."""
    K, T = b.src.shape
    N = b.node_mask.shape[-1]
    rows = K * T
    mask = b.step_mask.ravel()
    t = jnp.broadcast_to(jnp.arange(T), (K, T)).ravel()
    step_return = discounted_returns(b, cfg.gamma)
    penalty = invalid_penalty(b, cfg)
    values, pen = step_return.ravel(), penalty.ravel()
    numerator = jnp.zeros(rows, float_dtype())
    denominator = jnp.zeros(rows, float_dtype())
    # Order-1 keys are the anchors; the order-k key of (i, t) is (order-(k-1) key of (i, t-1), s_{i,t}).
    # The host numbers orders 2 and 3 (CreditBatch.history2/3, docs/credit-implementation.md §1.1); higher orders
    # get dense ids from a sort of (the row before's id, s_t).
    history = b.src.ravel()
    for k in range(1, cfg.hgpo_history + 2):
        keyed = mask & (t >= k - 1)
        if k in (2, 3):
            history = (b.history2 if k == 2 else b.history3).ravel()
        elif k > 3:  # the row before a keyed row is keyed one order lower: its id is below rows
            earlier = jnp.concatenate([jnp.zeros((K, 1), history.dtype), history.reshape(K, T)[:, :-1]], axis=1)
            history = dense_ids(earlier.ravel() * N + b.src.ravel(), keyed, rows * N)
        clusters = Clusters(history, keyed, rows if k > 1 else N)
        deviation, scale = clusters.deviation(values, pen)
        std = jnp.sqrt(clusters.mean(deviation**2))  # population std
        kept = keyed & (clusters.count > 1) & (jnp.abs(deviation) > TIE_RELATIVE_TOLERANCE * scale)
        item = deviation / (std + cfg.epsilon) if cfg.norm_mode == "mean_std" else deviation
        weight = float(k + 1) ** cfg.hgpo_alpha
        numerator += jnp.where(kept, weight * item, 0.0)
        denominator += jnp.where(kept, weight, 0.0)
    if cfg.hgpo_base_group:
        base = episode_advantage(b, cfg).ravel()
        numerator += jnp.where(mask & (base != 0), base, 0.0)
        denominator += jnp.where(mask & (base != 0), 1.0, 0.0)
    advantage = numerator / (denominator + cfg.epsilon)
    return {
        "step_return": jnp.where(b.step_mask, step_return - penalty, 0.0),
        "advantage": jnp.where(mask, advantage, 0.0).reshape(K, T),
    }


# ----------------------------------------------------------------------------------------- G2PO


def g2po_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    """G2PO: anchor-normalised next-state values plus the group-normalised TD gain."""
    K, T = b.src.shape
    N = b.node_mask.shape[-1]
    t = jnp.arange(T)
    length = jnp.sum(b.step_mask, axis=-1)
    episode = episode_returns(b)
    success = trajectory_success(b.reward, b.step_mask, b.traj_mask)
    exponent = (length[:, None] - t[None, :]).astype(float_dtype())
    row_value = jnp.where(b.step_mask, jnp.power(cfg.g2po_gamma, exponent) * episode[:, None], 0.0)
    weight = b.step_mask.astype(float_dtype())
    value_sum = jnp.zeros(N, float_dtype()).at[b.src].add(row_value * weight)
    value_count = jnp.zeros(N, float_dtype()).at[b.src].add(weight)
    state_value = safe_div(value_sum, value_count)  # V(s): mean over the anchor's rows
    next_src = jnp.concatenate([b.src[:, 1:], b.src[:, -1:]], axis=1)
    terminal = jnp.where(success, cfg.success_reward, 0.0)[:, None]
    next_value = jnp.where(t[None, :] + 1 < length[:, None], state_value[next_src], terminal)
    next_value = jnp.where(b.step_mask, next_value, 0.0)
    anchor_penalty = jnp.where(b.step_mask & ~b.valid, cfg.g2po_anchor_penalty, 0.0)
    adv_value = anchor_normalize(next_value, anchor_penalty, b, cfg)  # c1
    gain = jnp.where(b.step_mask, next_value - state_value[b.src], 0.0)
    whole_group = jnp.zeros_like(b.src)
    adv_gain = segment_normalize(gain, jnp.zeros_like(gain), whole_group, b.step_mask, 1, cfg.norm_mode, cfg.epsilon)  # c2
    adv_episode = episode_advantage(b, cfg)
    return {
        "state_value": jnp.where(b.step_mask, state_value[b.src], 0.0),
        "next_value": next_value,
        "adv_value": adv_value,
        "adv_gain": adv_gain,
        "adv_episode": adv_episode,
        "advantage": adv_episode + cfg.step_weight * (adv_value + adv_gain),
    }


# ----------------------------------------------------------------------------------------- BEACON


def beacon_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    """BEACON: discounted reward to the next milestone, normalised within (group, segment)."""
    T = b.src.shape[-1]
    t = jnp.arange(T)
    flags = b.milestone & b.step_mask
    segment = scan_steps(flags.astype(jnp.int32), jnp.add, 0) - flags  # completed milestones before the step
    beyond = T  # "no milestone ahead"
    next_milestone = scan_steps(jnp.where(flags, t[None, :], beyond), jnp.minimum, beyond, reverse=True)
    ahead = next_milestone < beyond
    exponent = jnp.where(ahead, next_milestone - t[None, :], 0).astype(float_dtype())
    segment_reward = jnp.where(b.step_mask & ahead, cfg.success_reward * jnp.power(cfg.beacon_gamma, exponent), 0.0)
    penalty = invalid_penalty(b, cfg)
    adv_segment = segment_normalize(segment_reward, penalty, segment, b.step_mask, T + 1, cfg.norm_mode, cfg.epsilon)
    adv_episode = episode_advantage(b, cfg)
    return {
        "segment": jnp.where(b.step_mask, segment, 0),
        "segment_reward": jnp.where(b.step_mask, segment_reward - penalty, 0.0),
        "adv_segment": adv_segment,
        "adv_episode": adv_episode,
        "advantage": adv_episode + cfg.step_weight * adv_segment,
    }


# ----------------------------------------------------------------------------------------- ECPO


def ecpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    """ECPO [reconstructed]: shrunk per-action deviations at each anchor, gated by the between-action
    share of the anchor's variance."""
    K, T = b.src.shape
    N = b.node_mask.shape[-1]
    mask = b.step_mask.ravel()
    step_return = discounted_returns(b, cfg.gamma).ravel()
    penalty = invalid_penalty(b, cfg).ravel()
    anchor = Clusters(b.src.ravel(), mask, N)
    # (s_t, action) pairs, every invalid step at an anchor the one action "<invalid>" (E2), numbered
    # on the host (docs/credit-implementation.md §1.1)
    pair = Clusters(b.state_action.ravel(), mask, K * T)
    deviation, scale = anchor.deviation(step_return, penalty)
    std = jnp.sqrt(anchor.sum(deviation**2) / jnp.maximum(anchor.count - 1.0, 1.0))
    spread = mask & (anchor.count > 1) & (std > TIE_RELATIVE_TOLERANCE * scale)
    deviation = jnp.where(spread, deviation, 0.0)  # ties and singleton anchors: no step credit
    pair_deviation = pair.mean(deviation)  # Ḡ_u − μ_s
    shrunk = pair.count * pair_deviation / (pair.count + cfg.ecpo_kappa)
    action_advantage = shrunk / (std + cfg.epsilon) if cfg.norm_mode == "mean_std" else shrunk  # E4
    between = anchor.mean(pair_deviation**2)  # B_s = Σ_u (n_u/n_s)(Ḡ_u − μ_s)² (E5)
    within = anchor.mean((deviation - pair_deviation) ** 2)  # W_s
    gate = jnp.where(
        between > 0, jnp.tanh(anchor.count / cfg.ecpo_tau) * between / (between + within + cfg.ecpo_gate_epsilon), 0.0
    )
    adv_step = jnp.where(mask, gate * action_advantage, 0.0).reshape(K, T)
    adv_episode = episode_advantage(b, cfg)
    return {
        "gate": jnp.where(mask, gate, 0.0).reshape(K, T),
        "adv_action": jnp.where(mask, action_advantage, 0.0).reshape(K, T),
        "adv_episode": adv_episode,
        "advantage": adv_episode + cfg.step_weight * adv_step,
    }


# ----------------------------------------------------------------------------------------- ProGPO


def progpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    """ProGPO [reconstructed]: in a group without any success, GiGPO on first-visit novelty rewards."""
    # n_t: s_{t+1} not among s_0..s_t (the host's, docs/credit-implementation.md §1.1)
    novelty = b.step_mask & b.first_visit
    zero_group = ~jnp.any(trajectory_success(b.reward, b.step_mask, b.traj_mask))
    # The base estimator on the novelty rewards in a group without success, on its own rewards
    # otherwise: one pass of it, with the rewards chosen first.
    coverage = jnp.where(novelty, cfg.progpo_coverage_reward, 0.0).astype(float_dtype())
    base = gigpo_group if cfg.progpo_base == "gigpo" else grpo_group
    return {
        "novelty": novelty.astype(float_dtype()),
        "zero_group": jnp.broadcast_to(zero_group, b.step_mask.shape),
        "advantage": base(b._replace(reward=jnp.where(zero_group, coverage, b.reward)), cfg)["advantage"],
    }


# ----------------------------------------------------------------------------------------- MVPO


def mvpo_kappa(b: CreditBatch, cfg: CreditConfig, ema_prev: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(m_t, κ_t) from the batch's success share (all groups); κ uses the updated EMA (M8)."""
    success = trajectory_success(b.reward, b.step_mask, b.traj_mask)
    share = jnp.sum(success) / jnp.maximum(jnp.sum(b.traj_mask), 1)
    ema_new = cfg.mvpo_ema_beta * ema_prev + (1.0 - cfg.mvpo_ema_beta) * share
    if not cfg.mvpo_kappa_decay:
        return ema_new, jnp.ones((), ema_new.dtype)
    return ema_new, jnp.clip(1.0 - ema_new / cfg.mvpo_success_ref, 0.0, 1.0)


def first_positions(values: jax.Array, real: jax.Array, num_values: int) -> jax.Array:
    """[K, P] the first position of each entry's value in its row (entries outside ``real`` ignored).

    One scatter-min into a [K, num_values] table, where comparing every pair of positions would be
    [K, P, P]; ``values`` of real entries lie in [0, num_values)."""
    K, P = values.shape
    position = jnp.broadcast_to(jnp.arange(P, dtype=jnp.int32), (K, P))
    row = jnp.broadcast_to(jnp.arange(K)[:, None], (K, P))
    at = jnp.where(real, values, 0)
    table = jnp.full((K, num_values), P, jnp.int32).at[row, at].min(jnp.where(real, position, P))
    return table[row, at]


def mvpo_regions(b: CreditBatch) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(region label [N], state sequence s_0..s_T [K, T+1] (−1 padded), real positions [K, T+1]).

    A revisit s_u = s_t (t the previous visit) unions s_t..s_u (M1); the labels, the smallest node id
    of each union-find set, are graph structure that no option changes, so the host finds them in
    linear time (``CreditBatch.region``, docs/credit-implementation.md §1.1) where the program took a fixpoint loop.
    """
    K, T = b.src.shape
    length = jnp.sum(b.step_mask, axis=-1)
    position = jnp.arange(T + 1)
    padded_src = jnp.concatenate([b.src, jnp.zeros((K, 1), b.src.dtype)], axis=1)
    real = b.traj_mask[:, None] & (position[None, :] <= length[:, None])
    sequence = jnp.where(position[None, :] < length[:, None], padded_src, b.last_state[:, None])
    return b.region, jnp.where(real, sequence, -1), real


def mvpo_group(b: CreditBatch, cfg: CreditConfig, kappa: jax.Array) -> dict[str, jax.Array]:
    """MVPO [reconstructed]: GiGPO anchor credit where the anchor is informative, else κ·λ·ΔΦ."""
    K, T = b.src.shape
    N = b.node_mask.shape[-1]
    label, sequence, real = mvpo_regions(b)
    region = jnp.where(real, label[jnp.maximum(sequence, 0)], -1)
    success = trajectory_success(b.reward, b.step_mask, b.traj_mask)
    rows = jnp.broadcast_to(jnp.arange(K)[:, None], region.shape)
    visits = jnp.zeros((K, N), bool).at[rows, jnp.maximum(region, 0)].max(real)  # [K, regions]
    visitors = jnp.sum(visits & b.traj_mask[:, None], axis=0).astype(float_dtype())
    successes = jnp.sum(visits & success[:, None], axis=0).astype(float_dtype())
    future = safe_div(successes, visitors)  # F(ρ) (M2)
    position = jnp.arange(T + 1)
    repeat = real & (first_positions(region, real, N) < position[None, :])  # region entered before
    distinct = scan_steps((real & ~repeat).astype(jnp.int32), jnp.add, 0).astype(float_dtype())  # D_{i,u} (M3)
    most = jnp.max(jnp.where(real, distinct, 0.0))
    progress = (distinct - 1.0) / jnp.maximum(most - 1.0, 1.0)
    loops = (position[None, :] - (distinct - 1.0)) / jnp.maximum(position, 1)[None, :]  # Λ (M4)
    potential = (
        cfg.mvpo_w_future * future[jnp.maximum(region, 0)] + cfg.mvpo_w_progress * progress - cfg.mvpo_w_loop * loops
    )  # Φ (M5)
    delta = jnp.where(b.step_mask, potential[:, 1:] - potential[:, :-1], 0.0)

    step_return = discounted_returns(b, cfg.gamma)
    penalty = invalid_penalty(b, cfg)
    adv_anchor = anchor_normalize(step_return, penalty, b, cfg)  # GiGPO's A^S
    # M6: informative anchor = >= 2 rows whose penalty-free returns are not all equal
    anchors = Segments(b.src, b.step_mask, N)
    count = anchors.sum(jnp.ones((K * T, 1), float_dtype()))[:, 0]
    returns = step_return.reshape(-1, 1)
    top, negated_low, scale = anchors.max(jnp.concatenate([returns, -returns, jnp.abs(returns)], axis=1)).T
    informative = (count > 1) & (top + negated_low > TIE_RELATIVE_TOLERANCE * scale)
    routed = informative.reshape(K, T) if cfg.mvpo_route == "anchor" else jnp.zeros_like(b.step_mask)
    adv_step = jnp.where(routed, adv_anchor, kappa * cfg.mvpo_potential_weight * delta)
    adv_episode = episode_advantage(b, cfg)
    return {
        "delta": delta,
        "region": jnp.where(b.step_mask, region[:, :-1], -1),
        "informative": b.step_mask & routed,
        "adv_episode": adv_episode,
        "advantage": jnp.where(b.step_mask, adv_episode + adv_step, 0.0),
    }


def mvpo_batch(batch: CreditBatch, cfg: CreditConfig, ema_prev: jax.Array) -> dict[str, jax.Array]:
    """The registry's program: κ from the batch's success EMA, then MVPO on every group."""
    ema_new, kappa = mvpo_kappa(batch, cfg, ema_prev)
    terms = jax.vmap(lambda group: mvpo_group(group, cfg, kappa))(batch)
    return {**terms, "ema_new": ema_new, "kappa": kappa}

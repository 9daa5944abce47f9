"""Terms the estimators share, as pure jnp functions of one group (docs/credit.md §1-4).

The episode term Norm_q(Z), the anchor (and any segment) normalisation with its exactness shift,
discounted and graph returns, hops to the success sink, and safe division. Every program in
``baselines.py``, ``milegpo.py`` and ``family.py`` builds on these rather than recomputing them.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from milegpo_jax.credit.batch import CreditBatch
from milegpo_jax.credit.config import TIE_RELATIVE_TOLERANCE, CreditConfig
from milegpo_jax.credit.graph import Segments, float_dtype


def safe_div(numerator, denominator):
    """numerator / denominator where denominator > 0, else 0 ("0 if the max is 0", R9 of docs/credit.md §5.12)."""
    return jnp.where(denominator > 0, numerator / jnp.where(denominator > 0, denominator, 1.0), 0.0)


def masked_max(values, mask, axis=None):
    """Max of ``values`` over ``mask`` (0 where the mask is empty); values are >= 0 where it is used."""
    return jnp.max(jnp.where(mask, values, 0.0), axis=axis)


# ----------------------------------------------------------------------------------------- exactness


def exact_shift(segments: Segments, values: jax.Array, penalty: jax.Array) -> tuple[jax.Array, jax.Array]:
    """([R, C] ``values - penalty`` shifted so that equal totals in a segment are bit-equal, [R, C] the
    segment's max |values - penalty|, which scales the tie tolerance).

    In float32, 9.025 - 0.1 carries an error of ~5e-7, which a segment std of ~0.05 (rows that differ
    only by the invalid penalty) amplifies to ~1e-5. Each value is therefore first shifted by its
    segment's largest value (exactly 0 for tied values), and only then is the small penalty
    subtracted; a second shift makes rows with equal totals exactly 0, so a constant segment has
    exactly zero spread instead of rounding noise that the std would amplify. Deviations from the
    segment mean are mathematically unchanged.
    """
    columns = values.shape[1]
    row_mask = segments.mask[:, None]
    top_and_scale = segments.max(jnp.concatenate([values, jnp.abs(values - penalty)], axis=1))
    top, scale = top_and_scale[:, :columns], top_and_scale[:, columns:]
    first_shift = values - jnp.where(row_mask, top, 0.0) - penalty
    return first_shift - jnp.where(row_mask, segments.max(first_shift), 0.0), scale


def segment_normalize(
    values: jax.Array,
    penalty: jax.Array,
    segments: jax.Array,
    mask: jax.Array,
    num_segments: int,
    mode: str,
    epsilon: float,
) -> jax.Array:
    """verl-agent's step-level group normalisation (docs/credit.md §1.3) of ``values - penalty`` per segment.

    Groups of one row give 0; otherwise (x - mean) / (sample std + eps) or x - mean. Masked rows -> 0.
    ``values`` and ``penalty`` may carry a trailing axis of C columns ([..., C] with ``segments`` and
    ``mask`` of shape [...]): each column is normalised on its own, in the same scatters.

    The penalty comes separately so that tied rows stay exactly tied (``exact_shift``).
    """
    stacked = values.ndim > segments.ndim
    shape = values.shape
    columns = values.shape[-1] if stacked else 1
    values, penalty = values.reshape(-1, columns), penalty.reshape(-1, columns)
    segs = Segments(segments, mask, num_segments)
    row_mask = segs.mask[:, None]
    shifted, scale = exact_shift(segs, values, penalty)
    count_and_total = segs.sum(jnp.concatenate([jnp.ones_like(shifted[:, :1]), shifted], axis=1))
    count, total = count_and_total[:, :1], count_and_total[:, 1:]
    deviation = shifted - total / jnp.maximum(count, 1.0)
    std = jnp.sqrt(segs.sum(deviation**2) / jnp.maximum(count - 1.0, 1.0))
    spread = (count > 1) & (std > TIE_RELATIVE_TOLERANCE * jnp.maximum(scale, 0.0))  # else a tie: 0 (config.py)
    if mode == "mean_std":
        deviation = deviation / (std + epsilon)
    return jnp.where(row_mask & spread, deviation, 0.0).reshape(shape)


class Clusters:
    """Segment statistics of one group's flat rows keyed by ``ids`` (rows outside ``mask`` in the dump
    segment ``num``): HGPO's history suffixes, ECPO's anchors and (state, action) pairs."""

    def __init__(self, ids: jax.Array, mask: jax.Array, num: int):
        self.mask, self.segments = mask, Segments(ids, mask, num + 1)
        self.count = self.sum(jnp.ones(ids.shape, float_dtype()))

    def sum(self, x: jax.Array) -> jax.Array:
        """[R] per-row sum of ``x`` over the row's cluster."""
        return self.segments.sum(x[:, None])[:, 0]

    def max(self, x: jax.Array) -> jax.Array:
        return self.segments.max(x[:, None])[:, 0]

    def mean(self, x: jax.Array) -> jax.Array:
        return self.sum(x) / jnp.maximum(self.count, 1.0)

    def deviation(self, values: jax.Array, penalty: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(deviation of ``values - penalty`` from its cluster mean, max |values - penalty| per cluster),
        equal totals bit-equal (``exact_shift``)."""
        shifted, scale = exact_shift(self.segments, values[:, None], penalty[:, None])
        shifted, scale = shifted[:, 0], scale[:, 0]
        return jnp.where(self.mask, shifted - self.mean(shifted), 0.0), scale


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
    host's breadth-first search, docs/credit-implementation.md §1.1)."""
    return jnp.where(b.sink_hops >= 0, b.sink_hops.astype(float_dtype()), jnp.inf)


def return_distances(distance: jax.Array, node_mask: jax.Array, cfg: CreditConfig) -> jax.Array:
    """Distances used by the graph return: inf kept ("zero"), or GraphGPO code's d_max + 1 rule."""
    if cfg.unreachable == "zero":
        return distance
    finite = jnp.isfinite(distance) & node_mask
    d_max = masked_max(distance, finite)
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



def discounted_returns(b: CreditBatch, gamma: float) -> jax.Array:
    """[K, T] R_t = Σ_{j>=t} γ^{j-t} r_j of one group, before any invalid penalty."""
    T = b.src.shape[-1]
    t = jnp.arange(T)
    later = t[None, :] - t[:, None]  # [t, j] = j - t
    discount = jnp.where(later >= 0, jnp.power(gamma, jnp.maximum(later, 0).astype(float_dtype())), 0.0)
    return jnp.where(b.step_mask, b.reward, 0.0) @ discount.T


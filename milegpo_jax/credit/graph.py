"""Rollout-graph statistics of one task group in jnp (the estimators vmap them over groups).

Shapes of one group: K trajectories x T steps, N nodes (node 0 is the success sink). All functions
are pure, shape-static and jit/vmap friendly; masked (padded) steps contribute nothing.

Distances and potentials avoid all-pairs shortest paths (docs/credit.md §10): the distance to the
sink is a single-target Bellman iteration, and every potential max_v w(v)·ω^d(s,v) is the fixpoint
of Φ(s) = max(w(s), ω·max_{s'∈succ(s)} Φ(s')), which holds because w >= 0 and 0 < ω <= 1. Both
iterate over the step rows (the observed transitions) rather than a dense adjacency matrix.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from milegpo_jax.credit.config import TIE_RELATIVE_TOLERANCE


def float_dtype() -> jnp.dtype:
    """The working float type: float64 inside ``jax.enable_x64(True)`` (precision="float64"), else float32."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


class GroupGraph(NamedTuple):
    """Trajectory visit and edge statistics of one group (docs/credit.md §5.4, §5.7)."""

    adjacency: jax.Array  # bool [N, N]: distinct observed edges (u, v)
    edge_rows: jax.Array  # float [N, N]: step rows using each edge (multigraph multiplicity)
    edge_trajectories: jax.Array  # float [N, N]: |T(e)|, distinct trajectories using each edge
    edge_successes: jax.Array  # float [N, N]: |T+(e)|
    visits: jax.Array  # float [K, N]: visits of each node by each trajectory
    success: jax.Array  # bool [K]: real trajectory with episode reward > 0 (R2)
    failure: jax.Array  # bool [K]: real trajectory that did not succeed


def trajectory_success(reward: jax.Array, step_mask: jax.Array, traj_mask: jax.Array) -> jax.Array:
    """[K] success flags: summed env reward > 0 (R2, docs/credit.md §1.2)."""
    return traj_mask & (jnp.sum(jnp.where(step_mask, reward, 0.0), axis=-1) > 0.0)


def group_graph(
    src: jax.Array,
    dst: jax.Array,
    step_mask: jax.Array,
    traj_mask: jax.Array,
    last_state: jax.Array,
    reward: jax.Array,
    num_nodes: int,
    sources_only: bool = False,
) -> GroupGraph:
    """Builds visit counts, edge trajectory counts and the adjacency of one group.

    Visits count s_0..s_T of each trajectory (the step sources plus the last step's next state, R5);
    with ``sources_only`` the final state is left out. Edge statistics scatter each step row into
    [N, N] once, flagged when it is the first use of its edge in its trajectory, so that no
    [K, N, N] per-trajectory tensor is ever built.
    """
    K, T = src.shape
    weight = step_mask.astype(float_dtype())
    traj_index = jnp.broadcast_to(jnp.arange(K)[:, None], (K, T))
    visits = jnp.zeros((K, num_nodes), float_dtype()).at[traj_index, src].add(weight)
    if not sources_only:
        visits = visits.at[jnp.arange(K), last_state].add(traj_mask.astype(float_dtype()))
    earlier = jnp.tril(jnp.ones((T, T), bool), k=-1)  # [t, t'] = t' < t
    repeats = (src[:, :, None] == src[:, None, :]) & (dst[:, :, None] == dst[:, None, :]) & earlier
    first_use = step_mask & ~jnp.any(repeats & step_mask[:, None, :], axis=-1)
    success = trajectory_success(reward, step_mask, traj_mask)
    first_weight = first_use.astype(float_dtype())
    empty = jnp.zeros((num_nodes, num_nodes), float_dtype())
    edge_rows = empty.at[src, dst].add(weight)
    return GroupGraph(
        adjacency=edge_rows > 0,
        edge_rows=edge_rows,
        edge_trajectories=empty.at[src, dst].add(first_weight),
        edge_successes=empty.at[src, dst].add(first_weight * success[:, None]),
        visits=visits,
        success=success,
        failure=traj_mask & ~success,
    )


def distances_to(targets: jax.Array, src: jax.Array, dst: jax.Array, step_mask: jax.Array) -> jax.Array:
    """[N] directed hop distance from every node to the nearest target node (inf if unreachable).

    Bellman relaxation d(u) <- min(d(u), 1 + d(v)) over the observed transitions (u, v), iterated
    until nothing changes. It runs over the step rows, not a dense [N, N] adjacency: rows repeat
    edges, which a min does not mind, and K*T rows are far fewer than N^2 entries.
    """
    inf = jnp.asarray(jnp.inf, float_dtype())
    src, dst, step_mask = src.ravel(), dst.ravel(), step_mask.ravel()
    start = jnp.where(targets, 0.0, inf).astype(float_dtype())

    def relax(state):
        distance, _ = state
        through_row = jnp.where(step_mask, 1.0 + distance[dst], inf)
        updated = distance.at[src].min(through_row)
        return updated, jnp.any(updated != distance)

    distance, _ = lax.while_loop(lambda state: state[1], relax, (start, jnp.asarray(True)))
    return distance


def max_product_potentials(
    weights: jax.Array, src: jax.Array, dst: jax.Array, step_mask: jax.Array, omega: float
) -> jax.Array:
    """[P, N] potentials Φ_p(s) = max_v weights[p, v]·ω^d(s, v) for P weight vectors at once.

    ``weights`` must be >= 0 and 0 outside the candidate set; unreachable candidates contribute 0.
    Iterates Φ(u) <- max(Φ(u), ω·Φ(v)) over the transition rows (u, v) until nothing changes.
    """
    src, dst, step_mask = src.ravel(), dst.ravel(), step_mask.ravel()

    def propagate(state):
        potential, _ = state
        through_row = jnp.where(step_mask, omega * potential[:, dst], 0.0)
        updated = potential.at[:, src].max(through_row)
        return updated, jnp.any(updated != potential)

    potential, _ = lax.while_loop(lambda state: state[1], propagate, (weights, jnp.asarray(True)))
    return potential


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

    Why the penalty comes separately: in float32, 9.025 - 0.1 carries an error of ~5e-7, which a
    segment std of ~0.05 (rows that differ only by the invalid penalty) amplifies to ~1e-5. Each value
    is therefore first shifted by its segment's largest value (exactly 0 for tied values), and only
    then is the small penalty subtracted; a second shift makes rows with equal totals exactly 0, so a
    constant segment has exactly zero spread instead of rounding noise that the std would amplify.
    The normalised result is mathematically unchanged.
    """
    shape = values.shape
    values, penalty, segments, mask = values.ravel(), penalty.ravel(), segments.ravel(), mask.ravel()
    weight = mask.astype(values.dtype)

    def shift_by_segment_max(x):
        top = jnp.full(num_segments, -jnp.inf, x.dtype).at[segments].max(jnp.where(mask, x, -jnp.inf))
        return x - jnp.where(mask, top[segments], 0.0)

    shifted = shift_by_segment_max(shift_by_segment_max(values) - penalty)

    def segment_sum(x):
        return jnp.zeros(num_segments, values.dtype).at[segments].add(x * weight)

    count = segment_sum(jnp.ones_like(values))
    deviation = shifted - (segment_sum(shifted) / jnp.maximum(count, 1.0))[segments]
    std = jnp.sqrt(segment_sum(deviation**2) / jnp.maximum(count - 1.0, 1.0))
    scale = jnp.zeros(num_segments, values.dtype).at[segments].max(jnp.where(mask, jnp.abs(values - penalty), 0.0))
    spread = (count > 1) & (std > TIE_RELATIVE_TOLERANCE * scale)  # else a tie: advantage 0 (config.py)
    if mode == "mean_std":
        deviation = deviation / (std[segments] + epsilon)
    return jnp.where(mask & spread[segments], deviation, 0.0).reshape(shape)

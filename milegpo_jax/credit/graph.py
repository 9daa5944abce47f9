"""Rollout-graph statistics of one task group in jnp (the estimators vmap them over groups).

Shapes of one group: K trajectories x T steps, N nodes (node 0 is the success sink). All functions
are pure, shape-static and jit/vmap friendly; masked (padded) steps contribute nothing.

Potentials avoid all-pairs shortest paths (docs/credit-implementation.md §1): every potential max_v w(v)·ω^d(s,v)
is the fixpoint of Φ(s) = max(w(s), ω·max_{s'∈succ(s)} Φ(s')), which holds because w >= 0 and
0 < ω <= 1, iterated over the group's distinct observed transitions (numbered on the host) rather
than a dense adjacency matrix. The distance to the sink needs no options, so the host finds it
(``CreditBatch.sink_hops``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax


def float_dtype() -> jnp.dtype:
    """The working float type: float64 inside ``jax.enable_x64(True)`` (precision="float64"), else float32."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


class GroupGraph(NamedTuple):
    """Trajectory visit and edge statistics of one group (docs/credit.md §5.4, §5.7).

    Edges are the group's distinct transitions, numbered on the host (``CreditBatch.edge``), and their
    statistics are kept per edge id: no [N, N] matrix is built, since the distinct edges are far fewer
    than N^2 node pairs."""

    visits: jax.Array  # float [K, N]: visits of each node by each trajectory
    success: jax.Array  # bool [K]: real trajectory with episode reward > 0 (R2)
    failure: jax.Array  # bool [K]: real trajectory that did not succeed
    edge_users: jax.Array  # float [E]: |T(e)|, distinct trajectories using each edge
    edge_winners: jax.Array  # float [E]: |T+(e)|, the successful ones among them


def trajectory_success(reward: jax.Array, step_mask: jax.Array, traj_mask: jax.Array) -> jax.Array:
    """[K] success flags: summed env reward > 0 (R2, docs/credit.md §1.2)."""
    return traj_mask & (jnp.sum(jnp.where(step_mask, reward, 0.0), axis=-1) > 0.0)


def sort_rows(codes: jax.Array, valid: jax.Array, bound: int) -> tuple[jax.Array, jax.Array]:
    """(row order, codes in that order): rows sorted by (code, row index); invalid rows last.

    ``codes`` of valid rows lie in [0, bound). Where (bound + 1) * rows fits in int32, code and row
    index are packed into one key, since XLA's CPU sort of one operand is several times faster than
    an argsort (a sort of key/index pairs)."""
    size = codes.shape[0]
    rows = jnp.arange(size, dtype=jnp.int32)
    codes = jnp.where(valid, codes, bound).astype(jnp.int32)
    if (bound + 1) * size < 2**31:
        packed = jnp.sort(codes * size + rows)
        return packed % size, packed // size
    order = jnp.argsort(codes, stable=True).astype(jnp.int32)
    return order, codes[order]


def _starts_run(ordered: jax.Array) -> jax.Array:
    return jnp.concatenate([jnp.ones(1, bool), ordered[1:] != ordered[:-1]])


def _unsort(order: jax.Array, values: jax.Array) -> jax.Array:
    """Values given in sorted order, back in row order."""
    return jnp.zeros_like(values).at[order].set(values, unique_indices=True)


def scan_steps(values: jax.Array, combine, identity, reverse: bool = False) -> jax.Array:
    """Inclusive scan of ``combine`` along the last axis (from the end with ``reverse``).

    Log-step doubling: log2(n) element-wise passes, several times faster on XLA:CPU than the
    reduce-window that ``lax.cummin``/``jnp.cumsum`` lower to. Exact for min, max and integer sums
    (float sums would add in another order than a sequential scan)."""
    n, span = values.shape[-1], 1
    while span < n:
        pad = jnp.full(values.shape[:-1] + (span,), identity, values.dtype)
        if reverse:
            shifted = jnp.concatenate([values[..., span:], pad], axis=-1)
        else:
            shifted = jnp.concatenate([pad, values[..., :-span]], axis=-1)
        values = combine(values, shifted)
        span *= 2
    return values


def dense_ids(codes: jax.Array, valid: jax.Array, bound: int) -> jax.Array:
    """[R] dense ids 0.. of equal ``codes`` among the valid rows (in code order); invalid rows get R.

    ``codes`` of valid rows lie in [0, bound). A sort and a cumulative sum: O(R log R), where a
    row-equality matrix would be O(R²)."""
    order, ordered = sort_rows(codes, valid, bound)
    ids = _unsort(order, (jnp.cumsum(_starts_run(ordered)) - 1).astype(jnp.int32))
    return jnp.where(valid, ids, codes.shape[0])


def group_graph(
    src: jax.Array,
    step_mask: jax.Array,
    traj_mask: jax.Array,
    last_state: jax.Array,
    reward: jax.Array,
    edge: jax.Array,
    first_use: jax.Array,
    num_nodes: int,
    num_edges: int,
    sources_only: bool = False,
) -> GroupGraph:
    """Builds visit counts and the edge statistics of one group.

    Visits count s_0..s_T of each trajectory (the step sources plus the last step's next state, R5);
    with ``sources_only`` the final state is left out. The first row of each (edge, trajectory)
    (``first_use``, from the host) counts one user of the edge: |T(e)|, and |T+(e)| among the
    successful trajectories. Padded rows carry edge id ``num_edges`` and land in a spare slot.
    """
    K, T = src.shape
    weight = step_mask.astype(float_dtype())
    visitor, visited, weight = jnp.repeat(jnp.arange(K), T), src.ravel(), weight.ravel()
    if not sources_only:  # s_T in the same scatter
        visitor, visited = jnp.concatenate([visitor, jnp.arange(K)]), jnp.concatenate([visited, last_state])
        weight = jnp.concatenate([weight, traj_mask.astype(float_dtype())])
    visits = jnp.zeros((K, num_nodes), float_dtype()).at[visitor, visited].add(weight)
    success = trajectory_success(reward, step_mask, traj_mask)
    mask, edge = step_mask.ravel(), edge.ravel()
    first_weight = (mask & first_use.ravel()).astype(float_dtype())
    users_winners = jnp.zeros((num_edges + 1, 2), float_dtype()).at[edge].add(
        jnp.stack([first_weight, first_weight * jnp.repeat(success, T)], axis=1)
    )
    return GroupGraph(
        visits=visits,
        success=success,
        failure=traj_mask & ~success,
        edge_users=users_winners[:num_edges, 0],
        edge_winners=users_winners[:num_edges, 1],
    )


def max_product_potentials(
    weights: jax.Array, src: jax.Array, dst: jax.Array, mask: jax.Array, omega: float
) -> jax.Array:
    """[P, N] potentials Φ_p(s) = max_v weights[p, v]·ω^d(s, v) for P weight vectors at once.

    ``weights`` must be >= 0 and 0 outside the candidate set; unreachable candidates contribute 0.
    Iterates Φ(u) <- max(Φ(u), ω·Φ(v)) over the transitions (u, v) where ``mask`` (the distinct
    edges) until nothing changes.

    Under vmap (the estimators map it over groups) every group shares one loop that runs until no
    group changes: a converged group's extra rounds change nothing (max is idempotent at the
    fixpoint), so the result is the same bit for bit, and XLA:CPU runs about half the operations
    per round that vmap's per-group stopping rule costs (docs/credit-implementation.md §1).
    """

    @jax.custom_batching.custom_vmap
    def potentials(weights, src, dst, mask):
        return _fixpoint(weights[None], src.reshape(1, -1), dst.reshape(1, -1), mask.reshape(1, -1), omega)[0]

    @potentials.def_vmap
    def _batched(axis_size, in_batched, weights, src, dst, mask):
        def batched(x, is_batched):
            return x if is_batched else jnp.broadcast_to(x, (axis_size, *x.shape))

        weights, src, dst, mask = map(batched, (weights, src, dst, mask), in_batched)
        flat = lambda x: x.reshape(axis_size, -1)  # noqa: E731
        return _fixpoint(weights, flat(src), flat(dst), flat(mask), omega), True

    return potentials(weights, src, dst, mask)


def _fixpoint(weights: jax.Array, src: jax.Array, dst: jax.Array, mask: jax.Array, omega: float) -> jax.Array:
    """[B, P, N] potentials of B groups' weights [B, P, N] over their edges [B, E], in one loop."""
    groups = jnp.arange(src.shape[0])[:, None]

    def propagate(state):  # node-major [B, N, P]: an edge's P values are contiguous for the gather and scatter
        potential, _ = state
        through_edge = jnp.where(mask[..., None], omega * potential[groups, dst], 0.0)
        updated = potential.at[groups, src].max(through_edge)
        return updated, jnp.any(updated != potential)

    start = jnp.swapaxes(weights, 1, 2)
    potential, _ = lax.while_loop(lambda state: state[1], propagate, (start, jnp.asarray(True)))
    return jnp.swapaxes(potential, 1, 2)


class Segments:
    """Rows grouped into ``num`` segments by ``ids`` (rows outside ``mask`` belong to none): per-row
    reductions over each row's segment.

    Several columns reduce in one scatter (``columns`` [R, C]), since on XLA:CPU a scatter costs about
    the same for one column as for a few, and scatters dominate the estimators' time. One segment
    (the whole group) uses plain reductions instead of a scatter."""

    def __init__(self, ids: jax.Array, mask: jax.Array, num: int):
        self.ids, self.mask, self.num = ids.ravel(), mask.ravel(), num

    def _reduce(self, columns: jax.Array, identity: float, kind: str) -> jax.Array:
        columns = jnp.where(self.mask[:, None], columns, identity)
        if self.num == 1:
            whole = {"add": jnp.sum, "max": jnp.max}[kind](columns, axis=0)
            return jnp.broadcast_to(whole, columns.shape)
        table = jnp.full((self.num, columns.shape[1]), identity, columns.dtype)
        return getattr(table.at[self.ids], kind)(columns)[self.ids]

    def sum(self, columns: jax.Array) -> jax.Array:
        """[R, C] per-row sums of ``columns`` over the row's segment (0 from rows outside the mask)."""
        return self._reduce(columns, 0.0, "add")

    def max(self, columns: jax.Array) -> jax.Array:
        """[R, C] per-row maxima (-inf from rows outside the mask)."""
        return self._reduce(columns, -jnp.inf, "max")

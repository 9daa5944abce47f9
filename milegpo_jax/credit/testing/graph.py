"""The explicit all-pairs forms of ``credit/graph.py``'s fixpoints, for tests (docs/credit-implementation.md §1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from milegpo_jax.credit.graph import float_dtype


def candidate_distances(candidates: jax.Array, src: jax.Array, dst: jax.Array, step_mask: jax.Array) -> jax.Array:
    """[N, N] d(s, v): hops from every state s to every candidate v (inf where v is no candidate or
    unreachable). The estimators never need it: ``graph.max_product_potentials`` folds it into a
    max-product fixpoint, which tests check against this explicit form."""
    num_nodes = candidates.shape[-1]
    inf = jnp.asarray(jnp.inf, float_dtype())
    src, dst, step_mask = src.ravel(), dst.ravel(), step_mask.ravel()
    start = jnp.where(jnp.eye(num_nodes, dtype=bool) & candidates[None, :], 0.0, inf).astype(float_dtype())

    def relax(state):
        distance, _ = state
        through_row = jnp.where(step_mask[:, None], 1.0 + distance[dst], inf)
        updated = distance.at[src].min(through_row)
        return updated, jnp.any(updated != distance)

    distance, _ = lax.while_loop(lambda state: state[1], relax, (start, jnp.asarray(True)))
    return distance

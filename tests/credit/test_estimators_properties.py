"""Property tests: the jnp estimators equal the plain-Python reference on random groups.

Also: invariance to extra padding and to permuting trajectories, exactly-zero padded rows, and that
the per-group maths is really vmapped (a batch equals its groups computed one at a time).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from milegpo_jax.credit.testing import reference
from milegpo_jax.credit.batch import build_batch
from milegpo_jax.credit.config import make_credit_config
from milegpo_jax.credit.estimators import estimate_advantages
from milegpo_jax.credit.graph import distances_to, max_product_potentials
from milegpo_jax.credit.testing.graph import candidate_distances
from milegpo_jax.credit.rollouts import Group
from tests.credit.strategies import batches_of_groups, option_overrides

# The four of docs/credit.md; the family of docs/credit-family.md has its own tests (test_family_properties.py).
ESTIMATORS = ("grpo", "gigpo", "graphgpo", "milegpo")
# Few distinct shapes: hypothesis examples reuse compiled functions instead of recompiling each time.
BUCKETS = {"min_groups": 4, "min_trajectories": 8, "min_steps": 8, "min_nodes": 8}
# Example counts come from the hypothesis profile (tests/conftest.py); HYPOTHESIS_PROFILE=stress searches longer.
PROPERTY_SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _release_executables_between_examples():
    """Hypothesis draws a new static config per example, i.e. one compile each; keep the process
    well below vm.max_map_count inside one test too (see tests/conftest.py)."""
    if estimate_advantages._cache_size() > 40:
        estimate_advantages.clear_cache()


def _jnp_advantages(groups, cfg, **padding):
    _release_executables_between_examples()
    batch, layout = build_batch(groups, **{**BUCKETS, **padding})
    return layout.unpad(estimate_advantages(batch, cfg)), batch, np.asarray(estimate_advantages(batch, cfg))


def _assert_nested_close(actual, expected, atol=1e-5, rtol=1e-5):
    for g, (group_actual, group_expected) in enumerate(zip(actual, expected, strict=True)):
        for k, (traj_actual, traj_expected) in enumerate(zip(group_actual, group_expected, strict=True)):
            np.testing.assert_allclose(
                traj_actual, traj_expected, atol=atol, rtol=rtol, err_msg=f"group {g} trajectory {k}"
            )


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("recipe", ["alfworld", "webshop"])
@PROPERTY_SETTINGS
@given(groups=batches_of_groups())
def test_recipe_defaults_match_reference_in_float32(estimator, recipe, groups):
    """The training precision. Group normalisation of values that are equal in exact arithmetic
    but reached along different float paths is ill-conditioned (mean-std turns 1-ulp noise into
    O(0.01) advantages), so a long randomized search in float32 can meet such a group; the float64
    tests below hold there too."""
    cfg = make_credit_config(estimator, recipe)
    actual, _, _ = _jnp_advantages(groups, cfg)
    _assert_nested_close(actual, reference.compute_advantages(groups, cfg))


@pytest.mark.parametrize("estimator", ESTIMATORS)
@PROPERTY_SETTINGS
@given(groups=batches_of_groups(), overrides=option_overrides(), recipe=st.sampled_from(["alfworld", "webshop"]))
def test_every_option_matches_reference_in_float64(estimator, groups, overrides, recipe):
    cfg = make_credit_config(estimator, recipe, overrides={**overrides, "precision": "float64"})
    actual, _, _ = _jnp_advantages(groups, cfg)
    _assert_nested_close(actual, reference.compute_advantages(groups, cfg), atol=1e-7, rtol=1e-7)


@pytest.mark.parametrize("estimator", ESTIMATORS)
@PROPERTY_SETTINGS
@given(groups=batches_of_groups(), data=st.data())
def test_padding_and_permutation_invariance(estimator, groups, data):
    # float64: summation order changes with padding and permutation, which float32 near-ties feel.
    cfg = make_credit_config(estimator, data.draw(st.sampled_from(["alfworld", "webshop"])), overrides={"precision": "float64"})
    base, batch, padded = _jnp_advantages(groups, cfg)

    # Padded steps, trajectories, groups and nodes carry exactly zero advantage.
    assert np.all(padded[~np.asarray(batch.step_mask)] == 0.0)

    more_padding, _, _ = _jnp_advantages(groups, cfg, min_groups=8, min_trajectories=16, min_steps=16, min_nodes=32)
    _assert_nested_close(more_padding, base, atol=1e-9, rtol=1e-9)

    permutations = [data.draw(st.permutations(range(len(group.trajectories)))) for group in groups]
    permuted_groups = [
        Group(tuple(group.trajectories[i] for i in order)) for group, order in zip(groups, permutations)
    ]
    permuted, _, _ = _jnp_advantages(permuted_groups, cfg)
    unpermuted = [[traj for _, traj in sorted(zip(order, group))] for order, group in zip(permutations, permuted)]
    _assert_nested_close(unpermuted, base, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("estimator", ESTIMATORS)
@PROPERTY_SETTINGS
@given(groups=batches_of_groups(max_groups=4))
def test_batch_equals_groups_one_at_a_time(estimator, groups):
    cfg = make_credit_config(estimator)
    together, _, _ = _jnp_advantages(groups, cfg)
    alone = [_jnp_advantages([group], cfg)[0][0] for group in groups]
    _assert_nested_close(together, alone, atol=1e-6, rtol=1e-6)


def test_jit_traces_once_per_shape_bucket():
    from tests.credit.spec_vectors import EXAMPLES

    cfg = dataclasses.replace(make_credit_config("milegpo"), eta=0.3)  # a config no other test compiled
    groups = [example["group"] for example in EXAMPLES.values()]
    before = estimate_advantages._cache_size()
    for count in (1, 2, 3):
        batch, _ = build_batch(groups[:count], **BUCKETS)
        jax.block_until_ready(estimate_advantages(batch, cfg))
    assert estimate_advantages._cache_size() - before == 1


@PROPERTY_SETTINGS
@given(groups=batches_of_groups(max_groups=1), data=st.data())
def test_potentials_equal_the_explicit_candidate_distance_formula(groups, data):
    """Φ(s) = max_v w(v)·ω^d(s, v) (Eqs. 7, 8, 19) equals the max-product fixpoint the estimators use."""
    batch, _ = build_batch(groups, **BUCKETS)
    group = jax.tree.map(lambda x: jnp.asarray(x)[0], batch)
    N = batch.node_mask.shape[-1]
    omega = data.draw(st.sampled_from([0.2, 0.5, 1.0]))
    candidates = jnp.asarray(data.draw(st.lists(st.booleans(), min_size=N, max_size=N))) & group.node_mask
    weights = jnp.where(candidates, jnp.asarray(data.draw(st.lists(st.floats(0.0, 1.0), min_size=N, max_size=N))), 0.0)
    distance = jax.jit(candidate_distances)(candidates, group.src, group.dst, group.step_mask)
    explicit = jnp.max(jnp.where(jnp.isfinite(distance), weights[None, :] * omega ** jnp.where(jnp.isfinite(distance), distance, 0.0), 0.0), axis=1)
    fixpoint = jax.jit(max_product_potentials, static_argnums=4)(weights[None, :], group.src, group.dst, group.step_mask, omega)[0]
    np.testing.assert_allclose(fixpoint, explicit, rtol=1e-6, atol=1e-7)
    # d(v, v) = 0 for candidates; d to the sink agrees with the single-target relaxation.
    assert np.all(np.diag(np.asarray(distance))[np.asarray(candidates)] == 0)
    sink = jnp.zeros(N, bool).at[0].set(True) & group.node_mask
    to_sink = jax.jit(candidate_distances)(sink, group.src, group.dst, group.step_mask)[:, 0]
    np.testing.assert_array_equal(to_sink, jax.jit(distances_to)(sink, group.src, group.dst, group.step_mask))

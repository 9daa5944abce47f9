"""Property tests of the family estimators (docs/credit-family.md): jnp equals the plain-Python
reference on random groups, padding/permutation invariance, exactly-zero padded rows, vmap equals
one group at a time, one trace per shape bucket, and the identities the equations imply."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milegpo_jax.credit.testing import reference
from milegpo_jax.credit.batch import build_batch
from milegpo_jax.credit.config import make_credit_config
from milegpo_jax.credit.estimators import advantages_and_ema, estimate_advantages, estimator_terms
from milegpo_jax.credit.testing.reference_family import family_advantages
from milegpo_jax.credit.rollouts import Group, Trajectory
from tests.credit.strategies import family_batches, family_option_overrides
from tests.credit.test_estimators_properties import (
    BUCKETS,
    PROPERTY_SETTINGS,
    _assert_nested_close,
    _jnp_advantages,
)

FAMILY = ("hgpo", "g2po", "beacon", "ecpo", "progpo", "mvpo")
RECIPES = st.sampled_from(["alfworld", "webshop"])
# Every example of the option test compiles anew (a new static config): fewer examples keep it lean.
OPTION_SETTINGS = settings(PROPERTY_SETTINGS, max_examples=8)
LEAN_SETTINGS = settings(PROPERTY_SETTINGS, max_examples=15)


@pytest.mark.parametrize("estimator", FAMILY)
@pytest.mark.parametrize("recipe", ["alfworld", "webshop"])
@LEAN_SETTINGS
@given(groups=family_batches(), ema_prev=st.sampled_from([0.0, 0.3]))
def test_recipe_defaults_match_reference_in_float32(estimator, recipe, groups, ema_prev):
    cfg = make_credit_config(estimator, recipe)
    batch, layout = build_batch(groups, **BUCKETS)
    advantages, ema_new = advantages_and_ema(batch, cfg, ema_prev)
    expected, expected_ema = family_advantages(groups, cfg, ema_prev)
    _assert_nested_close(layout.unpad(advantages), expected)
    assert float(ema_new) == pytest.approx(expected_ema, abs=1e-6)


@pytest.mark.parametrize("estimator", FAMILY)
@OPTION_SETTINGS
@given(groups=family_batches(), overrides=family_option_overrides(), recipe=RECIPES)
def test_every_option_matches_reference_in_float64(estimator, groups, overrides, recipe):
    cfg = make_credit_config(estimator, recipe, overrides={**overrides, "precision": "float64"})
    actual, _, _ = _jnp_advantages(groups, cfg)
    _assert_nested_close(actual, reference.compute_advantages(groups, cfg), atol=1e-7, rtol=1e-7)


@pytest.mark.parametrize("estimator", FAMILY)
@LEAN_SETTINGS
@given(groups=family_batches(), data=st.data())
def test_padding_and_permutation_invariance(estimator, groups, data):
    cfg = make_credit_config(estimator, data.draw(RECIPES), overrides={"precision": "float64"})
    base, batch, padded = _jnp_advantages(groups, cfg)
    assert np.all(padded[~np.asarray(batch.step_mask)] == 0.0)
    more_padding, _, _ = _jnp_advantages(groups, cfg, min_groups=8, min_trajectories=16, min_steps=16, min_nodes=32)
    _assert_nested_close(more_padding, base, atol=1e-9, rtol=1e-9)
    orders = [data.draw(st.permutations(range(len(group.trajectories)))) for group in groups]
    permuted, _, _ = _jnp_advantages([Group(tuple(g.trajectories[i] for i in o)) for g, o in zip(groups, orders)], cfg)
    unpermuted = [[traj for _, traj in sorted(zip(order, group))] for order, group in zip(orders, permuted)]
    _assert_nested_close(unpermuted, base, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("estimator", FAMILY)
@LEAN_SETTINGS
@given(groups=family_batches(max_groups=4))
def test_batch_equals_groups_one_at_a_time(estimator, groups):
    # MVPO's κ is one value per batch (its success share): fix it to compare groups alone.
    cfg = make_credit_config(estimator, overrides={"mvpo_kappa_decay": False})
    together, _, _ = _jnp_advantages(groups, cfg)
    alone = [_jnp_advantages([group], cfg)[0][0] for group in groups]
    _assert_nested_close(together, alone, atol=1e-6, rtol=1e-6)


def test_jit_traces_once_per_shape_bucket_and_ema_value():
    from tests.credit.spec_vectors_family import FAMILY_GROUPS

    groups = list(FAMILY_GROUPS.values())
    for estimator in FAMILY:
        cfg = dataclasses.replace(make_credit_config(estimator), epsilon=2e-6)  # a config no other test compiled
        before = estimate_advantages._cache_size()
        for count, ema_prev in ((1, 0.0), (2, 0.2), (4, 0.7)):
            batch, _ = build_batch(groups[:count], **BUCKETS)
            jax.block_until_ready(advantages_and_ema(batch, cfg, ema_prev))
        assert estimate_advantages._cache_size() - before == 1, estimator


# ----------------------------------------------------------------------------------------- identities


@LEAN_SETTINGS
@given(groups=family_batches())
def test_hgpo_without_history_is_the_gigpo_step_term(groups):
    """H = 0 leaves the k = 1 anchor clusters: mean mode gives GiGPO's A^S times 2/(2 + ε)."""
    hgpo = make_credit_config("hgpo", "webshop", overrides={"hgpo_history": 0, "precision": "float64"})
    gigpo = make_credit_config("gigpo", "webshop", overrides={"precision": "float64"})
    batch, _ = build_batch(groups, **BUCKETS)
    step_term = np.asarray(estimator_terms(batch, gigpo)["adv_step"]) * 2.0 / (2.0 + gigpo.epsilon)
    np.testing.assert_allclose(np.asarray(estimate_advantages(batch, hgpo)), step_term, atol=1e-9)


@LEAN_SETTINGS
@given(groups=family_batches(), recipe=RECIPES)
def test_progpo_equals_gigpo_in_groups_with_a_success(groups, recipe):
    batch, layout = build_batch(groups, **BUCKETS)
    progpo = layout.unpad(estimate_advantages(batch, make_credit_config("progpo", recipe)))
    gigpo = layout.unpad(estimate_advantages(batch, make_credit_config("gigpo", recipe)))
    for group, a, b in zip(groups, progpo, gigpo):
        if any(traj.succeeded for traj in group.trajectories):
            assert a == b


@LEAN_SETTINGS
@given(groups=family_batches(), recipe=RECIPES)
def test_ecpo_without_shrinkage_or_gate_and_distinct_actions_is_gigpo(groups, recipe):
    """κ = 0, τ → 0, gate ε = 0 and one action per row: ρ = 1 and A_act = GiGPO's A^S."""
    distinct = [
        Group(
            tuple(
                Trajectory(tuple(dataclasses.replace(s, action=f"{k}.{t}", valid=True) for t, s in enumerate(traj.steps)))
                for k, traj in enumerate(group.trajectories)
            )
        )
        for group in groups
    ]
    ecpo = make_credit_config(
        "ecpo", recipe, overrides={"ecpo_kappa": 0.0, "ecpo_tau": 1e-9, "ecpo_gate_epsilon": 0.0, "precision": "float64"}
    )
    gigpo = make_credit_config("gigpo", recipe, overrides={"precision": "float64"})
    batch, _ = build_batch(distinct, **BUCKETS)
    np.testing.assert_allclose(estimate_advantages(batch, ecpo), estimate_advantages(batch, gigpo), atol=1e-9)

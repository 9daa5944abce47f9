"""Property tests of all ten estimators (docs/credit.md, docs/credit-family.md).

For every estimator: the jnp result equals the plain-Python reference on random groups (float32 with
the recipes' defaults, float64 with random options), including MVPO's updated EMA; extra padding and
permuted trajectories change nothing; padded rows get exactly zero; a batch equals its groups computed
one at a time (the per-group maths is really vmapped); one trace per shape bucket and EMA value.
Also: the potentials equal their explicit candidate-distance form, and the identities the family's
equations imply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from milegpo_jax.credit import registry
from milegpo_jax.credit.batch import build_batch
from milegpo_jax.credit.columns import columns_from_groups
from milegpo_jax.credit.config import make_credit_config
from milegpo_jax.credit.estimators import advantages_and_ema, estimate_advantages, estimator_terms
from milegpo_jax.credit.graph import max_product_potentials, scan_steps
from milegpo_jax.credit.rollouts import SUCCESS_STATE, Group, Trajectory
from milegpo_jax.credit.testing import reference, reference_family
from milegpo_jax.credit.testing.reference_baselines import build_graph, distances_to
from milegpo_jax.credit.testing.reference_family import state_sequences, viability_regions
from milegpo_jax.credit.testing.graph import candidate_distances
from tests.credit.strategies import batches_of_groups, family_batches, family_option_overrides, option_overrides

# Every registered estimator (docs/credit-implementation.md §4): those of docs/credit.md, then the family's.
ESTIMATORS = tuple(spec.name for spec in registry.SPECS if spec.page.startswith("docs/credit.md"))
FAMILY = tuple(spec.name for spec in registry.SPECS if spec.page == "docs/credit-family.md")
RECIPES = registry.RECIPES
# Few distinct shapes: hypothesis examples reuse compiled functions instead of recompiling each time.
BUCKETS = {"min_groups": 4, "min_trajectories": 8, "min_steps": 8, "min_nodes": 8}
# Example counts come from the hypothesis profile (tests/conftest.py); HYPOTHESIS_PROFILE=stress searches longer.
PROPERTY_SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Search(NamedTuple):
    """How the properties of one estimator are searched."""

    batches: Callable[..., st.SearchStrategy]  # lists of groups (``max_groups=``)
    options: Callable[[], st.SearchStrategy]  # dicts of non-default options
    examples: settings  # the reference, invariance and vmap properties
    option_examples: settings  # the random-options property: every example compiles anew


# The family's groups carry milestone flags (BEACON's input) and its options are its own; it is searched
# with fewer examples, which keeps its twelve recipe parametrisations lean.
LEAN_SETTINGS = settings(PROPERTY_SETTINGS, max_examples=15)
SEARCH = {
    **{name: Search(batches_of_groups, option_overrides, PROPERTY_SETTINGS, PROPERTY_SETTINGS) for name in ESTIMATORS},
    **{
        name: Search(family_batches, family_option_overrides, LEAN_SETTINGS, settings(PROPERTY_SETTINGS, max_examples=8))
        for name in FAMILY
    },
}


def _release_executables_between_examples():
    """Hypothesis draws a new static config per example, i.e. one compile each; keep the process
    well below vm.max_map_count inside one test too (see tests/conftest.py)."""
    if estimate_advantages._cache_size() > 40:
        estimate_advantages.clear_cache()


def _jnp_advantages(groups, cfg, **padding):
    _release_executables_between_examples()
    batch, layout = build_batch(columns_from_groups(groups), **{**BUCKETS, **padding})
    return layout.unpad(estimate_advantages(batch, cfg)), batch, np.asarray(estimate_advantages(batch, cfg))


def _assert_nested_close(actual, expected, atol=1e-5, rtol=1e-5):
    for g, (group_actual, group_expected) in enumerate(zip(actual, expected, strict=True)):
        for k, (traj_actual, traj_expected) in enumerate(zip(group_actual, group_expected, strict=True)):
            np.testing.assert_allclose(
                traj_actual, traj_expected, atol=atol, rtol=rtol, err_msg=f"group {g} trajectory {k}"
            )


@pytest.mark.parametrize("estimator", ESTIMATORS + FAMILY)
@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_defaults_match_reference_in_float32(estimator, recipe):
    """The training precision. Group normalisation of values that are equal in exact arithmetic
    but reached along different float paths is ill-conditioned (mean-std turns 1-ulp noise into
    O(0.01) advantages), so a long randomized search in float32 can meet such a group; the float64
    tests below hold there too."""
    search, cfg = SEARCH[estimator], make_credit_config(estimator, recipe)

    @search.examples
    @given(groups=search.batches(), ema_prev=st.sampled_from([0.0, 0.3]))
    def check(groups, ema_prev):
        batch, layout = build_batch(columns_from_groups(groups), **BUCKETS)
        advantages, ema_new = advantages_and_ema(batch, cfg, ema_prev)
        expected, expected_ema = reference.advantages_and_ema(groups, cfg, ema_prev)
        _assert_nested_close(layout.unpad(advantages), expected)
        assert float(ema_new) == pytest.approx(expected_ema, abs=1e-6)  # MVPO's EMA; the others pass it on

    check()


@pytest.mark.parametrize("estimator", ESTIMATORS + FAMILY)
def test_every_option_matches_reference_in_float64(estimator):
    search = SEARCH[estimator]

    @search.option_examples
    @given(groups=search.batches(), overrides=search.options(), recipe=st.sampled_from(RECIPES))
    def check(groups, overrides, recipe):
        cfg = make_credit_config(estimator, recipe, overrides={**overrides, "precision": "float64"})
        actual, _, _ = _jnp_advantages(groups, cfg)
        _assert_nested_close(actual, reference.compute_advantages(groups, cfg), atol=1e-7, rtol=1e-7)

    check()


@pytest.mark.parametrize("estimator", ESTIMATORS + FAMILY)
def test_padding_and_permutation_invariance(estimator):
    search = SEARCH[estimator]

    @search.examples
    @given(groups=search.batches(), data=st.data())
    def check(groups, data):
        # float64: summation order changes with padding and permutation, which float32 near-ties feel.
        cfg = make_credit_config(estimator, data.draw(st.sampled_from(RECIPES)), overrides={"precision": "float64"})
        base, batch, padded = _jnp_advantages(groups, cfg)

        # Padded steps, trajectories, groups and nodes carry exactly zero advantage.
        assert np.all(padded[~np.asarray(batch.step_mask)] == 0.0)

        more_padding, _, _ = _jnp_advantages(groups, cfg, min_groups=8, min_trajectories=16, min_steps=16, min_nodes=32)
        _assert_nested_close(more_padding, base, atol=1e-9, rtol=1e-9)

        orders = [data.draw(st.permutations(range(len(group.trajectories)))) for group in groups]
        permuted, _, _ = _jnp_advantages([Group(tuple(g.trajectories[i] for i in o)) for g, o in zip(groups, orders)], cfg)
        unpermuted = [[traj for _, traj in sorted(zip(order, group))] for order, group in zip(orders, permuted)]
        _assert_nested_close(unpermuted, base, atol=1e-9, rtol=1e-9)

    check()


@pytest.mark.parametrize("estimator", ESTIMATORS + FAMILY)
def test_batch_equals_groups_one_at_a_time(estimator):
    # MVPO's κ is one value per batch (its success share): fix it to compare groups alone.
    overrides = {"mvpo_kappa_decay": False} if estimator == "mvpo" else {}
    cfg, search = make_credit_config(estimator, overrides=overrides), SEARCH[estimator]

    @search.examples
    @given(groups=search.batches(max_groups=4))
    def check(groups):
        together, _, _ = _jnp_advantages(groups, cfg)
        alone = [_jnp_advantages([group], cfg)[0][0] for group in groups]
        _assert_nested_close(together, alone, atol=1e-6, rtol=1e-6)

    check()


@pytest.mark.parametrize("estimator", ESTIMATORS + FAMILY)
def test_jit_traces_once_per_shape_bucket_and_ema_value(estimator):
    from tests.credit.spec_vectors_family import FAMILY_GROUPS

    groups = list(FAMILY_GROUPS.values())
    cfg = dataclasses.replace(make_credit_config(estimator), epsilon=2e-6)  # a config no other test compiled
    before = estimate_advantages._cache_size()
    for count, ema_prev in ((1, 0.0), (2, 0.2), (4, 0.7)):
        batch, _ = build_batch(columns_from_groups(groups[:count]), **BUCKETS)
        jax.block_until_ready(advantages_and_ema(batch, cfg, ema_prev))
    assert estimate_advantages._cache_size() - before == 1


@PROPERTY_SETTINGS
@given(groups=batches_of_groups(max_groups=1), data=st.data())
def test_potentials_equal_the_explicit_candidate_distance_formula(groups, data):
    """Φ(s) = max_v w(v)·ω^d(s, v) (Eqs. 7, 8, 19) equals the max-product fixpoint the estimators use."""
    batch, _ = build_batch(columns_from_groups(groups), **BUCKETS)
    group = jax.tree.map(lambda x: jnp.asarray(x)[0], batch)
    N = batch.node_mask.shape[-1]
    omega = data.draw(st.sampled_from([0.2, 0.5, 1.0]))
    candidates = jnp.asarray(data.draw(st.lists(st.booleans(), min_size=N, max_size=N))) & group.node_mask
    weights = jnp.where(candidates, jnp.asarray(data.draw(st.lists(st.floats(0.0, 1.0), min_size=N, max_size=N))), 0.0)
    distance = jax.jit(candidate_distances)(candidates, group.src, group.dst, group.step_mask)
    explicit = jnp.max(jnp.where(jnp.isfinite(distance), weights[None, :] * omega ** jnp.where(jnp.isfinite(distance), distance, 0.0), 0.0), axis=1)
    fixpoint = jax.jit(max_product_potentials, static_argnums=4)(weights[None, :], group.src, group.dst, group.step_mask, omega)[0]
    np.testing.assert_allclose(fixpoint, explicit, rtol=1e-6, atol=1e-7)
    # d(v, v) = 0 for candidates; d to the sink agrees with the host's breadth-first search.
    assert np.all(np.diag(np.asarray(distance))[np.asarray(candidates)] == 0)
    sink = jnp.zeros(N, bool).at[0].set(True) & group.node_mask
    to_sink = jax.jit(candidate_distances)(sink, group.src, group.dst, group.step_mask)[:, 0]
    np.testing.assert_array_equal(to_sink, np.where(group.sink_hops >= 0, group.sink_hops, np.inf))


@PROPERTY_SETTINGS
@given(groups=batches_of_groups(max_groups=3), data=st.data())
def test_potentials_mapped_over_groups_are_each_groups_own_bit_for_bit(groups, data):
    """The batched rule (one loop for all groups, docs/credit-implementation.md §1) against one call per group, with
    the weights mapped or shared by every group (an unbatched argument)."""
    batch, _ = build_batch(columns_from_groups(groups), **BUCKETS)
    G, N = batch.node_mask.shape
    omega = data.draw(st.sampled_from([0.2, 0.5, 1.0]))
    draw = lambda size: np.asarray(data.draw(st.lists(st.floats(0.0, 1.0, width=32), min_size=size, max_size=size)), np.float32)  # noqa: E731
    weights = np.where(np.asarray(batch.node_mask)[:, None, :], draw(G * 2 * N).reshape(G, 2, N), 0.0).astype(np.float32)
    src, dst, mask = (jnp.asarray(x) for x in (batch.src, batch.dst, batch.step_mask))
    one = jax.jit(max_product_potentials, static_argnums=4)
    mapped = jax.jit(jax.vmap(max_product_potentials, (0, 0, 0, 0, None)), static_argnums=4)
    own = np.stack([one(weights[g], src[g], dst[g], mask[g], omega) for g in range(G)])
    np.testing.assert_array_equal(mapped(weights, src, dst, mask, omega), own)
    shared = jax.jit(jax.vmap(max_product_potentials, (None, 0, 0, 0, None)), static_argnums=4)
    own = np.stack([one(weights[0], src[g], dst[g], mask[g], omega) for g in range(G)])
    np.testing.assert_array_equal(shared(weights[0], src, dst, mask, omega), own)


@PROPERTY_SETTINGS
@given(groups=family_batches(max_groups=3))
def test_the_hosts_hops_and_regions_are_the_references(groups):
    """``build_batch``'s node planes (docs/credit-implementation.md §1.1) against the plain-Python reference: hops to
    the sink by its reverse BFS, MVPO's regions by its union-find over the loop bodies (the same sets,
    each named by its least node id); padded nodes are unreachable singletons."""
    batch, layout = build_batch(columns_from_groups(groups), **BUCKETS)
    for g, group in enumerate(groups):
        graph = build_graph(group)
        names = [SUCCESS_STATE, *layout.node_names[g][1:]]
        hops_wanted = distances_to(graph, SUCCESS_STATE)
        regions = viability_regions(state_sequences(graph))
        hops, region = batch.sink_hops[g], batch.region[g]
        for i, name in enumerate(names):
            if i == 0 and not batch.node_mask[g, 0]:  # no success: the sink is no node
                assert hops[0] == -1 and region[0] == 0
                continue
            assert hops[i] == hops_wanted.get(name, -1), (g, name)
            same_region = [j for j, other in enumerate(names) if regions.get(other, other) == regions.get(name, name)]
            assert region[i] == min(same_region), (g, name)
        assert np.all(hops[len(names):] == -1) and np.array_equal(region[len(names):], np.arange(len(names), len(region)))


def _same_partition(ids: list[int], keys: list) -> bool:
    """Equal ids exactly where the keys are equal."""
    return len(set(ids)) == len(set(keys)) == len(set(zip(ids, keys)))


@PROPERTY_SETTINGS
@given(groups=family_batches(max_groups=3))
def test_the_hosts_row_clusters_are_the_references(groups):
    """``build_batch``'s row clusters (docs/credit-implementation.md §1.1) against the keys the plain-Python
    reference uses: ECPO's (state, action) pairs with every invalid step one action, HGPO's order-2
    and order-3 history keys, ProGPO's novelty; rows without a key carry K·T."""
    batch, _ = build_batch(columns_from_groups(groups), **BUCKETS)
    K, T = batch.src.shape[1:]
    for g, group in enumerate(groups):
        rows = {"state_action": ([], []), "history2": ([], []), "history3": ([], [])}
        for k, traj in enumerate(group.trajectories):
            states = [step.state for step in traj.steps]
            wanted_novelty = reference_family.novelty(traj)
            for t, step in enumerate(traj.steps):
                keys = {
                    "state_action": (step.state, step.action if step.valid else "<invalid>"),
                    "history2": tuple(states[t - 1 : t + 1]) if t >= 1 else None,
                    "history3": tuple(states[t - 2 : t + 1]) if t >= 2 else None,
                }
                for name, key in keys.items():
                    value = int(getattr(batch, name)[g, k, t])
                    if key is None:
                        assert value == K * T, (name, g, k, t)
                    else:
                        assert 0 <= value < K * T
                        rows[name][0].append(value)
                        rows[name][1].append(key)
                if not (traj.succeeded and t == len(traj.steps) - 1):  # there s_{t+1} is the sink: always new
                    assert bool(batch.first_visit[g, k, t]) == bool(wanted_novelty[t]), (g, k, t)
            padded = slice(len(traj.steps), None)
            assert all(np.all(getattr(batch, name)[g, k, padded] == K * T) for name in rows)
            assert not batch.first_visit[g, k, padded].any()
        for name, (ids, keys) in rows.items():
            assert _same_partition(ids, keys), (name, g)


@LEAN_SETTINGS
@given(values=st.lists(st.lists(st.integers(-50, 50), min_size=7, max_size=7), min_size=1, max_size=3), n=st.integers(1, 7))
def test_scan_steps_is_the_sequential_scan(values, n):
    x = np.asarray(values, np.int32)[:, :n]  # lengths 1..7: every doubling pattern up to 8
    assert np.asarray(scan_steps(jnp.asarray(x), jnp.add, 0)).tolist() == np.cumsum(x, axis=1).tolist()
    later_min = np.minimum.accumulate(x[:, ::-1], axis=1)[:, ::-1]
    assert np.asarray(scan_steps(jnp.asarray(x), jnp.minimum, 99, reverse=True)).tolist() == later_min.tolist()


# ------------------------------------------------------------------------------- family identities


@LEAN_SETTINGS
@given(groups=family_batches())
def test_hgpo_without_history_is_the_gigpo_step_term(groups):
    """H = 0 leaves the k = 1 anchor clusters: mean mode gives GiGPO's A^S times 2/(2 + ε)."""
    hgpo = make_credit_config("hgpo", "webshop", overrides={"hgpo_history": 0, "precision": "float64"})
    gigpo = make_credit_config("gigpo", "webshop", overrides={"precision": "float64"})
    batch, _ = build_batch(columns_from_groups(groups), **BUCKETS)
    step_term = np.asarray(estimator_terms(batch, gigpo)["adv_step"]) * 2.0 / (2.0 + gigpo.epsilon)
    np.testing.assert_allclose(np.asarray(estimate_advantages(batch, hgpo)), step_term, atol=1e-9)


@LEAN_SETTINGS
@given(groups=family_batches(), recipe=st.sampled_from(RECIPES))
def test_progpo_equals_gigpo_in_groups_with_a_success(groups, recipe):
    batch, layout = build_batch(columns_from_groups(groups), **BUCKETS)
    progpo = layout.unpad(estimate_advantages(batch, make_credit_config("progpo", recipe)))
    gigpo = layout.unpad(estimate_advantages(batch, make_credit_config("gigpo", recipe)))
    for group, a, b in zip(groups, progpo, gigpo):
        if any(traj.succeeded for traj in group.trajectories):
            assert a == b


@LEAN_SETTINGS
@given(groups=family_batches(), recipe=st.sampled_from(RECIPES))
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
    batch, _ = build_batch(columns_from_groups(distinct), **BUCKETS)
    np.testing.assert_allclose(estimate_advantages(batch, ecpo), estimate_advantages(batch, gigpo), atol=1e-9)

"""Every number of the family's test vectors (docs/credit-family.md) through the jitted jnp estimators
and the plain-Python reference, to 1e-4."""

from __future__ import annotations

import numpy as np
import pytest

from milegpo_jax.credit.testing import reference
from milegpo_jax.credit.batch import build_batch
from milegpo_jax.credit.columns import columns_from_groups
from milegpo_jax.credit.config import make_credit_config
from milegpo_jax.credit.estimators import advantages_and_ema, estimate_advantages, estimator_terms
from tests.credit.spec_vectors import EXAMPLES
from tests.credit.test_estimators_properties import BUCKETS  # the property tests' shapes: compiled once for both
from tests.credit.spec_vectors_family import (
    FAMILY_GROUPS,
    MVPO_EMA_05,
    MVPO_KAPPA,
    PROGPO_B,
    TABLES,
    TOLERANCE,
    columns_of,
)

CASES = [(name, column) for name in TABLES for column in columns_of(name)]


def _config(column: str):
    estimator, recipe = column.split("_")[:2]
    return make_credit_config(estimator, recipe), (0.5 if column.endswith("_ema05") else 0.0)


def _flat(nested) -> list[float]:
    return [float(v) for traj in nested for v in traj]


def _assert_rows(actual, expected, where):
    labels = TABLES[where[0]]["labels"]
    assert len(actual) == len(expected)
    for label, got, want in zip(labels, actual, expected, strict=True):
        assert got == pytest.approx(want, abs=TOLERANCE), f"Example {where[0]}, {where[1]}, row {label}"


@pytest.mark.parametrize(("name", "column"), CASES)
def test_reference(name, column):
    cfg, ema_prev = _config(column)
    actual = _flat(reference.compute_advantages([FAMILY_GROUPS[name]], cfg, ema_prev)[0])
    _assert_rows(actual, TABLES[name][column], (name, column))


@pytest.mark.parametrize("column", sorted({column for _, column in CASES}))
def test_jnp(column):
    """One padded batch of every example holding the column (MVPO: one-group batches, as the tables)."""
    cfg, ema_prev = _config(column)
    names = [name for name in TABLES if column in TABLES[name]]
    batches = [names] if cfg.estimator != "mvpo" else [[name] for name in names]
    for batch_names in batches:
        batch, layout = build_batch(columns_from_groups([FAMILY_GROUPS[name] for name in batch_names]), **BUCKETS)
        values = layout.unpad(estimate_advantages(batch, cfg, ema_prev))
        for g, name in enumerate(batch_names):
            _assert_rows(_flat(values[g]), TABLES[name][column], (name, column))


@pytest.mark.parametrize("recipe", ["alfworld", "webshop"])
def test_progpo_is_gigpo_with_a_success_and_novelty_gigpo_without(recipe):
    cfg = make_credit_config("progpo", recipe)
    gigpo = "gigpo_total_ms" if recipe == "alfworld" else "gigpo_total_mean"
    names = ["A", "B", "C"]
    batch, layout = build_batch(columns_from_groups([FAMILY_GROUPS[name] for name in names]), **BUCKETS)
    jnp_values = layout.unpad(estimate_advantages(batch, cfg))
    for g, name in enumerate(names):
        expected = PROGPO_B[recipe] if name == "B" else EXAMPLES[name]["columns"][gigpo]
        for actual in (_flat(jnp_values[g]), _flat(reference.compute_advantages([FAMILY_GROUPS[name]], cfg)[0])):
            assert actual == pytest.approx(expected, abs=TOLERANCE), f"Example {name}"


def test_example_d_intermediates():
    """Novelty n (ProGPO), MVPO's regions and potential differences δ."""
    batch, layout = build_batch(columns_from_groups([FAMILY_GROUPS["D"]]), **BUCKETS)
    table = TABLES["D"]
    novelty = _flat(layout.unpad(estimator_terms(batch, make_credit_config("progpo"))["novelty"])[0])
    assert novelty == table["novelty"]
    terms = estimator_terms(batch, make_credit_config("mvpo"))
    assert _flat(layout.unpad(terms["delta"])[0]) == pytest.approx(table["mvpo_delta"], abs=TOLERANCE)
    names = layout.node_names[0]
    regions = [names[int(r)] for r in np.concatenate([np.asarray(x, int) for x in layout.unpad(terms["region"])[0]])]
    # regions are labelled by their smallest node id; the table names them by their smallest state
    by_table = {}
    for ours, theirs in zip(regions, table["region"], strict=True):
        assert by_table.setdefault(ours, theirs) == theirs
    assert len(set(by_table.values())) == len(by_table)


@pytest.mark.parametrize("name", list(MVPO_KAPPA))
def test_mvpo_kappa_and_ema(name):
    batch, _ = build_batch(columns_from_groups([FAMILY_GROUPS[name]]), **BUCKETS)
    cfg = make_credit_config("mvpo")
    terms = estimator_terms(batch, cfg)
    assert float(terms["kappa"]) == pytest.approx(MVPO_KAPPA[name], abs=1e-6)
    if name == "D":
        _, ema_new = advantages_and_ema(batch, cfg, 0.5)
        assert float(ema_new) == pytest.approx(MVPO_EMA_05["ema_new"], abs=1e-6)
        assert float(estimator_terms(batch, cfg, 0.5)["kappa"]) == pytest.approx(MVPO_EMA_05["kappa"], abs=1e-6)

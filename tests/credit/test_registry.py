"""The estimator registry (docs/credit-implementation.md §4): every table derives from one EstimatorSpec per
estimator."""

from __future__ import annotations

import dataclasses

import pytest

from milegpo_jax.credit import registry
from milegpo_jax.credit.config import CreditConfig, CreditConfigError, make_credit_config


def test_every_option_belongs_to_the_shared_ones_or_an_estimator():
    fields = {field.name for field in dataclasses.fields(CreditConfig)} - {"estimator"}
    owned = set(registry.SHARED_OPTIONS) | {option for spec in registry.SPECS for option in spec.options}
    assert owned == fields


@pytest.mark.parametrize("spec", registry.SPECS, ids=lambda spec: spec.name)
def test_spec_resolves_and_configures(spec):
    assert callable(registry.load(spec.program)) and callable(registry.load(spec.reference))
    for recipe, defaults in spec.recipes.items():
        cfg = make_credit_config(spec.name, recipe)
        assert all(getattr(cfg, name) == value for name, value in defaults.items())
    for stage in spec.stages:
        assert make_credit_config(spec.name, stage=stage).stage == stage
    if not spec.stages:
        with pytest.raises(CreditConfigError, match="--stage applies to milegpo only"):
            make_credit_config(spec.name, stage="md")


def test_structure_follows_what_the_program_reads():
    assert registry.reading("edges") == ("milegpo",)
    assert registry.reading("hops") == ("graphgpo", "milegpo")
    assert registry.reading("regions") == ("mvpo",)
    assert registry.reading("clusters") == ("hgpo", "ecpo", "progpo")
    assert registry.reading("milestones") == ("beacon",)
    assert registry.host_parts("mvpo") == {"regions"} and registry.host_parts("grpo") == frozenset()
    assert [spec.name for spec in registry.SPECS if spec.level == "batch"] == ["mvpo"]
    assert registry.variants(registry.spec_of("milegpo")) == ("md", "rcs", "full")
    assert registry.variants(registry.spec_of("grpo")) == (None,)


def test_a_bad_spec_is_refused():
    spec = registry.spec_of("grpo")
    with pytest.raises(ValueError, match="batch-level"):
        dataclasses.replace(spec, level="batch")
    with pytest.raises(ValueError, match="recipes"):
        dataclasses.replace(spec, recipes={"alfworld": {}})


def test_each_option_has_one_check_written_with_its_estimator(monkeypatch):
    """docs/credit-implementation.md §4: CreditConfig runs every option's check whatever the estimator, with the
    messages the checks always gave; an option several estimators read has one check."""
    assert set(registry.OPTION_RULES) == {field.name for field in dataclasses.fields(CreditConfig)} - {"estimator"}
    assert registry.OPTION_RULES["gamma"] is registry.UNIT  # GiGPO's, HGPO's, ECPO's, ProGPO's and MVPO's
    for estimator, bad, message in (
        ("grpo", {"hgpo_history": 9}, "hgpo_history=9: must lie in 0..8"),
        ("milegpo", {"gamma": 0.0}, r"gamma=0.0: must lie in \(0, 1\]"),
        ("gigpo", {"progpo_base": "none"}, "progpo_base='none': must be one of gigpo, grpo"),
        ("mvpo", {"min_trap_visits": 0}, "min_trap_visits=0: must be >= 1"),
        ("mvpo", {"epsilon": -1}, r"epsilon=-1.0: must be >= 0"),
    ):
        with pytest.raises(CreditConfigError, match=message):
            make_credit_config(estimator, overrides=bad)
    clash = dataclasses.replace(registry.spec_of("gigpo"), name="clash", options={"gamma": registry.POSITIVE})
    monkeypatch.setattr(registry, "SPECS", (*registry.SPECS, clash))
    with pytest.raises(ValueError, match="estimator clash: option gamma has one check"):
        registry._option_rules()

"""The adapter registry: lazy imports, clear errors for unknown envs, missing packages and bad options."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
from pathlib import Path

import pytest

from envs_bridge import registry, specs
from envs_bridge.base import EnvAdapter, EnvError
from envs_bridge.groups import GroupPlan, repeated_state_share


def test_textworld_express_is_registered_and_importable():
    assert "textworld_express" in registry.env_names()
    assert issubclass(registry.adapter_class("textworld_express"), EnvAdapter)


def test_unknown_env_names_the_registered_ones():
    with pytest.raises(EnvError, match="unknown environment 'nethack': registered are") as caught:
        registry.adapter_class("nethack")
    assert "textworld_express" in str(caught.value)


def test_missing_package_fails_only_that_env_with_an_install_hint(monkeypatch):
    fancy = dataclasses.replace(specs.SPECS["webshop"], name="fancy", adapter="envs_bridge.no_such_module:Fancy",
                                install_hint="pip install fancy-env==1.0")
    monkeypatch.setitem(specs.SPECS, "fancy", fancy)
    with pytest.raises(registry.EnvUnavailableError, match="pip install fancy-env==1.0"):
        registry.make_adapter("fancy")
    assert registry.adapter_class("textworld_express")  # the others still load


def _adapter_source(adapter_path: str) -> Path:
    """The source file of an adapter's ``"module:Class"``, found without importing the module."""
    package, _, leaf = adapter_path.partition(":")[0].rpartition(".")
    return Path(importlib.util.find_spec(package).submodule_search_locations[0]) / f"{leaf}.py"


def _init_options_from_source(adapter_path: str) -> tuple[str, ...]:
    """The adapter's __init__ keyword names, read from its source (ALFWorld imports only in its own venv)."""
    class_name = adapter_path.partition(":")[2]
    source = _adapter_source(adapter_path)
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            init = next(f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
            return tuple(a.arg for a in init.args.args[1:] + init.args.kwonlyargs)
    raise AssertionError(f"no class {class_name} in {source}")


@pytest.mark.parametrize("name", sorted(specs.SPECS))
def test_spec_adapter_options_are_the_adapters_keyword_arguments(name):
    spec = specs.SPECS[name]
    names = _init_options_from_source(spec.adapter)
    assert set(spec.adapter_options) == set(names) - {"max_steps"} and "max_steps" in names
    if name != "alfworld":  # importable here: the live signature agrees with the source
        assert tuple(inspect.signature(registry.adapter_class(name)).parameters) == names


@pytest.mark.parametrize("name", sorted(specs.SPECS))
def test_spec_milestone_flags_say_whether_the_adapter_reports_them(name):
    """BEACON's flags: the spec says so exactly when the adapter puts "milestone_achieved" in step info
    (read from the source: ALFWorld imports only in its own venv)."""
    tree = ast.parse(_adapter_source(specs.SPECS[name].adapter).read_text())
    reports = any(isinstance(node, ast.Constant) and node.value == "milestone_achieved" for node in ast.walk(tree))
    assert specs.SPECS[name].milestone_flags == reports


def test_bad_options_are_client_errors():
    with pytest.raises(EnvError, match="unexpected keyword argument 'colour'"):
        registry.make_adapter("textworld_express", colour="red")


def test_group_plan_layout_and_sampling():
    plan = GroupPlan("train", task_ids=(7, 3), seeds=(100, 101), group_size=3)
    assert plan.num_envs == 6
    assert plan.env_task_ids() == [7, 7, 7, 3, 3, 3] and plan.env_seeds() == [100, 100, 100, 101, 101, 101]
    assert [plan.group_of(index) for index in range(6)] == [0, 0, 0, 1, 1, 1]
    sampled = GroupPlan.sample("eval_id", num_tasks=10, num_groups=4, group_size=2, seed=5)
    assert len(set(sampled.task_ids)) == 4 and sampled.seeds == (5, 6, 7, 8)
    assert sampled == GroupPlan.sample("eval_id", num_tasks=10, num_groups=4, group_size=2, seed=5)
    with pytest.raises(EnvError, match="unknown split"):
        GroupPlan("valid", task_ids=(1,), seeds=(0,), group_size=2)
    with pytest.raises(ValueError, match="one seed per task"):
        GroupPlan("train", task_ids=(1, 2), seeds=(0,), group_size=2)


def test_repeated_state_share_counts_steps_in_states_shared_across_rollouts():
    # Group 0: "s0" is visited by both rollouts (3 steps), "a" and "b" by one each; group 1 has one rollout.
    groups = [[["s0", "a", "s0"], ["s0", "b"]], [["s0", "s0"]]]
    assert repeated_state_share(groups) == pytest.approx(3 / 7)
    assert repeated_state_share([]) == 0.0

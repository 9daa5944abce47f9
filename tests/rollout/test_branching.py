"""The branching config (env.branching) and the tree bookkeeping of milegpo_jax/rollout/branching.py:
off by default with every shipped hash unchanged, bad input named in one line (exit 2 for the trainer),
trees refused for an estimator the registry keeps off them, and the leaf counts and paths of a
hand-made tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from milegpo_jax.config import ConfigError, config_hash, load_config
from milegpo_jax.config import schema
from milegpo_jax.credit import registry
from milegpo_jax.rollout.branching import GroupTree, TreeShape, leaf_path, leaves_through_steps
from milegpo_jax.rollout.tree_shape import FORK_RULES

REPO = Path(__file__).resolve().parents[2]


def test_off_by_default_and_hashed_only_when_set():
    default = load_config({})
    assert not default.env.branching.enabled and TreeShape.from_config(default.env.branching, 8) is None
    assert config_hash(load_config({"env": {"branching": {"roots": 0, "branches": 1}}})) == config_hash(default)
    tree = load_config({"env": {"branching": {"roots": 2, "branches": 3, "fork_at": "first_visit"}}})
    assert config_hash(tree) != config_hash(default)
    assert TreeShape.from_config(tree.env.branching, 8) == TreeShape(2, 3, "first_visit", 8)


@pytest.mark.parametrize(
    ("branching", "message"),
    [
        ({"branches": 0}, "env.branching.branches=0: must be >= 1"),
        ({"roots": -1}, "env.branching.roots=-1: must be >= 0"),
        ({"roots": 8}, "env.branching.roots=8: must be < leaves=8 (K, the group size: env.group_size, --group-size)"),
        ({"roots": 2, "branches": 0}, "env.branching.branches=0: must be >= 1"),
        ({"roots": 2, "fork_at": "first"}, "env.branching.fork_at='first': must be one of uniform, first_visit; did you mean 'first_visit'?"),
        ({"fork_at": "entropy"}, "env.branching.fork_at='entropy': must be one of uniform, first_visit"),
    ],
)
def test_bad_branching_names_the_field(branching, message):
    with pytest.raises(ConfigError) as error:
        load_config({"env": {"branching": branching}})
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_shape_checks_itself_and_its_rules_are_played():
    for fork_at in FORK_RULES:  # every rule the checks let through, GroupTree plays (uniform: depth 1 of 1..1)
        tree = GroupTree(TreeShape(roots=1, branches=1, fork_at=fork_at, leaves=2), max_steps=2, seed=0, group=0)
        assert tree.forks([(0, 1, "s1")]) == [(0, 1)] and tree.remaining == 0
    for args, message in [((0, 1, "uniform", 4), "roots=0: must be >= 1"),
                          ((4, 1, "uniform", 4), "roots=4: must be < leaves=4 (K, the group size: env.group_size, --group-size): a budget of K leaves"),
                          ((1, 0, "uniform", 4), "branches=0: must be >= 1"),
                          ((1, 1, "entropy", 4), "fork_at='entropy': must be one of uniform, first_visit")]:
        with pytest.raises(ValueError) as error:
            TreeShape(*args)
        assert str(error.value).startswith(message)


def test_the_trainer_refuses_in_one_line_with_exit_2(tmp_path):
    override = "branches=0"
    completed = subprocess.run(
        [sys.executable, "-m", "experiments.train", "--config", "experiments/configs/demo.py",
         "--workdir", str(tmp_path), f"--config.env.branching.{override}"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    assert completed.returncode == 2
    assert len(completed.stderr.strip().splitlines()) == 1 and f"env.branching.{override}" in completed.stderr


def test_trees_need_an_estimator_defined_on_them(monkeypatch):
    config = load_config({"env": {"branching": {"roots": 2}}, "model": {"preset": "qwen2.5-0.5b"}})
    config.check_runnable()  # every registered estimator is defined on trees (docs/credit-implementation.md §5)
    estimator = config.credit.estimator
    monkeypatch.setattr(schema, "ON_TREES", tuple(name for name in registry.on_trees() if name != estimator))
    with pytest.raises(ConfigError) as error:
        config.check_runnable()
    message = str(error.value)
    assert f"credit.estimator={estimator!r} is not defined on tree groups" in message and "\n" not in message
    assert message.startswith("env.branching.roots=2")


def test_leaf_counts_and_paths_of_a_hand_made_tree():
    # leaf 0: root, 4 steps; leaf 1 forks 0 after 2 steps (4 steps in all); leaf 2 forks 1 after 3
    parents, fork_steps, lengths = [None, 0, 1], [0, 2, 3], [4, 4, 5]
    trajectory = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    t = np.array([0, 1, 2, 3, 2, 3, 3, 4])
    assert leaves_through_steps(trajectory, t, parents, fork_steps).tolist() == [3, 3, 1, 1, 2, 1, 1, 1]
    assert leaf_path(2, parents, fork_steps, lengths[2]) == [(0, 0, 2), (1, 2, 3), (2, 3, 5)]
    assert leaf_path(0, parents, fork_steps, lengths[0]) == [(0, 0, 4)]


def test_uniform_fork_points_spend_the_leaf_budget_once():
    tree = GroupTree(TreeShape(roots=1, branches=2, fork_at="uniform", leaves=6), max_steps=5, seed=0, group=0)
    made = []
    for steps in range(5):
        made += tree.forks([(0, steps, f"s{steps}")])
    assert sum(count for _, count in made) + tree.remaining == 5 and all(count <= 2 for _, count in made)
    remaining = tree.remaining
    assert tree.refill() == list(range(6 - remaining, 6)) and tree.remaining == 0

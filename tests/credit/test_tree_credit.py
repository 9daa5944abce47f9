"""Credit over tree groups (docs/credit-implementation.md §5): for every estimator the registry puts on trees, the
trainer's road (``RolloutBatch.tree_training_steps`` + ``compute_credit(step_of=...)``) equals the
plain-Python reference (``credit/testing/reference_trees.py``) on hand-made and seeded trees, aborted
leaves included; each recorded step is trained on once; a batch without forks takes the linear road."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from milegpo_jax.credit import registry
from milegpo_jax.credit.api import compute_credit
from milegpo_jax.credit.config import make_credit_config
from milegpo_jax.credit.rollouts import Step
from milegpo_jax.credit.testing.reference_trees import Branch, leaf_paths, random_tree, tree_advantages
from milegpo_jax.credit.trees import mean_per_step
from milegpo_jax.rollout.collector import EpisodeSummary, PolicyResponse, RolloutBatch, StepRow


def _step(state, action, next_state, reward=0.0, valid=True, milestone=False):
    return Step(state, action, next_state, reward, valid, milestone)


# leaf 0: 4 steps, fails; leaf 1 forks it after 2 steps and wins; leaf 2 forks leaf 1 after 3 steps
# and fails; leaf 3 forks leaf 0 after 1 step and revisits a state of leaf 0 (a same-state sibling)
HAND_MADE = (
    Branch(None, 0, (_step("a", "go", "b"), _step("b", "go", "c", milestone=True), _step("c", "look", "c"),
                     _step("c", "go", "d"))),
    Branch(0, 2, (_step("c", "take", "e", milestone=True), _step("e", "go", "f", 10.0))),
    Branch(1, 3, (_step("e", "look", "e", valid=False),)),
    Branch(0, 1, (_step("b", "look", "b"), _step("b", "go", "c"), _step("c", "go", "f", 10.0))),
)


def _batch(trees, aborted=frozenset()) -> RolloutBatch:
    """The trees recorded as the collector records them (each step once, under the leaf that took it),
    every response naming its (group, leaf, t)."""
    rows, episodes = [], []
    for g, tree in enumerate(trees):
        for k, (branch, path) in enumerate(zip(tree, leaf_paths(tree))):
            for i, step in enumerate(branch.steps):
                t = branch.fork_step + i
                rows.append(StepRow(g, k, t, PolicyResponse((g, k, t), (1,), (0.0,), ""), step.state, step.action,
                                    step.next_state, step.reward, step.valid, step.milestone))
            won = sum(s.reward for _, _, s in path) > 0
            episodes.append(EpisodeSummary(g, k, won, len(path), (g, k) in aborted, 0.0, None, branch.parent,
                                           branch.fork_step))
    random.Random(0).shuffle(rows)  # the recording order must not matter
    return RolloutBatch.from_rows(rows, episodes)


def _trees():
    rng = random.Random(7)
    return [HAND_MADE, *(random_tree(rng, leaves) for leaves in (4, 4, 3))]


@pytest.mark.parametrize("estimator", registry.on_trees())
def test_tree_credit_equals_the_reference(estimator):
    trees, aborted = _trees(), frozenset({(2, 1)})
    cfg = make_credit_config(estimator, overrides={"precision": "float64"})
    for dropped in (frozenset(), aborted):
        batch = _batch(trees, dropped)
        columns, responses, step_of = batch.tree_training_steps()
        credit = compute_credit(columns, cfg, with_diagnostics=False, ema_prev=0.25, step_of=step_of)
        want, ema = tree_advantages(trees, cfg, 0.25, dropped)
        keys = [r.prompt_ids for r in responses]
        assert sorted(keys) == sorted((g, k, t) for g, steps in enumerate(want) for k, t in steps)  # each once
        got = dict(zip(keys, credit.step_advantages.tolist()))
        for (g, k, t), value in got.items():
            assert value == pytest.approx(want[g][(k, t)], abs=1e-7, rel=1e-7), (estimator, dropped, g, k, t)
        assert credit.ema == pytest.approx(ema, abs=1e-12)
        assert len(credit.step_advantages) == len(responses) == int(batch.metrics()["steps"])


def test_a_shared_step_takes_the_mean_of_its_leaves():
    # two leaves share their first step, one wins: GRPO's +a and -a meet there as 0
    tree = (Branch(None, 0, (_step("a", "go", "b"), _step("b", "go", "c"))),
            Branch(0, 1, (_step("b", "take", "d", 10.0),)))
    columns, responses, step_of = _batch([tree]).tree_training_steps()
    credit = compute_credit(columns, make_credit_config("grpo"), with_diagnostics=False, step_of=step_of)
    got = dict(zip([r.prompt_ids for r in responses], credit.step_advantages.tolist()))
    assert [r.prompt_ids for r in responses] == [(0, 0, 0), (0, 0, 1), (0, 1, 1)]  # first appearance, leaf 0 first
    assert got[(0, 0, 0)] == 0.0 and got[(0, 1, 1)] == -got[(0, 0, 1)] > 0
    assert mean_per_step(np.array([1.0, 3.0, 0.1]), np.array([0, 0, 1])).tolist() == [2.0, 0.1]


def test_a_batch_without_forks_takes_the_linear_road():
    roots = tuple(Branch(None, 0, branch.steps) for branch in HAND_MADE)
    batch = _batch([roots])
    columns, responses, step_of = batch.tree_training_steps()
    linear_columns, linear_responses = batch.training_steps()
    assert step_of is None and responses == linear_responses and not batch.has_trees()
    for field in ("state", "next_state", "action", "reward", "valid", "milestone", "lengths", "group_sizes"):
        np.testing.assert_array_equal(getattr(columns, field), getattr(linear_columns, field))


def test_an_estimator_off_trees_is_refused(monkeypatch):
    monkeypatch.setitem(registry._BY_NAME, "grpo", dataclasses.replace(registry.spec_of("grpo"), trees=False))
    columns, _, step_of = _batch([HAND_MADE]).tree_training_steps()
    with pytest.raises(ValueError, match="grpo is not defined on tree groups"):
        compute_credit(columns, make_credit_config("grpo"), with_diagnostics=False, step_of=step_of)

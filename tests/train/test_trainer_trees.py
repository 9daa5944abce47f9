"""One training iteration on tree groups (env.branching, docs/credit-implementation.md §5) with a tiny policy on
TextWorldExpress: the rollout forks, credit reads the leaves, and the update trains on every recorded
step once (shared steps included) with a finite loss."""

from __future__ import annotations

import numpy as np

from experiments.train import build_config
from milegpo_jax.train.trainer import Trainer
from tests.train.tiny_configs import SHORT_EPISODES, TINY_MODEL

TREES = [*TINY_MODEL, *SHORT_EPISODES, "env.history_length=0", "sft.episodes=0", "sampling.max_new_tokens=8",
         "ppo.minibatch_rows=8", "ppo.microbatch_rows=4", "env.branching.roots=1", "env.groups_per_iteration=1"]


def test_one_iteration_on_tree_groups(tmp_path):
    trainer = Trainer(build_config("experiments/configs/demo.py", TREES), tmp_path)
    batches = []
    play = trainer.rollout
    trainer.rollout = lambda *args, **kwargs: batches.append(play(*args, **kwargs)) or batches[-1]
    try:
        metrics = trainer.iteration(1)
    finally:
        trainer.pool.close()
        trainer.checkpointer.close()
    (batch,) = batches
    assert batch.has_trees()
    leaves_per_step = batch.leaves_per_step()
    assert leaves_per_step.max() >= 2  # a fork shares its parent's first step(s)
    assert metrics["rollout/steps"] == len(batch.steps)  # every recorded step trained on once
    assert np.isfinite(metrics["actor/loss"]) and np.isfinite(metrics["advantage/abs_max"])

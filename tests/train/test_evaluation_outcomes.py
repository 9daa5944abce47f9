"""Per-task outcome strings of an evaluation (milegpo_jax/train/evaluation.py)."""

import pytest

from milegpo_jax.rollout.collector import EpisodeSummary
from milegpo_jax.train.evaluation import outcome_key, outcome_string, parse_outcomes


def _episode(task, won=False, aborted=False):
    return EpisodeSummary(group=task, trajectory=0, won=won, steps=3, aborted=aborted, score=float(won))


def test_one_character_per_task_in_task_order():
    # episodes arrive in any order (passes, hosts); the string follows the task list
    episodes = [_episode(2, won=True), _episode(0), _episode(3, aborted=True), _episode(1, won=True)]
    text = outcome_string(episodes, 4)
    assert text == "011x"
    assert parse_outcomes(text) == [False, True, True, None]


def test_a_batch_that_is_not_one_episode_per_task_is_refused():
    with pytest.raises(ValueError):
        outcome_string([_episode(0), _episode(0)], 2)
    with pytest.raises(ValueError):
        parse_outcomes("01?")


def test_keys():
    assert outcome_key("eval_id", 123) == "outcomes/eval_id/seed123"
    assert outcome_key("eval_ood", 7, greedy=True) == "outcomes/greedy/eval_ood/seed7"

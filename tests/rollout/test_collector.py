"""The lockstep collector against the real TextWorldExpress engine (a scripted policy), and the
batch merges the trainer uses for multi-host rollouts and multi-pass evaluation."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest

from envs_bridge.client import EnvPool
from envs_bridge.groups import GroupPlan
from milegpo_jax.credit.batch import build_batch
from milegpo_jax.credit.columns import columns_from_groups
from milegpo_jax.credit.rollouts import Group, Step, Trajectory
from milegpo_jax.rollout.collector import (
    EpisodeSummary,
    PolicyResponse,
    RolloutBatch,
    StepRow,
    collect,
    merge_host_batches,
    merge_passes,
)

GAME = {"game": "coin", "game_params": "numLocations=3,numDistractorItems=1,includeDoors=0"}


class TakeTheCoin:
    """Always answers ``take coin`` (wins at once when the coin lies in the first room), and records
    every call so the test can check the lockstep batching."""

    def __init__(self):
        self.calls: list[int] = []

    def generate(self, prompts: Sequence[str], *, temperature: float, seed: int) -> list[PolicyResponse]:
        self.calls.append(len(prompts))
        return [PolicyResponse((1, 2), (3, 4), (-0.5, -0.25), "<think>coin</think><action>take coin</action>") for _ in prompts]


@pytest.fixture(scope="module")
def played():
    plan = GroupPlan("train", task_ids=(0, 1, 2, 3), seeds=(10, 11, 12, 13), group_size=2)
    policy = TakeTheCoin()
    with EnvPool("textworld_express", plan.num_envs, num_servers=1, env_options=GAME) as pool:
        batch = collect(pool, policy, plan, env="textworld_express", max_steps=3, history_length=1,
                        temperature=1.0, seed=0, reward_scale=10.0)
    return plan, policy, batch


def test_every_env_plays_to_its_end_in_lockstep(played):
    plan, policy, batch = played
    assert len(batch.episodes) == plan.num_envs and not any(e.aborted for e in batch.episodes)
    assert {e.won for e in batch.episodes} == {True, False}  # these tasks have the coin near and far
    assert policy.calls[0] == plan.num_envs  # one batched call per turn, every active env in it
    assert policy.calls == sorted(policy.calls, reverse=True) and len(policy.calls) <= 3
    for episode in batch.episodes:
        rows = sorted((r for r in batch.rows if (r.group, r.trajectory) == (episode.group, episode.trajectory)), key=lambda r: r.t)
        assert [r.t for r in rows] == list(range(episode.steps))
        assert episode.steps == (1 if episode.won else 3)  # a win ends the episode; else the 3-step cap
        for before, after in itertools.pairwise(rows):
            assert after.state == before.next_state
        assert all(r.action == "take coin" and r.valid for r in rows)
        assert rows[-1].reward == (10.0 if episode.won else 0.0)
        assert episode.task_type is None  # TextWorldExpress reports no task types
    for group in range(plan.num_groups):  # the K rollouts of a group play the same task
        first_states = {r.state for r in batch.rows if r.group == group and r.t == 0}
        assert len(first_states) == 1
    assert batch.success_by_task_type() == {}


def test_training_steps_build_the_batch_of_the_rows_with_their_responses(played):
    _, _, batch = played
    ordered = sorted(batch.rows, key=lambda r: (r.group, r.trajectory, r.t))  # what credit and the update read
    groups = [
        Group(tuple(
            Trajectory(tuple(Step(r.state, r.action, r.next_state, r.reward, r.valid, r.milestone)
                             for r in ordered if (r.group, r.trajectory) == (g, k)))
            for k in sorted({r.trajectory for r in ordered if r.group == g})
        ))
        for g in sorted({r.group for r in ordered})
    ]
    columns, responses = batch.training_steps()
    assert responses == [r.response for r in ordered]
    from_groups, layout = build_batch(columns_from_groups(groups))
    from_columns, layout_too = build_batch(columns)
    assert layout_too == layout
    for field, array in from_groups._asdict().items():
        np.testing.assert_array_equal(getattr(from_columns, field), array, err_msg=field)


def _batch(groups: int, won: Sequence[bool], task_types: Sequence[str | None] | None = None) -> RolloutBatch:
    generation = PolicyResponse((1,), (2,), (0.0,), "")
    types = task_types or [None] * groups
    rows = tuple(StepRow(g, 0, 0, generation, f"s{g}", "a", f"n{g}", 10.0 * won[g], True) for g in range(groups))
    episodes = tuple(EpisodeSummary(g, 0, won[g], 1, False, float(won[g]), types[g]) for g in range(groups))
    return RolloutBatch.from_rows(rows, episodes)


def test_host_batches_go_back_to_their_place_in_the_plan():
    # 2 hosts, plan groups 0..3: host 0 played plan groups 0 and 2, host 1 played 1 and 3
    host0, host1 = _batch(2, [True, False]), _batch(2, [False, True])
    merged = merge_host_batches([host0, host1])
    assert sorted(e.group for e in merged.episodes) == [0, 1, 2, 3]
    won = {e.group: e.won for e in merged.episodes}
    assert won == {0: True, 2: False, 1: False, 3: True}
    assert {r.group: r.state for r in merged.rows} == {0: "s0", 2: "s1", 1: "s0", 3: "s1"}
    assert merged.metrics()["episodes"] == 4 and merged.metrics()["success_rate"] == 0.5


def test_passes_are_numbered_on_and_task_types_are_scored():
    first = _batch(2, [True, False], ["pick", "heat"])
    second = _batch(3, [True, True, False], ["pick", "heat", "heat"])
    merged = merge_passes([first, second])
    assert sorted(e.group for e in merged.episodes) == [0, 1, 2, 3, 4]
    assert merged.success_by_task_type() == {"heat": 1 / 3, "pick": 1.0}
    assert merged.metrics()["success_rate"] == 3 / 5

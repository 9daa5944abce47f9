"""The collector's recording (state keys and actions interned per group as each step is recorded) and
the credit columns it yields: the same padded batch as the ``Group`` records of the same steps, the
responses aligned with the columns, for a batch in lockstep order, with aborted episodes, and merged
from several hosts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from milegpo_jax.credit.batch import build_batch
from milegpo_jax.credit.columns import columns_from_groups
from milegpo_jax.credit.rollouts import Group
from milegpo_jax.credit.testing.synthetic import alfworld_like_rollouts
from milegpo_jax.rollout.collector import EpisodeSummary, PolicyResponse, RolloutBatch, StepRow, merge_host_batches
from milegpo_jax.rollout.lockstep import PLACEHOLDER_RESPONSE, lockstep_rows


def _response_of(group: int, trajectory: int, t: int) -> PolicyResponse:
    return PolicyResponse((group, trajectory, t), (1,), (0.0,), f"{group}/{trajectory}/{t}")


def _lockstep(groups: list[Group], aborted: frozenset = frozenset()) -> RolloutBatch:
    """The steps of ``groups`` in the order the collector records them (turn by turn, env by env), each
    with a response that names its step."""
    rows, episodes = lockstep_rows(groups, aborted)
    rows = [dataclasses.replace(row, response=_response_of(row.group, row.trajectory, row.t)) for row in rows]
    return RolloutBatch.from_rows(rows, episodes)


def _assert_same_batch(columns, groups: list[Group]) -> None:
    got, got_layout = build_batch(columns)
    want, want_layout = build_batch(columns_from_groups(groups))
    assert got_layout == want_layout
    for field, array in want._asdict().items():
        np.testing.assert_array_equal(getattr(got, field), array, err_msg=field)


def _steps_in_order(groups: list[Group], kept=lambda g, k: True) -> list[tuple[int, int, int]]:
    """(group, trajectory, t) of every kept step, trajectory-major (the order credit uses)."""
    return [
        (g, k, t) for g, group in enumerate(groups) for k, traj in enumerate(group.trajectories) if kept(g, k)
        for t in range(len(traj.steps))
    ]


@pytest.fixture(scope="module")
def groups() -> list[Group]:
    return alfworld_like_rollouts(5, 4, 12, seed=3)


def test_lockstep_recording_builds_the_batch_of_the_groups_with_aligned_responses(groups):
    batch = _lockstep(groups)
    _assert_same_batch(batch.credit_columns(), groups)
    columns, responses = batch.training_steps()
    _assert_same_batch(columns, groups)
    assert [r.prompt_ids for r in responses] == _steps_in_order(groups)
    assert [row.t for row in batch.rows] == sorted(row.t for row in batch.rows)  # recording (lockstep) order
    assert [r.prompt_ids for r in batch.responses] == [(row.group, row.trajectory, row.t) for row in batch.rows]
    by_place = {(row.group, row.trajectory, row.t): row for row in batch.rows}
    for g, group in enumerate(groups):  # the rows give back every step's fields
        for k, traj in enumerate(group.trajectories):
            for t, step in enumerate(traj.steps):
                row = by_place[g, k, t]
                assert (row.state, row.action, row.next_state, row.reward, row.valid, row.milestone) == (
                    step.state, step.action, step.next_state, step.reward, step.valid, step.milestone)


def test_codes_are_per_group_and_do_not_depend_on_the_other_groups(groups):
    whole = _lockstep(groups).steps
    alone = _lockstep(groups[2:3]).steps  # group 2 played on its own, as group 0
    in_whole = whole.group == 2
    for field in ("state", "next_state", "action"):
        np.testing.assert_array_equal(getattr(whole, field)[in_whole], getattr(alone, field))
    assert whole.state_names[2] == alone.state_names[0]
    assert whole.state_names[2][whole.state[in_whole][0]] == groups[2].trajectories[0].steps[0].state


def test_aborted_episodes_are_left_out(groups):
    aborted = {(1, 0), (1, 2), (3, 3)}
    batch = _lockstep(groups, aborted=frozenset(aborted))
    kept = [
        Group(tuple(traj for k, traj in enumerate(group.trajectories) if (g, k) not in aborted))
        for g, group in enumerate(groups)
    ]
    columns, responses = batch.training_steps()
    _assert_same_batch(columns, kept)
    assert [r.prompt_ids for r in responses] == _steps_in_order(groups, lambda g, k: (g, k) not in aborted)
    assert columns.group_sizes.tolist() == [4, 2, 4, 3, 4]


def test_metrics_count_the_training_steps_from_the_recording(groups):
    batch = _lockstep(groups, aborted=frozenset({(1, 0), (3, 3)}))
    rows = [row for row in batch.rows if (row.group, row.trajectory) not in {(1, 0), (3, 3)}]
    metrics = batch.metrics()
    assert metrics["steps"] == len(rows) < len(batch.rows)
    assert metrics["invalid_action_rate"] == sum(not row.valid for row in rows) / len(rows) > 0


def test_a_group_with_every_episode_aborted_is_skipped(groups):
    batch = _lockstep(groups, aborted=frozenset((1, k) for k in range(4)))
    _assert_same_batch(batch.credit_columns(), [groups[0], *groups[2:]])


def test_host_recordings_merge_without_interning_again(groups):
    # 2 hosts: host h played plan groups h, h + 2, ... as its groups 0, 1, ...
    hosts = [_lockstep(groups[h::2]) for h in range(2)]
    merged = merge_host_batches(hosts)
    assert merged.steps.state_names[3] is hosts[1].steps.state_names[1]  # carried, not rebuilt
    _assert_same_batch(merged.credit_columns(), groups)
    columns, responses = merged.training_steps()
    # each response names its step as its host numbered it: plan group g was host g % 2's group g // 2
    assert [r.prompt_ids for r in responses] == [(g // 2, k, t) for g, k, t in _steps_in_order(groups)]
    again = RolloutBatch.from_rows(merged.rows, merged.episodes).steps  # interning the merged rows afresh
    order, again_order = merged.steps.training_order(), again.training_order()
    for field in ("group", "trajectory", "t", "state", "next_state", "action", "reward", "valid", "milestone"):
        np.testing.assert_array_equal(getattr(merged.steps, field)[order], getattr(again, field)[again_order])


def test_steps_must_be_numbered_from_zero_once_each():
    rows = [StepRow(0, 0, t, PLACEHOLDER_RESPONSE, f"s{t}", "a", f"s{t + 1}", 0.0, True) for t in (0, 2)]
    batch = RolloutBatch.from_rows(rows, (EpisodeSummary(0, 0, False, 2, False, 0.0),))
    message = r"group 0 trajectory 0 does not number its steps 0, 1, \.\.\. \(step 1 has t = 2\)"
    with pytest.raises(ValueError, match=message):
        batch.credit_columns()
    twice = RolloutBatch.from_rows((rows[0], rows[0]), (EpisodeSummary(0, 0, False, 2, False, 0.0),))
    with pytest.raises(ValueError, match="does not number its steps"):
        twice.training_steps()


def test_a_recording_must_match_the_responses(groups):
    batch = _lockstep(groups)
    with pytest.raises(ValueError, match="responses for"):
        RolloutBatch(batch.steps, batch.responses[1:], batch.episodes)

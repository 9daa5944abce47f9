"""The collector's recording (state keys and actions interned per group as each row is recorded) and
the credit columns it yields: the same padded batch as the ``Group`` records of the same rows, for a
batch in lockstep order, with aborted episodes, and merged from several hosts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from milegpo_jax.credit.batch import build_batch
from milegpo_jax.credit.rollouts import Group, Trajectory
from milegpo_jax.credit.testing.synthetic import alfworld_like_rollouts
from milegpo_jax.rollout.collector import EpisodeSummary, RolloutBatch, StepRow, merge_host_batches, record_rows
from milegpo_jax.rollout.lockstep import PLACEHOLDER_RESPONSE, lockstep_rows


def _lockstep(groups: list[Group], aborted: frozenset = frozenset()) -> RolloutBatch:
    """The rows of ``groups`` in the order the collector appends them (turn by turn, env by env)."""
    return RolloutBatch(*lockstep_rows(groups, aborted))


def _assert_same_batch(columns, groups: list[Group]) -> None:
    got, got_layout = build_batch(columns)
    want, want_layout = build_batch(groups)
    assert got_layout == want_layout
    for field, array in want._asdict().items():
        np.testing.assert_array_equal(getattr(got, field), array, err_msg=field)


@pytest.fixture(scope="module")
def groups() -> list[Group]:
    return alfworld_like_rollouts(5, 4, 12, seed=3)


def test_lockstep_recording_builds_the_batch_of_the_groups(groups):
    batch = _lockstep(groups)
    columns, order = batch.credit_columns()
    _assert_same_batch(columns, groups)
    assert batch.credit_groups()[0] == groups
    aligned = batch.aligned_rows()
    assert batch.rows_in(order) == [row for episodes in aligned for steps in episodes for row in steps]
    assert [[[row.t for row in rows] for rows in episodes] for episodes in aligned] == [
        [list(range(len(traj.steps))) for traj in group.trajectories] for group in groups
    ]
    assert batch.training_rows() == [row for episodes in aligned for rows in episodes for row in rows]


def test_codes_are_per_group_and_do_not_depend_on_the_other_groups(groups):
    whole = _lockstep(groups).recorded
    alone = _lockstep(groups[2:3]).recorded  # group 2 played on its own, as group 0
    in_whole = whole.group == 2
    for field in ("state", "next_state", "action"):
        np.testing.assert_array_equal(getattr(whole, field)[in_whole], getattr(alone, field))
    assert whole.state_names[2] == alone.state_names[0]
    assert whole.state_names[2][whole.state[in_whole][0]] == groups[2].trajectories[0].steps[0].state


def test_aborted_episodes_are_left_out(groups):
    batch = _lockstep(groups, aborted=frozenset({(1, 0), (1, 2), (3, 3)}))
    kept = [
        Group(tuple(traj for k, traj in enumerate(group.trajectories) if (g, k) not in {(1, 0), (1, 2), (3, 3)}))
        for g, group in enumerate(groups)
    ]
    columns, _ = batch.credit_columns()
    _assert_same_batch(columns, kept)
    assert [len(episodes) for episodes in batch.aligned_rows()] == [4, 2, 4, 3, 4]


def test_metrics_count_the_training_rows_from_the_recording(groups):
    batch = _lockstep(groups, aborted=frozenset({(1, 0), (3, 3)}))
    rows = batch.training_rows()
    metrics = batch.metrics()
    assert metrics["steps"] == len(rows) < len(batch.rows)
    assert metrics["invalid_action_rate"] == sum(not row.valid for row in rows) / len(rows) > 0


def test_a_group_with_every_episode_aborted_is_skipped(groups):
    batch = _lockstep(groups, aborted=frozenset((1, k) for k in range(4)))
    _assert_same_batch(batch.credit_columns()[0], [groups[0], *groups[2:]])


def test_host_recordings_merge_without_interning_again(groups):
    # 2 hosts: host h played plan groups h, h + 2, ... as its groups 0, 1, ...
    hosts = [_lockstep(groups[h::2]) for h in range(2)]
    merged = merge_host_batches(hosts)
    assert merged.recorded.state_names[3] is hosts[1].recorded.state_names[1]  # carried, not rebuilt
    _assert_same_batch(merged.credit_columns()[0], groups)
    again = record_rows(merged.rows)  # what interning the merged rows afresh would give
    order, again_order = merged.recorded.training_order(), again.training_order()
    for field in ("group", "trajectory", "t", "state", "next_state", "action", "reward", "valid", "milestone"):
        np.testing.assert_array_equal(getattr(merged.recorded, field)[order], getattr(again, field)[again_order])


def test_steps_must_be_numbered_from_zero_once_each():
    rows = [StepRow(0, 0, t, PLACEHOLDER_RESPONSE, f"s{t}", "a", f"s{t + 1}", 0.0, True) for t in (0, 2)]
    batch = RolloutBatch(tuple(rows), (EpisodeSummary(0, 0, False, 2, False, 0.0),))
    message = r"group 0 trajectory 0 does not number its steps 0, 1, \.\.\. \(step 1 has t = 2\)"
    with pytest.raises(ValueError, match=message):
        batch.credit_columns()
    twice = RolloutBatch((rows[0], rows[0]), (EpisodeSummary(0, 0, False, 2, False, 0.0),))
    with pytest.raises(ValueError, match="does not number its steps"):
        twice.credit_columns()


def test_a_recording_must_match_the_rows(groups):
    batch = _lockstep(groups)
    with pytest.raises(ValueError, match="recorded steps for"):
        RolloutBatch(batch.rows[1:], batch.episodes, batch.recorded)
    assert dataclasses.replace(batch).recorded is batch.recorded

"""The synthetic ALFWorld-like rollouts have the shape the credit benchmark and the examples rely on."""

import json
from pathlib import Path

import pytest

from milegpo_jax.credit.testing import synthetic
from milegpo_jax.credit.rollouts import parse_rollouts, rollouts_to_json
from milegpo_jax.credit.testing.synthetic import PRESETS, alfworld_like_rollouts

EXAMPLE = Path(__file__).resolve().parents[2] / "experiments" / "data" / "example_rollouts.json"
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def bench_batches():
    return {seed: alfworld_like_rollouts(seed=seed) for seed in SEEDS}


def _distinct_states(group):
    # The goal's next_state stands for the success sink, so it is one node like every other key.
    return {key for traj in group.trajectories for step in traj.steps for key in (step.state, step.next_state)}


@pytest.mark.parametrize("seed", SEEDS)
def test_bench_batch_shape(bench_batches, seed):
    groups = bench_batches[seed]
    assert len(groups) == 16
    for group in groups:
        assert len(group.trajectories) == 8
        for traj in group.trajectories:
            rewards = [step.reward for step in traj.steps]
            if traj.succeeded:
                # Reaching the goal pays 10 on that step and ends the episode.
                assert rewards[-1] == synthetic.GOAL_REWARD
                assert all(r == 0.0 for r in rewards[:-1])
                assert len(traj.steps) <= 50
            else:
                # Every failure is cut at the step limit (trap regions have no way out).
                assert rewards == [0.0] * 50
            # Each step starts where the previous one ended.
            for before, after in zip(traj.steps, traj.steps[1:]):
                assert after.state == before.next_state


@pytest.mark.parametrize("seed", SEEDS)
def test_bench_batch_statistics(bench_batches, seed):
    groups = bench_batches[seed]
    distinct = [len(_distinct_states(group)) for group in groups]
    assert 60 <= sum(distinct) / len(distinct) <= 100, distinct
    outcomes = [traj.succeeded for group in groups for traj in group.trajectories]
    assert 0.25 <= sum(outcomes) / len(outcomes) <= 0.5
    # A realistic group mix: some groups have several successes, and successes take more than a few steps.
    assert max(sum(t.succeeded for t in g.trajectories) for g in groups) >= 3
    success_lengths = [len(t.steps) for g in groups for t in g.trajectories if t.succeeded]
    assert sum(success_lengths) / len(success_lengths) >= 8


@pytest.mark.parametrize("seed", SEEDS)
def test_groups_share_start_and_have_loops_and_invalid_steps(bench_batches, seed):
    groups = bench_batches[seed]
    for group in groups:
        starts = {traj.steps[0].state for traj in group.trajectories}
        assert len(starts) == 1
    steps = [step for group in groups for traj in group.trajectories for step in traj.steps]
    invalid = [step for step in steps if not step.valid]
    assert 0.02 <= len(invalid) / len(steps) <= 0.1
    # Invalid responses change nothing: a self-loop on the same state key.
    assert all(step.next_state == step.state and step.reward == 0.0 for step in invalid)
    # Well-formatted but inadmissible commands ("Nothing happens.") are valid self-loops.
    assert any(step.valid and step.next_state == step.state for step in steps)
    revisiting = [
        traj
        for group in groups
        for traj in group.trajectories
        if len({step.state for step in traj.steps}) < len(traj.steps)
    ]
    assert len(revisiting) >= len(groups)


def test_same_seed_same_rollouts_other_seed_other_rollouts():
    first = alfworld_like_rollouts(num_groups=4, seed=11)
    assert alfworld_like_rollouts(num_groups=4, seed=11) == first
    assert alfworld_like_rollouts(num_groups=4, seed=12) != first


def test_a_group_does_not_depend_on_how_many_groups_are_drawn():
    assert alfworld_like_rollouts(num_groups=3, seed=5) == alfworld_like_rollouts(num_groups=5, seed=5)[:3]


def test_state_keys_are_readable_and_task_scoped():
    group = alfworld_like_rollouts(num_groups=2, seed=0)[1]
    first = group.trajectories[0].steps[0]
    assert first.state.startswith("task1/")
    assert "/at:middle of room/holding:nothing/" in first.state


def test_rollouts_round_trip_through_json():
    groups = alfworld_like_rollouts(**PRESETS["small"])
    assert parse_rollouts(json.loads(json.dumps(rollouts_to_json(groups)))) == groups


def test_bundled_example_is_the_small_preset():
    expected = rollouts_to_json(alfworld_like_rollouts(**PRESETS["small"]))
    assert json.loads(EXAMPLE.read_text()) == expected, (
        "experiments/data/example_rollouts.json is stale; regenerate it with "
        "`python -m milegpo_jax.credit.testing.synthetic --out experiments/data/example_rollouts.json --preset small`"
    )


def test_small_preset_shows_every_kind_of_step():
    groups = alfworld_like_rollouts(**PRESETS["small"])
    assert (len(groups), len(groups[0].trajectories)) == (3, 4)
    trajectories = [traj for group in groups for traj in group.trajectories]
    assert all(len(traj.steps) <= 12 for traj in trajectories)
    assert any(traj.succeeded for traj in trajectories) and not all(traj.succeeded for traj in trajectories)
    assert any(not step.valid for traj in trajectories for step in traj.steps)


def test_command_line_writes_the_preset(tmp_path):
    out = tmp_path / "nested" / "rollouts.json"
    assert synthetic.main(["--out", str(out), "--preset", "small", "--seed", "3"]) == 0
    written = json.loads(out.read_text())
    assert written == rollouts_to_json(alfworld_like_rollouts(**{**PRESETS["small"], "seed": 3}))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_groups=0),
        dict(group_size=0),
        dict(max_steps=0),
        dict(num_states=synthetic.MIN_STATES - 1),
        dict(success_rate=(0.6, 0.4)),
        dict(success_rate=(-0.1, 0.5)),
        dict(invalid_rate=1.0),
    ],
)
def test_bad_arguments_are_rejected(kwargs):
    with pytest.raises(ValueError):
        alfworld_like_rollouts(**kwargs)


@pytest.mark.parametrize("num_states, max_steps", [(8, 5), (8, 50), (200, 50), (400, 30)])
def test_other_sizes_work(num_states, max_steps):
    groups = alfworld_like_rollouts(num_groups=2, group_size=4, max_steps=max_steps, num_states=num_states)
    for group in groups:
        assert len(_distinct_states(group)) <= num_states + 1
        assert all(1 <= len(traj.steps) <= max_steps for traj in group.trajectories)

"""The plain-Python reference reproduces every number of docs/credit.md §9 (to 1e-4)."""

from __future__ import annotations

import dataclasses

import pytest

from milegpo_jax.credit.testing import reference
from milegpo_jax.credit.rollouts import SUCCESS_STATE, Group, Trajectory
from tests.credit.spec_vectors import COLUMNS, EXAMPLES, MILEGPO_LINE_CONFIGS, TOLERANCE

COLUMN_CASES = [(example, column) for example in EXAMPLES for column in COLUMNS]
LINE_CASES = [(example, recipe) for example in EXAMPLES for recipe in MILEGPO_LINE_CONFIGS]


def flat_field(details: dict, field: str) -> list[float]:
    """One field of the per-step row dicts, in table order (trajectory-major, then time)."""
    return [row[field] for traj_rows in details["rows"] for row in traj_rows]


def assert_close_mapping(actual: dict, expected: dict, what: str) -> None:
    assert set(actual) == set(expected), f"{what}: keys {sorted(actual)} != {sorted(expected)}"
    for key, value in expected.items():
        assert actual[key] == pytest.approx(value, abs=TOLERANCE), f"{what}[{key!r}]"


@pytest.mark.parametrize(("example", "column"), COLUMN_CASES)
def test_table_column(example: str, column: str) -> None:
    spec = COLUMNS[column]
    details = reference.estimator_details(EXAMPLES[example]["group"], spec.config())
    actual = flat_field(details, spec.field)
    expected = EXAMPLES[example]["columns"][column]
    labels = EXAMPLES[example]["row_labels"]
    assert len(actual) == len(expected)
    for label, got, want in zip(labels, actual, expected):
        assert got == pytest.approx(want, abs=TOLERANCE), f"Example {example}, {spec.header}, row {label}"


@pytest.mark.parametrize(("example", "recipe"), LINE_CASES)
def test_candidate_trap_and_potential_lines(example: str, recipe: str) -> None:
    details = reference.milegpo_details(EXAMPLES[example]["group"], MILEGPO_LINE_CONFIGS[recipe].config())
    expected = EXAMPLES[example]["milegpo"][recipe]
    where = f"Example {example}, MileGPO {recipe}"
    assert set(details["candidates"]) == set(expected["candidates"]), f"{where}: candidate set"
    for state, stats in expected["candidates"].items():
        assert_close_mapping(details["candidates"][state], stats, f"{where}: candidate {state}")
    assert set(details["traps"]) == set(expected["traps"]), f"{where}: trap set"
    for state, stats in expected["traps"].items():
        assert_close_mapping(details["traps"][state], stats, f"{where}: trap {state}")
    assert_close_mapping(details["potential_pos"], expected["potential_pos"], f"{where}: Φ+")
    assert_close_mapping(details["potential_neg"], expected["potential_neg"], f"{where}: Φ−")


BATCH_COLUMNS = ["grpo", "gigpo_total_ms", "graphgpo_total_ms_gamma01", "milegpo_alfworld_advantage_full"]


@pytest.mark.parametrize("column", BATCH_COLUMNS)
def test_compute_advantages_batches_groups(column: str) -> None:
    """``compute_advantages`` returns the per-group, per-trajectory, per-step "advantage" field."""
    spec = COLUMNS[column]
    groups = [example["group"] for example in EXAMPLES.values()]
    batch = reference.compute_advantages(groups, spec.config())
    assert len(batch) == len(groups)
    for group_adv, example in zip(batch, EXAMPLES.values()):
        assert [len(traj) for traj in group_adv] == [len(traj.steps) for traj in example["group"].trajectories]
        flat = [a for traj in group_adv for a in traj]
        assert flat == pytest.approx(example["columns"][column], abs=TOLERANCE)


def test_success_sink_replaces_the_final_next_state() -> None:
    """The last next state of a successful trajectory is the sink whatever the input says (§1.1)."""
    group = EXAMPLES["A"]["group"]
    renamed = Group(
        tuple(
            Trajectory(
                tuple(
                    dataclasses.replace(step, next_state="room (done)") if step.next_state == SUCCESS_STATE else step
                    for step in traj.steps
                )
            )
            for traj in group.trajectories
        )
    )
    cfg = COLUMNS["milegpo_alfworld_advantage_full"].config()
    assert reference.milegpo_details(renamed, cfg) == reference.milegpo_details(group, cfg)

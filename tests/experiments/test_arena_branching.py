"""experiments.arena with tree groups (--branching) and an env-step budget (--env-steps) on the real
TextWorldExpress engine: the records carry the tree facts, a default run is the record the code before
them gave, bad branching input is one line naming the flag (docs/arena.md, "Tree groups")."""

import hashlib
import json

import pytest

from experiments.arena import budget, cli, summary

TINY = ["--game", "twc3", "--groups", "2", "--group-size", "4", "--iterations", "3", "--seeds", "1",
        "--contestants", "gigpo", "mvpo", "--jobs", "1", "--no-progress"]


def _records(work):
    return [json.loads(line) for line in (work / "results.jsonl").read_text().splitlines()]


def test_default_run_is_the_record_before_branching(tmp_path):
    # sha256 of each record without its seconds, from this command on main at 5e3779d (before --branching)
    assert cli.main([*TINY, "--work", str(tmp_path)]) == 0
    before = {"gigpo": "89a2b04ab48926f0a026518e53c74c9b0172605a42559ddb5957d88622ee15b4",
              "mvpo": "ca965c5da7ca6ef3b7bec87d856cf69c022861a6072a7ee18781d7325c39106e"}
    for record in _records(tmp_path):
        record.pop("time")
        assert hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest() == before[record["contestant"]]
    assert "branching" not in json.loads((tmp_path / "arena.json").read_text())["settings"]
    assert not (tmp_path / "branching.md").exists()


def test_tree_groups_record_forks_shared_steps_and_env_steps(tmp_path, capsys):
    work = tmp_path / "tree"
    assert cli.main([*TINY, "--branching", "2,1,uniform", "--env-steps", "400", "--work", str(work)]) == 0
    settings = json.loads((work / "arena.json").read_text())["settings"]
    assert settings["branching"] == [2, 1, "uniform"] and settings["env_steps"] == 400 and settings["max_env_steps"] == 50
    records = _records(work)
    assert [r["contestant"] for r in records] == ["gigpo", "mvpo"]
    for record in records:
        assert record["branching"] == {"roots": 2, "branches": 1, "fork_at": "uniform"}
        iterations = len(record["success"])
        assert sum(record["env_steps"]) >= 400 > sum(record["env_steps"][:-1])  # stops once the budget is spent
        assert record["forks"] == [4] * iterations  # 2 groups x (4 leaves - 2 roots) / 1 branch
        assert all(0 < shared < steps for shared, steps in zip(record["shared_steps"], record["env_steps"]))
        # a leaf is at most 50 steps from its root; a tree plays its shared steps once
        assert all(steps < 8 * 50 for steps in record["env_steps"])
        assert record["credit"]["shared_state_fraction"][0] > 0 and "tie_correction_rate" in record["credit"]
    # the same tree groups for both contestants (the rollouts depend on the seed, not on the credit, at iteration 1)
    assert records[0]["env_steps"][0] == records[1]["env_steps"][0]
    table = json.loads((work / "table.json").read_text())
    assert table["results"]["gigpo"]["summary"]["auc"]["mean"] == pytest.approx(
        sum(budget.over_env_steps(records[0]["success"], records[0]["env_steps"], 400, 3)) / 3)
    facts = json.loads((work / "branching.json").read_text())["facts"]
    assert facts["gigpo"]["forks_per_leaf"] == pytest.approx(0.5) and 0 < facts["gigpo"]["shared_step_share"] < 1
    assert "same-state sibling share" in (work / "branching.md").read_text()
    # summarize rebuilds every table from results.jsonl alone
    expected = (work / "branching.md").read_text(), (work / "table.json").read_text()
    for name in ("branching.md", "table.json"):
        (work / name).unlink()
    assert summary.main([str(work)]) == 0
    assert ((work / "branching.md").read_text(), (work / "table.json").read_text()) == expected
    capsys.readouterr()


def test_over_env_steps_is_the_area_per_env_step():
    # iterations of 10, 30 and 20 env steps with success 0, 1, 0.5; budget 40 in 4 cells of 10
    assert budget.over_env_steps([0, 1, 0.5], [10, 30, 20], 40, 4) == [0, 1, 1, 1]
    assert budget.over_env_steps([0, 1], [15, 30], 20, 2) == [0, 0.5]  # the second cell: 5 steps of each
    with pytest.raises(ValueError):
        budget.over_env_steps([0], [10], 20, 2)  # the run did not spend its budget


@pytest.mark.parametrize("value, named", [
    ("2,0,uniform", "branches=0: must be >= 1"), ("4,1,uniform", "roots=4: must be < leaves=4"),
    ("0,1,uniform", "roots=0: must be >= 1"), ("2,1,entropy", "fork_at='entropy': must be one of uniform, first_visit"),
    ("2,100000000,uniform", "branches=100000000: must be <="), ("2,1", "expected ROOTS"),
])
def test_bad_branching_is_one_line_and_nothing_written(tmp_path, capsys, value, named):
    work = tmp_path / "w"
    assert cli.main([*TINY, "--branching", value, "--work", str(work)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and error.startswith(f"experiments.arena: --branching {value!r}") and named in error
    assert not work.exists()


def test_study_refuses_bad_branching(tmp_path, capsys):
    from experiments.arena import study

    work = tmp_path / "s"
    argv = [*TINY[:8], "--contestants", "gigpo", "--jobs", "1", "--select-seeds", "0", "--eval-seeds", "1-2"]
    assert study.main([*argv, "--branching", "1,1,first", "--work", str(work)]) == 2
    assert "--branching '1,1,first'" in capsys.readouterr().err and not work.exists()
    assert study.main([*argv, "--env-steps", "0", "--work", str(work)]) == 2
    assert "--env-steps" in capsys.readouterr().err and not work.exists()


def test_committed_study_rebuilds_byte_for_byte(tmp_path):
    # docs/results/arena/twc3: records from before --branching; summarize must write exactly the committed files
    import shutil
    from pathlib import Path

    committed = Path(__file__).parents[2] / "docs" / "results" / "arena" / "twc3"
    shutil.copytree(committed, tmp_path / "twc3")
    assert summary.main([str(tmp_path / "twc3")]) == 0
    for path in committed.iterdir():
        assert (tmp_path / "twc3" / path.name).read_bytes() == path.read_bytes(), path.name
    assert not (tmp_path / "twc3" / "branching.md").exists()


def test_options_are_chosen_on_the_curves_over_env_steps_where_there_is_a_budget():
    # a study of an --env-steps arena chose on the curves as played while summarize read them over env
    # steps, so a contestant could be evaluated at an option summarize did not choose (twc3, mvpo, 2026-12-05);
    # both now read summary.as_scored. Option lr 1 wins late at a high env-step cost, lr 3 steadily.
    from experiments.arena import analysis, summary

    def record(lr, success, spent):
        return {"contestant": "grpo", "seed": 0, "lr": lr, "update": "pg", "success": success, "greedy": success,
                "env_steps": spent}

    records = [record(1.0, [0.0, 1.0], [900, 100]), record(3.0, [0.4, 0.4], [500, 500])]
    assert analysis.choose_options(records, ["grpo"], {0})[0]["grpo"] == (1.0, "pg")  # as played: AUC 0.5 > 0.4
    assert summary.as_scored(records, {"env_steps": None}) == records
    scored = summary.as_scored(records, {"env_steps": 1000, "iterations": 2})
    assert analysis.choose_options(scored, ["grpo"], {0})[0]["grpo"] == (3.0, "pg")  # over env steps: 0.1 < 0.4

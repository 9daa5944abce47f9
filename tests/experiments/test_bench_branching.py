"""experiments.bench.branching --smoke (issue 44 item 4): one group of four leaves on a tiny random
policy, played as independent rollouts and as a tree at the same leaf count; the tree's shared first
step is sampled and trained on once, so it costs fewer env steps, prefill and update positions per leaf."""

from __future__ import annotations

import pytest

from experiments.bench import branching
from experiments.bench.sampler_rollout import write_smoke_checkpoint
from tests.experiments.bench_helpers import run_bench


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_smoke_checkpoint(tmp_path_factory.mktemp("smoke"))


def test_a_tree_costs_less_per_leaf_than_independent_rollouts(checkpoint, capsys):
    figures, _ = run_bench(branching.main, ["--smoke", "--checkpoint", str(checkpoint)], capsys)
    independent, tree = figures["independent"], figures["tree"]
    assert figures["bench"] == "branching" and figures["budget"] == "leaves" and figures["rounds"] == 0
    assert figures["branching"] == {"roots": 1, "branches": 1, "fork_at": "uniform"}
    assert figures["leaves"] == independent["leaves"] == tree["leaves"] == 4  # the same budget
    assert independent["forks"] == independent["shared_steps"] == 0
    assert tree["forks"] == 3 and tree["shared_steps"] >= 1  # every leaf but the root is a fork
    # the tree plays its shared steps once, and every played step is one update row
    assert tree["env_steps"] < independent["env_steps"] and tree["leaf_steps"] <= independent["leaf_steps"]
    assert (tree["update_rows"], independent["update_rows"]) == (tree["env_steps"], independent["env_steps"])
    for arm in (independent, tree):
        assert arm["sampler_calls"] == 2 and arm["prefill_positions"] > 0  # one call per turn
        assert 0 < arm["update_tree_packed"] < arm["update_alone"] <= arm["update_alone_processed"]
        assert arm["update_alone"] == arm["update_row_positions"]  # alone, every row's positions once
        assert "rollout_s" not in arm  # no timed round
    per_leaf = figures["per_leaf"]
    for key in ("env_steps", "prompt_tokens", "prefill_positions", "update_alone", "update_tree_packed"):
        assert per_leaf["tree"][key] < per_leaf["independent"][key], key
        assert per_leaf["tree"][key] == round(tree[key] / 4, 2)
        assert figures["ratios"][key] == round(independent[key] / tree[key], 3) > 1
    assert figures["ratios"]["independent_alone_over_tree_packed"] > figures["ratios"]["update_tree_packed"]
    assert independent["prefill_positions"] < independent["prompt_tokens"]  # the group's first prompt once
    assert figures["counts_repeat"] is True


@pytest.mark.parametrize(("argv", "message"), [
    (["--roots", "4"], "--roots must be in 1..3"),
    (["--branches", "0"], "--branches must be >= 1"),
    (["--fork-at", "entropy"], "invalid choice: 'entropy'"),
])
def test_bad_branching_is_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        branching.main(["--smoke", *argv])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err

"""The benchmarks that play a recipe's rollout on a checkpoint: experiments.bench.sampler --checkpoint
(experiments/bench/sampler_rollout.py) and experiments.bench.lm_head, each --smoke run to its JSON line
on a tiny random policy, and a checkpoint without tokenizer files refused in one line, exit 2."""

from __future__ import annotations

import pytest

from experiments.bench import lm_head, sampler, sampler_rollout
from tests.experiments.bench_helpers import positive, refused, run_bench, torch_next_to_jax  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("torch_next_to_jax")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return sampler_rollout.write_smoke_checkpoint(tmp_path_factory.mktemp("smoke"))


def test_sampler_on_a_rollout(checkpoint, capsys):
    figures, _ = run_bench(sampler.main, ["--smoke", "--checkpoint", str(checkpoint)], capsys)
    assert figures["bench"] == "sampler_rollout" and (figures["groups"], figures["group_size"]) == (1, 2)
    assert figures["turns"] == 1 and figures["rows"] == 2 and figures["new_tokens_per_row"] == 8
    for key in ("shared_tokens_per_s", "full_prefill_tokens_per_s", "transformers_tokens_per_s",
                "speedup_vs_transformers", "speedup_of_prefix_sharing", "prefill_share", "prompt_tokens"):
        assert positive(figures[key]), (key, figures[key])
    # the two rollouts of the group share their first prompt: prefilled once with sharing
    assert figures["prefill_positions_first_turn"] < figures["prefill_positions_first_turn_without_sharing"]
    assert 0 < figures["prefill_work_cut_first_turn"] < 1 and figures["prefill_share"] <= 1
    assert 0 <= figures["greedy_rows_equal_to_transformers"] <= figures["rows"]
    assert isinstance(figures["greedy_shared_equal_to_full"], bool)
    assert all(len(times) == 1 for times in figures["rounds_s"].values())


def test_lm_head(checkpoint, capsys):
    figures, _ = run_bench(lm_head.main, ["--smoke", "--checkpoint", str(checkpoint)], capsys)
    assert figures["bench"] == "lm_head" and figures["rounds"] == 1 and figures["rows"] >= 2
    for key in ("speedup", "response_head_s", "every_position_s", "head_width", "capacity", "response_positions"):
        assert positive(figures[key]), (key, figures[key])
    assert figures["head_width"] <= figures["capacity"] and figures["response_positions"] <= figures["positions"]
    assert 0 <= figures["max_metric_gap"] < 1e-4 and 0 <= figures["max_param_gap"] < 1e-4  # the same update


def test_lm_head_smoke_without_a_checkpoint_writes_one(checkpoint, monkeypatch):
    """--smoke alone runs on a tiny policy written to a scratch directory (the fixture's writer), removed after."""
    scratch, ran_on = [], []
    monkeypatch.setattr(lm_head, "write_smoke_checkpoint", lambda directory: scratch.append(directory) or checkpoint)
    monkeypatch.setattr(lm_head, "run", lambda args: ran_on.append(args.checkpoint))
    lm_head.main(["--smoke"])
    assert ran_on == [str(checkpoint)] and not scratch[0].exists()


@pytest.mark.parametrize("bench", [lm_head, sampler], ids=["lm_head", "sampler"])
def test_a_checkpoint_without_tokenizer_files(bench, checkpoint, tmp_path, capsys):
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((checkpoint / name).read_bytes())
    err = refused(bench.main, ["--checkpoint", str(tmp_path)], capsys)
    assert err == f"error: {tmp_path}/tokenizer.json: missing (the directory holds no complete tokenizer)"
    err = refused(bench.main, ["--checkpoint", str(tmp_path / "nowhere")], capsys)
    assert err == f"error: --checkpoint {tmp_path / 'nowhere'}: no config.json there (a Hugging Face checkpoint)"


def test_tree_update(checkpoint, capsys, tmp_path):
    """The tree-packed update against the rows alone, on a rollout whose two rows share their prompt; the
    rows written with --save-rows read back with --rows, for one layout's peak memory (with --prefix-order)."""
    from experiments.bench import tree_update

    saved = tmp_path / "rows.npz"
    figures, _ = run_bench(tree_update.main, ["--smoke", "--checkpoint", str(checkpoint), "--save-rows", str(saved)], capsys)
    assert figures["bench"] == "tree_update" and figures["rounds"] == 1 and figures["rows"] >= 2
    for key in ("speedup", "speedup_trunk", "alone_s", "shared_s", "trunk_s", "position_cut", "layer_position_cut_trunk"):
        assert positive(figures[key]), (key, figures[key])
    assert figures["positions_shared"] < figures["positions_alone"]  # the group's first prompt is computed once
    # the smoke policy's first of two layers frozen (--trainable-layers 1 under --smoke): computed once
    assert figures["frozen_layers"] == 1 and 0 < figures["positions_trunk_pass"] <= figures["positions_shared"]
    assert figures["layer_position_cut_trunk"] >= figures["layer_position_cut"] > 1
    assert figures["positions_by_depth"]["0"] == figures["positions_alone"]
    assert 0 <= figures["max_metric_gap"] < 1e-4 and 0 <= figures["max_param_gap"] < 1e-4  # the same update
    again, _ = run_bench(tree_update.main, ["--smoke", "--checkpoint", str(checkpoint), "--rows", str(saved),
                                            "--peak-memory", "prefix"], capsys)
    assert again["rows"] == figures["rows"] and again["layout"] == "prefix" and positive(again["peak_rss_gb"])
    assert "--rows nowhere.npz: no such file" in refused(tree_update.main, ["--smoke", "--rows", "nowhere.npz"], capsys)

"""experiments.bench.update: the --smoke run (a random 1-layer demo policy, one group of two, one turn)
to its JSON line: the padded loop, the packed step and its dense-mask twin on the same rows."""

from __future__ import annotations

from experiments.bench import update
from tests.experiments.bench_helpers import positive, run_bench


def test_smoke_run(capsys):
    figures, _ = run_bench(update.main, ["--smoke"], capsys)
    assert figures["bench"] == "update" and figures["rounds"] == 1 and figures["rows"] >= 2
    for key in ("speedup_vs_padded_loop", "update_tokens_per_s", "fraction_of_matmul_flops", "old_update_s",
                "new_update_s", "new_update_dense_attention_s", "speedup_of_attention_blocks", "matmul_gflops_per_s",
                "update_useful_gflops_per_s", "row_length_mean", "sequence_capacity"):
        assert positive(figures[key]), (key, figures[key])
    assert 0 <= figures["padding_fraction"] < figures["padding_fraction_padded_loop"] < 1
    lengths = [figures[key] for key in ("row_length_p50", "row_length_p90", "row_length_max", "sequence_capacity")]
    assert lengths == sorted(lengths)

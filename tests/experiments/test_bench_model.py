"""experiments.bench.model: the --smoke run to its JSON line (both forwards on the same weights)."""

from __future__ import annotations

import pytest

from experiments.bench import model
from tests.experiments.bench_helpers import positive, run_bench, torch_next_to_jax  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("torch_next_to_jax")


def test_smoke_run(capsys):
    figures, printed = run_bench(model.main, ["--smoke"], capsys)
    assert figures["bench"] == "model" and (figures["batch"], figures["seq"]) == (2, 16)
    for key in ("speedup_vs_transformers", "jax_tokens_per_s", "transformers_tokens_per_s", "jax_ms_per_batch",
                "transformers_ms_per_batch", "jax_compile_s", "params"):
        assert positive(figures[key]), (key, figures[key])
    assert figures["speedup_vs_transformers"] == pytest.approx(
        figures["transformers_ms_per_batch"] / figures["jax_ms_per_batch"], rel=0.02
    )
    assert 0 <= figures["max_abs_logit_diff"] < 1e-4  # the same forward, fp32
    assert figures["jax_single_thread"] is False and figures["dtype"] == "float32"
    assert "max |logit difference|" in printed.out

"""experiments.bench.credit in miniature (--smoke): GRPO and MileGPO full on a tiny synthetic batch, to
its JSON line with the figures its docstring names; an unknown case is refused by argparse."""

from __future__ import annotations

import pytest

from experiments.bench import credit
from tests.experiments.bench_helpers import positive, run_bench


def test_smoke_reaches_its_json_line(capsys):
    figures, _ = run_bench(credit.main, ["--smoke"], capsys)
    assert figures["bench"] == "credit" and set(figures["per_estimator"]) == {"grpo", "milegpo/full"}
    for key in ("speedup_vs_reference", "speedup_end_to_end", "ms_per_batch", "ms_per_batch_end_to_end",
                "reference_ms_per_batch", "compile_ms", "record_us_per_step"):
        assert positive(figures[key]), (key, figures[key])
    assert set(figures["targets"]) == {"family_speedup_ge_10x", "family_jnp_le_5ms", "end_to_end_le_3ms"}
    with pytest.raises(SystemExit):
        credit.main(["--smoke", "--cases", "bogus"])

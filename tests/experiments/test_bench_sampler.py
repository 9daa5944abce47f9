"""experiments.bench.sampler (synthetic): the --smoke run to its JSON line, and its greedy-agreement
report on both branches: every row equal to transformers' (the clean case) and a row that differs."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.bench import sampler
from tests.experiments.bench_helpers import positive, run_bench, torch_next_to_jax  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("torch_next_to_jax")

TIMED = (
    "speedup_vs_transformers", "jax_new_tokens_per_s", "jax_s_per_batch", "jax_prefill_s", "jax_decode_tokens_per_s",
    "jax_compile_and_first_call_s", "transformers_new_tokens_per_s", "transformers_s_per_batch",
    "bandwidth_bound_tokens_per_s", "bandwidth_fraction",
)


def test_smoke_run(capsys):
    figures, printed = run_bench(sampler.main, ["--smoke", "--peak-bandwidth-gbs", "50"], capsys)
    assert figures["bench"] == "sampler" and (figures["batch"], figures["new_tokens"]) == (2, 4)
    for key in TIMED:
        assert positive(figures[key]), (key, figures[key])
    rows = figures["greedy_identical_rows"]
    assert figures["greedy_identical"] == (rows == 2)
    assert (figures["greedy_divergence_max_logit_gap"] == 0.0) == figures["greedy_identical"]
    assert f"greedy tokens identical in {rows}/2 rows" in printed.out


def test_agreement_report_when_rows_agree_and_when_one_differs():
    import torch

    args = sampler._parse(["--smoke"])
    reference = sampler._random_hf_model(args)
    prompts = np.random.default_rng(0).integers(0, args.vocab, (2, args.prompt), dtype=np.int32)
    with torch.inference_mode():
        theirs = reference.generate(torch.tensor(prompts, dtype=torch.long), max_new_tokens=args.new_tokens,
                                    do_sample=False)[:, args.prompt :].numpy()

    same = np.ones(2, bool)
    line, figures = sampler.greedy_agreement(same, sampler._divergence_gaps(reference, prompts, theirs, theirs))
    assert line == "greedy tokens identical in 2/2 rows"
    assert figures == {"greedy_identical": True, "greedy_identical_rows": 2, "greedy_identical_up_to_near_ties": True,
                       "greedy_divergence_max_logit_gap": 0.0}

    ours = theirs.copy()
    ours[1, 2] = (theirs[1, 2] + 1) % args.vocab  # row 1 takes another token at its third step
    gaps = sampler._divergence_gaps(reference, prompts, ours, theirs)
    with torch.inference_mode():
        context = torch.tensor(np.concatenate([prompts[1], theirs[1, :2]])[None], dtype=torch.long)
        logits = reference(context).logits[0, -1]
    assert gaps == [pytest.approx(float(logits[theirs[1, 2]] - logits[ours[1, 2]]), abs=1e-6)] and gaps[0] > 0
    line, figures = sampler.greedy_agreement((ours == theirs).all(axis=1), gaps)
    assert line == ("greedy tokens identical in 1/2 rows; where they differ, transformers' logits of the two tokens "
                    f"are {gaps[0]:.1e} apart at most")
    assert figures["greedy_identical"] is False and figures["greedy_identical_rows"] == 1
    assert figures["greedy_divergence_max_logit_gap"] == gaps[0]
    # a gap below NEAR_TIE is float32 rounding, not a different choice
    assert figures["greedy_identical_up_to_near_ties"] is (gaps[0] < sampler.NEAR_TIE)
    near_tie = sampler.greedy_agreement(np.array([True, False]), [sampler.NEAR_TIE / 2])[1]
    assert near_tie["greedy_identical_up_to_near_ties"] and not near_tie["greedy_identical"]

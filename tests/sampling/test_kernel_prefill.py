"""The sampler's prefill by a fused kernel (docs/models.md §7.1), the kernels in Pallas's interpreter on
CPU: a plain prefill and a shared one (prefix, then suffixes on top of its cache slots) give the same
greedy tokens and log-probabilities as the dense prefill and as full forwards without a cache, and
the prompt really goes through the kernel (one pass, the keys it is given)."""

from __future__ import annotations

import numpy as np
import pytest

import milegpo_jax.models.attention as attention
from milegpo_jax.models import load_pretrained
from milegpo_jax.models.attention import choose_cache_attention
from milegpo_jax.models.runtime import RuntimeOptions
from milegpo_jax.sampling import SamplingConfig, generate
from tests.sampling.helpers import greedy_by_full_forwards, prompts_of_lengths

BUDGET = 4


def kernel_sized_prompts(seed: int = 60) -> list[np.ndarray]:
    """A 90-token header shared by every row, then groups of identical prompts: the prefix and the
    suffixes each fill one 128-position kernel block (buckets of 128), a whole prompt two."""
    header = prompts_of_lengths([90], seed=seed)[0]
    tails = prompts_of_lengths([70, 100, 20, 5], seed=seed + 1)
    prompts = [np.concatenate([header, tail]) for tail in tails]
    return [prompts[0]] * 2 + [prompts[1]] * 2 + [prompts[2], prompts[3]]


@pytest.fixture
def kernel_calls(monkeypatch):
    """Records the key length and query length of every kernel call the model traces."""
    calls = []
    real = attention.fused_causal_attention

    def recording(q, k, v, segments, impl, **kwargs):
        calls.append((impl, q.shape[1], k.shape[1]))
        return real(q, k, v, segments, impl, **kwargs)

    monkeypatch.setattr(attention, "fused_causal_attention", recording)  # AttentionPlan calls it
    return calls


@pytest.mark.parametrize("impl", ["splash", "gpu_flash"])
def test_kernel_prefill_equals_the_dense_prefill(checkpoint, tiny_model, kernel_calls, impl):
    kernel_model, _ = load_pretrained(checkpoint[1], runtime=RuntimeOptions(attention_impl=impl))
    prompts = kernel_sized_prompts()
    config = SamplingConfig(max_new_tokens=BUDGET, temperature=0.0, prefill_chunk_tokens=256)
    want_tokens, want_logprobs = greedy_by_full_forwards(tiny_model, prompts, BUDGET)
    for sharing in (False, True):
        dense = generate(tiny_model, prompts, config.replace(prefix_sharing=sharing))
        fused = generate(kernel_model, prompts, config.replace(prefix_sharing=sharing))
        np.testing.assert_array_equal(fused.token_ids, want_tokens)
        np.testing.assert_array_equal(fused.token_ids, dense.token_ids)
        np.testing.assert_allclose(fused.policy_logprobs, want_logprobs, atol=1e-5)
        np.testing.assert_allclose(fused.policy_logprobs, dense.policy_logprobs, atol=1e-5)
    layer_count = kernel_model.config.num_layers
    plain = [(impl, 256, 256)] * layer_count  # the whole 256-position bucket in one pass, not chunks of 32
    prefix = [(impl, 128, 128)] * layer_count
    # the suffixes see the prefix's 128 slots and their own: Splash's offset mask; the GPU kernel
    # takes square masks only, so that stage stays dense
    suffix = [(impl, 128, 256)] * layer_count if impl == "splash" else []
    assert kernel_calls == plain + prefix + suffix


def test_the_prefill_form_by_platform_and_offset():
    assert choose_cache_attention("auto", "cpu", 256, 0) == "xla"  # CPU keeps the dense prefill
    assert choose_cache_attention("auto", "tpu", 2048, 0) == "splash"
    assert choose_cache_attention("auto", "tpu", 1024, 128) == "splash"
    assert choose_cache_attention("auto", "gpu", 2048, 0) == "gpu_flash"
    assert choose_cache_attention("auto", "gpu", 1024, 128) == "xla"  # an offset mask: not the GPU kernel
    assert choose_cache_attention("auto", "tpu", 16, 0) == "xla"  # less than a kernel block
    assert choose_cache_attention("auto", "tpu", 128, 16) == "xla"  # the prefix is not whole blocks
    assert choose_cache_attention("blocks", "tpu", 2048, 0) == "xla"
    assert choose_cache_attention("splash", "cpu", 256, 0) == "splash"  # the interpreter, as above

"""Shape buckets bound recompiles; bad requests fail with clear errors before anything compiles."""

from __future__ import annotations

import numpy as np
import pytest

from milegpo_jax.sampling import SamplingConfig, SamplingError, generate
from milegpo_jax.sampling.plan import MIN_PROMPT_BUCKET, prefill_chunk_length, prompt_bucket
from tests.sampling.helpers import CompileCounter, prompts_of_lengths

BUDGET = 5  # a budget no other test uses, so the shapes below are compiled here first


def test_prompt_lengths_within_a_bucket_compile_once(tiny_model):
    greedy = SamplingConfig(max_new_tokens=BUDGET, temperature=0.0)
    with CompileCounter() as first:
        generate(tiny_model, prompts_of_lengths((3, 7)), greedy)
    assert {"jit(prefill)", "jit(decode)"} <= set(first.names)
    with CompileCounter() as same_bucket:
        for seed, lengths in enumerate([(12, 16), (1, 9), (16, 16), (10, 4)]):
            generate(tiny_model, prompts_of_lengths(lengths, seed=seed), greedy)
    assert same_bucket.count == 0, same_bucket.names
    with CompileCounter() as next_bucket:
        generate(tiny_model, prompts_of_lengths((17, 2)), greedy)  # 17 tokens: the 32 bucket
    assert next_bucket.names == ["jit(prefill)", "jit(decode)"]


def test_runtime_values_do_not_recompile(tiny_model):
    # The shapes and switches of test_decode's sampling test: compiled once in a full run.
    prompts = prompts_of_lengths((9, 3, 14, 6, 1))
    generate(tiny_model, prompts, SamplingConfig(max_new_tokens=12, temperature=0.8, top_k=20, top_p=0.9), key=0)
    with CompileCounter() as counter:
        for temperature, top_p, key in [(0.5, 0.95, 1), (1.3, 0.5, 2)]:
            config = SamplingConfig(max_new_tokens=12, temperature=temperature, top_k=20, top_p=top_p, eos_ids=(7, 9))
            generate(tiny_model, prompts, config, key=key, max_new_tokens=[1, 12, 3, 12, 5])
    assert counter.count == 0, counter.names


def test_bucket_sizes():
    assert prompt_bucket(1, 8, 512) == MIN_PROMPT_BUCKET
    assert prompt_bucket(17, 8, 512) == 32
    assert prompt_bucket(400, 100, 512) == 412  # capped so bucket + budget fits the cache limit
    # 8 steps between two powers of two: at most 1/8 of padding, where a power of two wasted up to half
    assert [prompt_bucket(n, 32, 4096) for n in (100, 129, 300, 513, 531, 630, 768, 2049)] == [
        112, 144, 320, 576, 576, 640, 768, 2304]
    assert all(prompt_bucket(n, 32, 4096) - n < max(n // 8, MIN_PROMPT_BUCKET) for n in range(1, 4000))
    # where a fused kernel takes the prefill, whole 128-position kernel blocks
    assert [prompt_bucket(n, 32, 4096, block=128) for n in (100, 129, 300, 531, 2049)] == [128, 256, 384, 640, 2304]
    assert all(prompt_bucket(n, 32, 4096, block=128) % 128 == 0 for n in range(65, 3840))  # uncapped
    assert prefill_chunk_length(batch=32, bucket=256, chunk_tokens=2048) == 64
    assert prefill_chunk_length(batch=8, bucket=16, chunk_tokens=2048) == 16  # never beyond the bucket
    assert prefill_chunk_length(batch=8, bucket=64, chunk_tokens=100) == 8  # a power of two, rounded down
    assert prefill_chunk_length(batch=512, bucket=64, chunk_tokens=100) == 1


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"max_new_tokens": 0}, "max_new_tokens must be a positive int"),
        ({"max_new_tokens": -3}, "max_new_tokens must be a positive int"),
        ({"temperature": -0.1}, "temperature must be >= 0"),
        ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
        ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
        ({"top_p": float("nan")}, r"top_p must be in \(0, 1\]"),
        ({"top_k": -1}, "top_k must be an int >= 0"),
        ({"stop_sequences": ((1, 2), ())}, "stop sequences must not be empty"),
        ({"eos_ids": 5}, "eos_ids must be a sequence"),
        ({"eos_ids": (-1,)}, "non-negative"),
        ({"max_cache_len": 0}, "max_cache_len must be a positive int"),
        ({"prefill_chunk_tokens": 0}, "prefill_chunk_tokens must be a positive int"),
    ],
)
def test_bad_config(changes, message):
    with pytest.raises(SamplingError, match=message):
        SamplingConfig(**{"max_new_tokens": 4, **changes})


def test_bad_requests_fail_before_compiling(tiny_model):
    ok = prompts_of_lengths((4, 6))
    greedy = SamplingConfig(max_new_tokens=8, temperature=0.0)
    cases = [
        (ok + [np.array([], np.int32)], greedy, {}, "prompt 2 is empty"),
        ([], greedy, {}, "no prompts"),
        (["hello"], greedy, {}, "tokenize it first or use generate_text"),
        ([[1, 2, 512]], greedy, {}, r"token id 512 outside the model's vocabulary \[0, 512\)"),
        ([[1.5, 2.0]], greedy, {}, "integer token ids"),
        (ok, greedy.replace(max_cache_len=12), {}, "prompt 1 has 6 tokens.*needs 14 cache slots, more than the 12"),
        ([[1] * 600], greedy, {}, "more than the 512 allowed.*max_position_embeddings"),
        (ok, greedy.replace(temperature=1.0), {}, "needs a PRNG key"),
        (ok, greedy, {"max_new_tokens": [3]}, "must be 2 ints"),
        (ok, greedy, {"max_new_tokens": [0, 3]}, r"max_new_tokens\[0\] = 0.*\[1, 8\]"),
        (ok, greedy, {"max_new_tokens": [3, 9]}, r"max_new_tokens\[1\] = 9"),
        (ok, greedy.replace(eos_ids=(600,)), {}, "eos_ids has token id 600 outside"),
        (ok, greedy.replace(stop_sequences=((1, 700),)), {}, "stop_sequences has token id 700"),
    ]
    with CompileCounter() as counter:
        for prompts, config, kwargs, message in cases:
            with pytest.raises(SamplingError, match=message):
                generate(tiny_model, prompts, config, **kwargs)
    assert counter.count == 0, counter.names

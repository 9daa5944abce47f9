"""Group prefix sharing (milegpo_jax.sampling.prefix): the plan on the host, and generation that equals
a full prefill of every row (greedy tokens equal, log-probabilities within fp32 tolerance) while
computing fewer prefill positions."""

from __future__ import annotations

import numpy as np
import pytest

from milegpo_jax.sampling import SamplingConfig, generate
from milegpo_jax.sampling.prefix import common_prefix_length, share_prefixes
from tests.sampling.helpers import greedy_by_full_forwards, prompts_of_lengths

BUDGET = 8


def rollout_like_prompts(seed: int = 50) -> list[np.ndarray]:
    """Like a rollout's first turn: 3 groups of 3 identical prompts that share an 11-token header, and
    two other rows that share only the header."""
    header = prompts_of_lengths([11], seed=seed)[0]
    tails = prompts_of_lengths([6, 9, 3, 5, 1], seed=seed + 1)
    groups = [np.concatenate([header, tail]) for tail in tails]
    return [groups[0]] * 3 + [groups[1]] * 3 + [groups[2]] * 3 + [groups[3], groups[4]]


def test_common_prefix_keeps_a_token_for_every_row():
    a, b = np.array([5, 6, 7, 8]), np.array([5, 6, 9])
    assert common_prefix_length([a, b]) == 2
    assert common_prefix_length([a, a]) == 3  # identical prompts: the last token stays each row's own
    assert common_prefix_length([a, np.array([5])]) == 0
    assert common_prefix_length([np.array([4, 6]), b]) == 0


def test_the_plan_prefills_each_distinct_suffix_once():
    prompts = rollout_like_prompts()
    plan = share_prefixes(prompts, batch=16, full_bucket=32, budget=BUDGET, cache_limit=64, chunk_tokens=2048)
    assert plan is not None
    assert plan.prefix_mask.sum() == 11  # the header, once
    assert plan.suffix_mask[:5].sum() == 6 + 9 + 3 + 5 + 1  # five distinct suffixes; 3 rows of padding
    assert plan.row_suffix[:11].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 4]
    for row, prompt in enumerate(prompts):  # prefix + the row's suffix is the row's prompt
        suffix = plan.suffix_ids[plan.row_suffix[row]][plan.suffix_mask[plan.row_suffix[row]] == 1]
        np.testing.assert_array_equal(np.concatenate([plan.prefix_ids[0, -11:], suffix]), prompt)
    assert plan.positions_computed == 16 + 8 * 16 < 16 * 32
    # nothing to gain (all prompts distinct, nothing in common) or no room in the cache: no plan
    assert share_prefixes(prompts_of_lengths([5, 6, 7, 8]), 4, 16, BUDGET, 64, 2048) is None
    assert share_prefixes(prompts, 16, 32, BUDGET, cache_limit=39, chunk_tokens=2048) is None


def _edge_batches() -> dict[str, list[np.ndarray]]:
    a, b = np.arange(1, 40, dtype=np.int32), np.arange(100, 139, dtype=np.int32)
    one = [np.array([7], np.int32), np.array([9], np.int32)]
    return {
        "repeated prompts, nothing in common": [a, a, b, b],  # was an IndexError in left_padded
        "one row": [a],
        "all rows identical": [a] * 4,
        "prompts of one token": [one[0], one[0], one[1], one[1], one[1]],
    }


@pytest.mark.parametrize("name", list(_edge_batches()))
def test_shared_greedy_equals_full_on_edge_batches(tiny_model, name):
    prompts = _edge_batches()[name]
    config = SamplingConfig(max_new_tokens=4, temperature=0.0)
    full = generate(tiny_model, prompts, config)
    shared = generate(tiny_model, prompts, config.replace(prefix_sharing=True))
    np.testing.assert_array_equal(shared.token_ids, full.token_ids)
    np.testing.assert_allclose(shared.policy_logprobs, full.policy_logprobs, atol=1e-5)
    if name != "one row":  # one row has nothing to share: the plain prefill runs
        assert shared.prefill_positions < full.prefill_positions


@pytest.mark.parametrize("chunk_tokens", [2048, 16])  # one chunk, and several chunks per stage
def test_shared_greedy_equals_full_forwards(tiny_model, chunk_tokens):
    prompts = rollout_like_prompts()
    config = SamplingConfig(max_new_tokens=BUDGET, temperature=0.0, prefill_chunk_tokens=chunk_tokens)
    full = generate(tiny_model, prompts, config)
    shared = generate(tiny_model, prompts, config.replace(prefix_sharing=True))
    want_tokens, want_logprobs = greedy_by_full_forwards(tiny_model, prompts, BUDGET)
    np.testing.assert_array_equal(shared.token_ids, want_tokens)
    np.testing.assert_array_equal(shared.token_ids, full.token_ids)
    np.testing.assert_allclose(shared.policy_logprobs, want_logprobs, atol=1e-5)
    np.testing.assert_allclose(shared.policy_logprobs, full.policy_logprobs, atol=1e-5)
    # 11 rows: 16 x 32 positions in full; shared: the 16-slot header once, 8 suffix rows of 16
    assert full.prefill_positions == 16 * 32
    assert shared.prefill_positions == 16 + 8 * 16
    assert shared.prefill_s > 0 and shared.decode_s > 0


def test_shared_sampling_gives_each_row_its_own_draw(tiny_model):
    """Rows with the same prompt still sample independently, and the result is the full prefill's."""
    prompts = rollout_like_prompts()
    config = SamplingConfig(max_new_tokens=BUDGET, temperature=1.5, top_k=50)
    full = generate(tiny_model, prompts, config, key=7)
    shared = generate(tiny_model, prompts, config.replace(prefix_sharing=True), key=7)
    np.testing.assert_array_equal(shared.token_ids, full.token_ids)
    np.testing.assert_allclose(shared.policy_logprobs, full.policy_logprobs, atol=1e-5)
    np.testing.assert_allclose(shared.sampling_logprobs, full.sampling_logprobs, atol=1e-5)
    assert len({tuple(row) for row in shared.token_ids[:3]}) > 1  # one prompt, three different continuations


def test_bad_prefix_sharing_value_is_refused():
    from milegpo_jax.sampling import SamplingError

    with pytest.raises(SamplingError, match="prefix_sharing must be a bool"):
        SamplingConfig(max_new_tokens=4, prefix_sharing="yes")

"""Tree-packed rows (shared prompt prefixes once per sequence, docs/training.md §3.1): the forest and the
placement keep every row whole and its weighted positions its own, and the PPO and SFT losses, their
metrics, the reference log-probs and every parameter's gradient equal those of the rows packed alone to
fp32 rounding: dense and block-causal masks, scanned and rematerialised layers, the fused kernels in
Pallas's interpreter, and (in a child process) the 8-device CPU mesh."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from milegpo_jax.models import ModelConfig, RuntimeOptions, init_model
from milegpo_jax.rollout.collector import PolicyResponse
from milegpo_jax.train.loss import PPOLossConfig
from milegpo_jax.train.packing import (
    NO_SHARING,
    Head,
    Rows,
    Sharing,
    expanded_width,
    pack,
    pack_micro_batches,
    sequences_needed,
    sequences_per_micro,
)
from milegpo_jax.train.ppo import minibatches, ppo_rows, with_reference_logprobs
from milegpo_jax.train.prefix_tree import build_forest, place_rows
from milegpo_jax.train.sft import SFTExample, sft_rows
from milegpo_jax.train.step import PPOLoss, SFTLoss
from tests.fake_devices import run_on_8_fake_devices

CONFIG = ModelConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                     rope_theta=10_000.0)
PPO = PPOLoss(PPOLossConfig(kl_coef=0.1, entropy_coef=0.01))


def tree_rows(seed: int, groups: int = 3, group_size: int = 4, header: int = 12) -> Rows:
    """PPO rows shaped like a rollout's: a header every prompt opens with, a first prompt per group,
    1-3 steps per rollout whose prompts add a history of random length; responses of 1-5 tokens."""
    rng = np.random.default_rng(seed)
    opening = [int(x) for x in rng.integers(1, 50, header)]
    responses, advantages = [], []
    for _ in range(groups):
        first = opening + [int(x) for x in rng.integers(1, 50, rng.integers(5, 20))]
        for _ in range(group_size):
            for step in range(int(rng.integers(1, 4))):
                prompt = first + [int(x) for x in rng.integers(1, 50, step * int(rng.integers(0, 9)))]
                response = [int(x) for x in rng.integers(1, 50, rng.integers(1, 6))]
                responses.append(PolicyResponse(tuple(prompt), tuple(response),
                                                tuple(float(x) for x in rng.normal(-2, 0.5, len(response))), ""))
                advantages.append(float(rng.normal()))
    rows = ppo_rows(responses, advantages)
    ref = tuple(np.where(m > 0, rng.normal(-2, 0.5, m.shape), 0).astype(np.float32) for m in rows.fields["response_mask"])
    return Rows(rows.tokens, {**rows.fields, "ref_logprobs": ref})


def packed_batch(rows: Rows, capacity: int, sharing: Sharing, loss=PPO, width: int = 64, quantum: int = 1):
    head = Head(loss.weight_key, width)
    everything = range(len(rows))
    sequences = -(-sequences_needed(rows, everything, capacity, head, sharing) // quantum) * quantum
    packed = pack(rows, everything, capacity, sequences, 0, head, sharing)
    return packed, {k: jnp.asarray(v) for k, v in packed.arrays.items()}


def loss_and_grads(model, batch, loss=PPO):
    graphdef, params = nnx.split(model)
    token_count = jnp.maximum(jnp.sum(batch[loss.weight_key]), 1.0)
    # jitted: one compile is several times faster than tracing the gradient op by op
    return jax.jit(jax.value_and_grad(lambda p: loss(nnx.merge(graphdef, p), batch, token_count), has_aux=True))(params)


def assert_same_update(alone, shared):
    (loss_a, metrics_a), grads_a = alone
    (loss_s, metrics_s), grads_s = shared
    np.testing.assert_allclose(float(loss_s), float(loss_a), rtol=1e-5, atol=1e-6)
    for key in metrics_a:
        np.testing.assert_allclose(float(metrics_s[key]), float(metrics_a[key]), rtol=1e-5, atol=2e-6, err_msg=key)
    for g_s, g_a in zip(jax.tree.leaves(grads_s), jax.tree.leaves(grads_a), strict=True):
        np.testing.assert_allclose(np.asarray(g_s), np.asarray(g_a), rtol=1e-4, atol=1e-7)


# --- the forest and the placement (numpy only)


def test_forest_shares_the_header_and_each_groups_prompt_and_never_a_weighted_position():
    header, a, b = list(range(1, 13)), list(range(20, 30)), list(range(30, 40))
    prefixes = [np.asarray(p) for p in (header + a, header + a, header + a + [7, 8], header + b, header + b)]
    forest = build_forest(prefixes, [len(p) + 3 for p in prefixes], min_shared=4)
    # the header (12 tokens) above everything, each group's prompt (10 more) below it
    assert [(forest.start[k], forest.end[k]) for k in range(len(forest.start))] == [(0, 12), (12, 22), (12, 22)]
    assert forest.paths[0] == forest.paths[1] == forest.paths[2] == (0, 1) and forest.paths[3] == (0, 2)
    assert forest.leaf_start(2) == 22 and sorted(forest.order) == list(range(5))
    assert build_forest(prefixes, [1] * 5, max_depth=1).paths == ((0,),) * 5  # one level: the header only
    assert build_forest(prefixes, [1] * 5, max_depth=0).paths == ((),) * 5  # no sharing
    rows = tree_rows(0)
    packed, _ = packed_batch(rows, 64, Sharing())
    for local, ((seq, at), start) in enumerate(zip(packed.placement, packed.leaf_starts)):
        weighted = np.flatnonzero(rows.fields["response_mask"][local])
        assert start <= weighted[0]  # a row's weighted positions are all its own
        assert packed.arrays["positions"][seq, at] == start  # RoPE positions continue from the ancestors


def test_trees_too_large_for_a_sequence_are_split_with_their_prefix_repeated():
    shared = np.arange(1, 41)
    prefixes = [shared] * 6
    forest = build_forest(prefixes, [50] * 6)
    placed = place_rows(forest, [50] * 6, 64)  # the 40-token prefix + 10 per row: two rows per sequence
    assert [p.rows for p in placed] == [[0, 1], [2, 3], [4, 5]] and all(p.nodes == [0] for p in placed)
    assert all(p.used == 60 for p in placed)
    with pytest.raises(ValueError, match="a row of 65 positions does not fit sequences of 64"):
        place_rows(forest, [65] + [50] * 5, 64)


def test_prefix_row_order_keeps_groups_together_and_micro_batches_hold_no_more_positions():
    rows = tree_rows(10, groups=4)
    rng = np.random.default_rng(0)
    shuffled, prefix = minibatches(rows, 8, rng, "shuffled"), minibatches(rows, 8, rng, "prefix")
    for batches in (shuffled, prefix):  # every row once
        assert sorted(np.concatenate(batches).tolist()) == list(range(len(rows)))
    head = Head(PPO.weight_key, 64)

    def computed(batches):
        return sum(pack_micro_batches(rows, b, 64, 4, 0, head, Sharing())[0].positions_computed for b in batches)

    assert computed(prefix) < computed(shuffled)  # rows that share prompts share mini-batches
    with pytest.raises(ValueError, match="row_order='bogus'"):
        minibatches(rows, 8, rng, "bogus")
    packed, micro = pack_micro_batches(rows, prefix[0], 64, 4, 0, head, Sharing(span=2))
    sequences, capacity = packed.arrays["inputs"].shape
    assert capacity == 128 and sequences // micro <= 2  # twice as long, half as many: 4 x 64 positions at most


# --- exactness against the rows alone


@pytest.mark.parametrize(("seed", "impl", "capacity"), [(0, "xla", 64), (1, "blocks", 64)])
def test_ppo_update_equals_the_rows_alone(seed, impl, capacity):
    rows = tree_rows(seed, groups=2 + seed % 2)
    model = init_model(CONFIG, RuntimeOptions(attention_impl=impl, attention_block=16), seed=seed)
    alone_packed, alone = packed_batch(rows, capacity, NO_SHARING)
    shared_packed, shared = packed_batch(rows, capacity, Sharing())
    assert shared_packed.positions_computed < 0.75 * alone_packed.positions_computed  # the trees did share
    assert_same_update(loss_and_grads(model, alone), loss_and_grads(model, shared))


def test_one_row_per_tree_and_rows_of_unequal_length_scanned_and_rematerialised():
    rows = tree_rows(4, groups=3, group_size=1, header=2)  # a header too short to share: single-row trees
    more = tree_rows(5, groups=2, group_size=3)
    rows = Rows(rows.tokens + more.tokens, {k: v + more.fields[k] for k, v in rows.fields.items()})
    runtime = RuntimeOptions(scan_layers=True, remat="full", attention_impl="blocks", attention_block=16)
    model = init_model(CONFIG, runtime, seed=4)
    assert_same_update(loss_and_grads(model, packed_batch(rows, 64, NO_SHARING)[1]),
                       loss_and_grads(model, packed_batch(rows, 64, Sharing(max_depth=2))[1]))


def test_sft_update_equals_the_rows_alone():
    rows = tree_rows(6, groups=2, group_size=3)
    examples = [SFTExample(tuple(int(x) for x in ids[: int(np.argmax(m > 0)) + 1]), tuple(int(x) for x in ids[int(np.argmax(m > 0)) + 1 :]))
                for ids, m in zip(rows.tokens, rows.fields["response_mask"])]
    sft = sft_rows(examples)
    model = init_model(CONFIG, RuntimeOptions(attention_impl="xla"), seed=6)
    assert_same_update(loss_and_grads(model, packed_batch(sft, 64, NO_SHARING, SFTLoss())[1], SFTLoss()),
                       loss_and_grads(model, packed_batch(sft, 64, Sharing(), SFTLoss())[1], SFTLoss()))


def test_reference_logprobs_equal_the_rows_alone():
    rows = tree_rows(7)
    model = init_model(CONFIG, seed=7)
    kwargs = dict(capacity=64, max_sequences=4, pad_id=0, place=jnp.asarray)
    alone = with_reference_logprobs(model, rows, **kwargs).fields["ref_logprobs"]
    shared = with_reference_logprobs(model, rows, sharing=Sharing(), **kwargs).fields["ref_logprobs"]
    for a, s in zip(alone, shared, strict=True):
        np.testing.assert_allclose(s, a, atol=2e-6)


@pytest.mark.parametrize("impl", ["splash", "gpu_flash"])
def test_fused_kernels_run_each_segment_after_its_ancestors(impl):
    """The kernel path (Pallas's interpreter): each segment gathered after its ancestors' keys."""
    rows = tree_rows(8, groups=2, group_size=2)
    dense = init_model(CONFIG, RuntimeOptions(attention_impl="xla"), seed=8)
    kernel = init_model(CONFIG, RuntimeOptions(attention_impl=impl), seed=8)
    packed, shared = packed_batch(rows, 128, Sharing(expand_block=128))
    width = expanded_width(rows, range(len(rows)), 128, Head(PPO.weight_key, 64), Sharing(expand_block=128))
    assert packed.arrays["expand_index"].shape[1] == width and width % 128 == 0
    # a micro-batch attends over no more slots than the rows packed alone: 8 sequences of 128 -> 2 of 512
    assert sequences_per_micro(8, 128, 512) == 2 and sequences_per_micro(8, 128, 512, quantum=4) == 4
    assert sequences_per_micro(8, 128, 0) == 8
    assert_same_update(loss_and_grads(dense, packed_batch(rows, 128, NO_SHARING)[1]), loss_and_grads(kernel, shared))
    with pytest.raises(ValueError, match="need their expansion"):
        loss_and_grads(kernel, packed_batch(rows, 128, Sharing())[1])


def test_on_8_fake_devices():
    run_on_8_fake_devices("tests/train/tree_sharded_checks.py")

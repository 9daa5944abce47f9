"""Packed rows: the PPO loss, its metrics and its gradients on packed sequences equal those of every
row alone (no padding, no packing) to fp32 tolerance; the packer itself keeps every row whole."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from milegpo_jax.models import ModelConfig, init_model
from milegpo_jax.rollout.collector import PolicyResponse
from milegpo_jax.train.loss import PPOLossConfig
from milegpo_jax.train.packing import (
    CAPACITY_STEP,
    Head,
    as_micro_batches,
    capacity_for_length,
    first_fit_decreasing,
    head_width,
    micro_batch_shape,
    pack,
)
from milegpo_jax.train.ppo import ppo_rows
from milegpo_jax.train.step import PPOLoss

CONFIG = ModelConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                     rope_theta=10_000.0)
LOSS = PPOLoss(PPOLossConfig(kl_coef=0.1, entropy_coef=0.01))


def _random_rows(seed: int, count: int):
    rng = np.random.default_rng(seed)
    generations, advantages = [], []
    for _ in range(count):
        prompt = tuple(int(x) for x in rng.integers(1, 50, rng.integers(1, 20)))
        response = tuple(int(x) for x in rng.integers(1, 50, rng.integers(1, 8)))
        generations.append(PolicyResponse(prompt, response, tuple(float(x) for x in rng.normal(-2, 0.5, len(response))), ""))
        advantages.append(float(rng.normal()))
    rows = ppo_rows(generations, advantages)
    ref = tuple(np.where(m > 0, rng.normal(-2, 0.5, m.shape), 0).astype(np.float32) for m in rows.fields["response_mask"])
    return type(rows)(rows.tokens, {**rows.fields, "ref_logprobs": ref})


def _unpacked_loss(params, graphdef, rows):
    """Sum over rows, each run alone as a [1, n] batch, of its share of the token-mean loss."""
    token_count = sum(float(m.sum()) for m in rows.fields["response_mask"])
    total, metrics = 0.0, []
    for i, ids in enumerate(rows.tokens):
        n = len(ids) - 1  # alone, the LM head runs at every position (the mask picks the response)
        batch = {"inputs": jnp.asarray(ids[None, :-1]), "targets": jnp.asarray(ids[None, 1:]),
                 "attention_mask": jnp.ones((1, n), jnp.int32), "head_index": jnp.arange(n)[None]}
        batch.update({k: jnp.asarray(v[i][None]) for k, v in rows.fields.items()})
        loss, m = LOSS(nnx.merge(graphdef, params), batch, token_count)
        total += loss
        metrics.append(m)
    return total, {k: sum(m[k] for m in metrics) for k in ("policy_loss", "kl", "entropy")}


def _packed(rows, capacity, width):
    head = Head("response_mask", width)
    bins = first_fit_decreasing(rows.lengths, capacity, rows.weighted_positions("response_mask"), width)
    return pack(rows, range(len(rows)), capacity, len(bins), pad_id=0, head=head)


def _packed_loss(params, graphdef, arrays):
    batch = {k: jnp.asarray(v) for k, v in arrays.items()}
    loss, m = LOSS(nnx.merge(graphdef, params), batch, float(arrays["response_mask"].sum()))
    return loss, {k: m[k] for k in ("policy_loss", "kl", "entropy")}


@pytest.mark.parametrize(("seed", "width"), [(0, 32), (1, 16), (2, 8)])  # 8: the head bounds the packing
def test_packed_gradients_equal_unpacked(seed, width):
    rows = _random_rows(seed, 9)
    graphdef, params = nnx.split(init_model(CONFIG, seed=seed))
    packed = _packed(rows, 32, width)
    # jitted: one compile of the whole graph is several times faster than tracing the gradient op by op
    (loss_u, metrics_u), grads_u = jax.jit(jax.value_and_grad(
        lambda p: _unpacked_loss(p, graphdef, rows), has_aux=True))(params)
    (loss_p, metrics_p), grads_p = jax.jit(jax.value_and_grad(
        lambda p: _packed_loss(p, graphdef, packed.arrays), has_aux=True))(params)
    assert packed.arrays["inputs"].shape[0] < len(rows)  # several rows did share a sequence
    assert packed.arrays["head_index"].shape == (packed.arrays["inputs"].shape[0], width)
    # every sequence's response positions fit the head, and no padding slot carries weight
    assert (packed.arrays["response_mask"].sum(axis=1) <= width).all()
    assert packed.arrays["response_mask"].sum() == sum(m.sum() for m in rows.fields["response_mask"])
    np.testing.assert_allclose(float(loss_p), float(loss_u), rtol=1e-5, atol=1e-6)
    for key in metrics_u:
        np.testing.assert_allclose(float(metrics_p[key]), float(metrics_u[key]), rtol=1e-5, atol=1e-6)
    for g_p, g_u in zip(jax.tree.leaves(grads_p), jax.tree.leaves(grads_u), strict=True):
        np.testing.assert_allclose(np.asarray(g_p), np.asarray(g_u), rtol=1e-4, atol=1e-6)


def test_first_fit_decreasing_keeps_rows_whole_and_fills_sequences():
    lengths = [7, 3, 5, 2, 8, 1, 4]
    bins = first_fit_decreasing(lengths, 8)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in b) <= 8 for b in bins)
    assert len(bins) == 4  # 30 positions in sequences of 8: the minimum
    with pytest.raises(ValueError, match="does not fit"):
        first_fit_decreasing([9], 8)


def test_first_fit_decreasing_keeps_weighted_positions_within_the_head():
    lengths, heads = [7, 3, 5, 2, 8, 1, 4], [3, 1, 4, 2, 1, 1, 3]
    bins = first_fit_decreasing(lengths, 16, heads, 5)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    assert all(sum(heads[i] for i in b) <= 5 for b in bins) and all(sum(lengths[i] for i in b) <= 16 for b in bins)
    assert len(bins) == 3 and len(first_fit_decreasing(lengths, 16)) == 2  # 15 weighted positions need 3 heads of 5
    assert first_fit_decreasing(lengths, 16, heads, 16) == first_fit_decreasing(lengths, 16)  # a wide head never binds
    with pytest.raises(ValueError, match="weighted positions"):
        first_fit_decreasing([3], 8, [6], 5)


def test_head_width_is_a_quarter_or_the_longest_response():
    assert head_width(2560, 512) == 640 and head_width(2560, 700) == 768 and head_width(1024, 32) == 256
    assert head_width(16, 3) == 16 and head_width(2560, 4000) == 2560  # never past the capacity


def test_pack_lays_out_the_weighted_positions():
    rows = _random_rows(4, 6)
    head = Head("response_mask", 16)
    packed = pack(rows, [5, 1, 3], 64, 3, pad_id=0, head=head)
    arrays = packed.arrays
    assert arrays["inputs"].shape == (3, 64) and arrays["targets"].shape == (3, 16)
    for local, row in enumerate([5, 1, 3]):
        seq, start = packed.placement[local]
        positions = start + np.flatnonzero(rows.fields["response_mask"][row] > 0)
        slots = np.flatnonzero(np.isin(arrays["head_index"][seq], positions) & (arrays["response_mask"][seq] > 0))
        assert arrays["head_index"][seq, slots].tolist() == positions.tolist()
        assert arrays["targets"][seq, slots].tolist() == rows.tokens[row][1:][positions - start].tolist()
        np.testing.assert_array_equal(arrays["old_logprobs"][seq, slots],
                                      rows.fields["old_logprobs"][row][positions - start])
    assert arrays["response_mask"].sum() == sum(rows.fields["response_mask"][r].sum() for r in (5, 1, 3))


def test_pack_places_segments_and_fields():
    rows = _random_rows(3, 5)
    packed = pack(rows, [4, 0, 2], 64, 2, pad_id=0)
    for local, row in enumerate([4, 0, 2]):
        seq, start = packed.placement[local]
        n = len(rows.tokens[row]) - 1
        assert packed.arrays["inputs"][seq, start : start + n].tolist() == rows.tokens[row][:-1].tolist()
        np.testing.assert_array_equal(packed.arrays["advantages"][seq, start : start + n], rows.fields["advantages"][row])
        assert len(set(packed.arrays["attention_mask"][seq, start : start + n].tolist())) == 1
    assert packed.arrays["inputs"][1].sum() == 0  # the spare sequence is all padding
    assert packed.real_tokens == sum(len(rows.tokens[r]) - 1 for r in (4, 0, 2))
    assert 0 < packed.padding_fraction < 1


def test_micro_batch_shapes_hold_every_sequence_in_whole_shards():
    assert micro_batch_shape(5, 64) == (1, 5)  # one device: no all-padding sequences
    assert micro_batch_shape(5, 64, quantum=8) == (1, 8)
    assert micro_batch_shape(9, 8) == (2, 5)
    assert micro_batch_shape(33, 64) == (1, 36)  # three significant bits: 32, 36, 40, ...
    assert micro_batch_shape(130, 64, quantum=8) == (3, 48)
    for quantum in (1, 2, 8):
        shapes = set()
        for sequences in range(1, 200):
            micro, per = micro_batch_shape(sequences, 64, quantum)
            assert micro * per >= sequences and per <= 64 and (micro - 1) * per < sequences
            assert per % quantum == 0 or per == 64
            assert per < 1.125 * -(-sequences // micro) + quantum  # under 12.5 % spare (plus shard rounding)
            shapes.add(per)
        assert len(shapes) <= {1: 32, 2: 24, 8: 8}[quantum]
    with pytest.raises(ValueError, match="quantum"):
        micro_batch_shape(5, 64, quantum=0)


def test_capacity_is_a_power_of_two_when_short_then_a_multiple_of_the_step():
    assert [capacity_for_length(n) for n in (1, 16, 17, 100, 128)] == [16, 16, 32, 128, 128]
    assert [capacity_for_length(n) for n in (129, 256, 257, 470, 2559)] == [256, 256, 384, 512, 2560]
    for n in range(1, 3000, 7):
        capacity = capacity_for_length(n)
        assert n <= capacity < max(2 * n, n + CAPACITY_STEP)
    arrays = as_micro_batches({"x": np.arange(12).reshape(6, 2)}, 3)
    assert arrays["x"].shape == (3, 2, 2)

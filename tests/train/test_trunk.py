"""The frozen trunk computed once per update (docs/training.md §3.2): every row position's slot is
where packing put its token, and a PPO update whose mini-batches start from the trunk (computed over
all rows at once, tree-packed) equals the update that computes every layer per mini-batch with the
rows packed alone: loss, metrics and gradients per mini-batch, and a whole jitted epoch's metrics and
parameters, to fp32 rounding; dense and block masks, scanned and rematerialised, the fused kernels in
Pallas's interpreter."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from milegpo_jax.config import OptimSection
from milegpo_jax.models import ModelConfig, RuntimeOptions, init_model
from milegpo_jax.train.loss import PPOLossConfig
from milegpo_jax.train.optim import make_optimizer
from milegpo_jax.train.packing import NO_SHARING, Head, Sharing, pack
from milegpo_jax.train.ppo import ppo_epoch
from milegpo_jax.train.step import TRUNK_KEY, PPOLoss, TrainStep, jit_train_step
from milegpo_jax.train.trunk import trunk_states
from tests.train.test_tree_packing import assert_same_update, loss_and_grads, packed_batch, tree_rows

LAYERS, TRAINED = 4, 2
CONFIG = ModelConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_layers=LAYERS, num_heads=4,
                     num_kv_heads=2, rope_theta=10_000.0)
TOP = PPOLoss(PPOLossConfig(kl_coef=0.1, entropy_coef=0.01), trainable_layers=TRAINED)


def _trunk(model, rows, sharing=Sharing(), capacity=64):
    return trunk_states(model, rows, layers=LAYERS - TRAINED, capacity=capacity, max_sequences=4, pad_id=0,
                        place=jnp.asarray, sharing=sharing)


@pytest.mark.parametrize("sharing", [NO_SHARING, Sharing(), Sharing(span=2, max_depth=2)])
def test_row_slots_hold_each_rows_tokens_at_its_positions(sharing):
    rows = tree_rows(3, groups=3)
    pick = np.random.default_rng(0).permutation(len(rows))[:9]
    packed = pack(rows, pick, sharing.capacity(64), 12, 0, Head(TOP.weight_key, 64), sharing)
    inputs = packed.arrays["inputs"].reshape(-1)
    positions = packed.arrays["positions"].reshape(-1) if sharing.max_depth else None
    for local, slots in enumerate(packed.row_slots):
        ids = rows.tokens[pick[local]]
        np.testing.assert_array_equal(inputs[slots], ids[:-1])
        if positions is not None:
            np.testing.assert_array_equal(positions[slots], np.arange(len(ids) - 1))
    if sharing.max_depth:  # shared prefixes: several rows read one slot
        every = np.concatenate(packed.row_slots)
        assert len(np.unique(every)) < len(every)


@pytest.mark.parametrize(("seed", "runtime"), [
    (0, RuntimeOptions(attention_impl="xla")),
    (1, RuntimeOptions(attention_impl="blocks", attention_block=16, scan_layers=True, remat="full")),
])
def test_mini_batches_from_the_trunk_equal_the_rows_alone(seed, runtime):
    rows = tree_rows(seed, groups=3)
    model = init_model(CONFIG, runtime, seed=seed)
    trunk = _trunk(model, rows)
    alone_packed, _ = packed_batch(rows, 64, NO_SHARING)
    assert trunk.positions_computed < 0.6 * alone_packed.positions_computed
    pick = np.random.default_rng(seed).permutation(len(rows))[: len(rows) // 2]  # a shuffled mini-batch
    head, sharing = Head(TOP.weight_key, 64), Sharing()
    alone = pack(rows, pick, 64, 16, 0, head, NO_SHARING)
    shared = pack(rows, pick, 64, 16, 0, head, sharing)
    batch_alone = {k: jnp.asarray(v) for k, v in alone.arrays.items()}
    batch_trunk = {k: jnp.asarray(v) for k, v in shared.arrays.items()}
    batch_trunk[TRUNK_KEY] = jnp.asarray(trunk.gather(shared, pick))
    assert_same_update(loss_and_grads(model, batch_alone, TOP), loss_and_grads(model, batch_trunk, TOP))


def test_a_jitted_epoch_from_the_trunk_equals_the_epoch_without():
    """The trainer's path: ``ppo_epoch`` with and without the trunk, same parameters, same shuffles."""
    rows = tree_rows(2, groups=3)
    model = init_model(CONFIG, RuntimeOptions(scan_layers=True), seed=2)
    graphdef, params = nnx.split(model)
    tx = make_optimizer(OptimSection(learning_rate=1e-3, trainable_layers=TRAINED))
    trunk = _trunk(model, rows)

    def epoch(sharing, trunk):
        state = jax.tree.map(jnp.copy, params)
        new, _, history = ppo_epoch(
            jit_train_step(TrainStep(graphdef, tx, TOP)), state, tx.init(state), rows, minibatch_rows=8,
            microbatch_rows=4, capacity=64, rng=np.random.default_rng(0), pad_id=0, place=jnp.asarray,
            sharing=sharing, trunk=trunk)
        return new, history

    want_params, want = epoch(NO_SHARING, None)
    got_params, got = epoch(Sharing(), trunk)
    assert len(got) == len(want) > 1
    for a, b in zip(want, got):
        for key in a:
            np.testing.assert_allclose(b[key], a[key], rtol=2e-5, atol=2e-6, err_msg=key)
    # Adam divides each gradient by its own scale, so rounding in a near-zero gradient moves its weight
    # by up to a step's size (lr 1e-3 here): 1e-5 is a hundredth of a step
    for a, b in zip(jax.tree.leaves(want_params), jax.tree.leaves(got_params), strict=True):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-5)
    moved = optax.tree.norm(jax.tree.map(jnp.subtract, got_params, params))
    assert float(moved) > 1e-2  # the epoch did update


@pytest.mark.parametrize("impl", ["splash", "gpu_flash"])
def test_fused_kernels_from_the_trunk(impl):
    """The kernel path (Pallas's interpreter): the trunk pass and the top layers over the trees' expansion."""
    rows = tree_rows(8, groups=2, group_size=2)
    dense = init_model(CONFIG, RuntimeOptions(attention_impl="xla"), seed=8)
    kernel = init_model(CONFIG, RuntimeOptions(attention_impl=impl), seed=8)
    sharing = Sharing(span=1, expand_block=128)
    trunk = _trunk(kernel, rows, sharing, capacity=128)
    packed, batch = packed_batch(rows, 128, sharing)
    batch[TRUNK_KEY] = jnp.asarray(trunk.gather(packed, range(len(rows))))
    assert_same_update(loss_and_grads(dense, packed_batch(rows, 128, NO_SHARING)[1], TOP),
                       loss_and_grads(kernel, batch, TOP))


def test_a_trunk_needs_frozen_layers_of_the_right_shape():
    rows = tree_rows(5, groups=1)
    model = init_model(CONFIG, seed=5)
    _, batch = packed_batch(rows, 64, Sharing())
    with pytest.raises(ValueError, match="frozen_layers > 0 only"):
        model.hidden_states(batch["inputs"], trunk=jnp.zeros((*batch["inputs"].shape, 32)))
    with pytest.raises(ValueError, match="trunk has shape"):
        model.hidden_states(batch["inputs"], frozen_layers=2, trunk=jnp.zeros((*batch["inputs"].shape, 8)))

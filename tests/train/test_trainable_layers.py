"""Training the top N layers only (optim.trainable_layers): the frozen weights do not move, the trained
layers get the very gradients full fine-tuning would give them, and the result exports as a Hugging
Face checkpoint that transformers reloads with the same logits."""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from milegpo_jax.config import ConfigError, OptimSection
from milegpo_jax.models import ModelConfig, RuntimeOptions, init_model, save_pretrained
from milegpo_jax.train.loss import PPOLossConfig
from milegpo_jax.train.optim import make_optimizer, trainable_scale
from milegpo_jax.train.ppo import place_on_default_device, ppo_epoch
from milegpo_jax.train.step import PPOLoss, TrainStep, jit_train_step
from tests.train.test_ppo_sft import _rows_with_current_logprobs

LAYERS = 3


CONFIG = ModelConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_layers=LAYERS, num_heads=4,
                     num_kv_heads=2)


def _layer_slices(params, scan: bool) -> dict[str, np.ndarray]:
    """Every weight by name, a stacked weight split into one entry per layer."""
    named = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        name = jax.tree_util.keystr(path)
        leaf = np.asarray(leaf)
        if scan and name.startswith("['layers']"):
            named.update({f"{name}[{i}]": leaf[i] for i in range(LAYERS)})
        else:
            named[name] = leaf
    return named


def _trained(scan: bool, trainable_layers: int):
    model = init_model(CONFIG, RuntimeOptions(scan_layers=scan), seed=4)
    pairs = [((1, 2, 3, 4), (20, 21, 2)), ((5, 6), (7, 8, 2))]
    rows = _rows_with_current_logprobs(model, pairs, [1.0, -0.5])
    optim = OptimSection(learning_rate=1e-2, weight_decay=0.1, trainable_layers=trainable_layers)
    tx = make_optimizer(optim)
    graphdef, params = nnx.split(model)
    before = _layer_slices(params, scan)
    loss = PPOLoss(PPOLossConfig(kl_coef=0.0), trainable_layers=trainable_layers)
    params, _, history = ppo_epoch(
        jit_train_step(TrainStep(graphdef, tx, loss)), params, tx.init(params), rows, minibatch_rows=2,
        microbatch_rows=2, capacity=16, rng=np.random.default_rng(0), pad_id=0, place=place_on_default_device,
    )
    return before, _layer_slices(params, scan), nnx.merge(graphdef, params), history


@pytest.mark.parametrize("scan", [False, True])
def test_only_the_top_layers_and_final_norm_move(scan):
    before, after, _, history = _trained(scan, trainable_layers=1)
    assert history[0]["grad_norm"] > 0
    top = "[2]" if not scan else None
    for name in before:
        trains = "final_norm" in name or (name.startswith("['layers']") and (
            name.startswith(f"['layers']{top}") if not scan else name.endswith("[2]")))
        moved = not np.array_equal(before[name], after[name])
        assert moved == trains, (name, moved)  # weight decay 0.1 would move any weight the mask let through


def test_the_trained_layers_get_full_fine_tunings_gradients():
    """stop_gradient below the trained layers cuts only the backward pass: same loss, same gradient."""
    model = init_model(CONFIG, seed=5)
    graphdef, params = nnx.split(model)
    sequence = np.array([[1, 2, 3, 9, 10, 2, 0, 0]], np.int32)
    response = np.array([[0, 0, 1, 1, 1, 0, 0, 0]], np.float32)  # predicting 9, 10, 2
    micro = {
        "inputs": sequence, "targets": np.roll(sequence, -1, axis=1),
        "attention_mask": (np.arange(8) < 6).astype(np.int32)[None], "head_index": np.arange(8)[None],
        "response_mask": response,
        "old_logprobs": np.full((1, 8), -2.0, np.float32), "ref_logprobs": np.full((1, 8), -2.5, np.float32),
        "advantages": np.full((1, 8), 0.7, np.float32),
    }

    def grads(trainable):
        def loss_fn(p):
            return PPOLoss(PPOLossConfig(), trainable_layers=trainable)(nnx.merge(graphdef, p), micro, 3.0)[0]
        return jax.value_and_grad(loss_fn)(params)

    (full_loss, full), (top_loss, top) = grads(0), grads(1)
    assert float(full_loss) == pytest.approx(float(top_loss), abs=1e-6)
    scale = trainable_scale(params, 1)
    for g_full, g_top, s in zip(jax.tree.leaves(full), jax.tree.leaves(top), jax.tree.leaves(scale), strict=True):
        np.testing.assert_allclose(np.asarray(g_top), np.asarray(g_full) * np.asarray(s), atol=1e-6)
        if float(np.max(s)) == 0:
            assert not np.any(np.asarray(g_top))  # nothing below the cut


def test_the_exported_checkpoint_reloads_in_transformers(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from tests.models.helpers import forward, torch_logits

    _, _, model, _ = _trained(scan=True, trainable_layers=1)
    exported = save_pretrained(model, model.config, tmp_path / "hf")
    reloaded = AutoModelForCausalLM.from_pretrained(exported, dtype=torch.float32).eval()
    ids = np.arange(1, 25, dtype=np.int32).reshape(2, 12) % 40
    np.testing.assert_allclose(torch_logits(reloaded, ids), forward(model, ids), atol=2e-4, rtol=1e-4)


def test_a_negative_count_is_refused():
    with pytest.raises(ConfigError, match="optim.trainable_layers"):
        OptimSection(trainable_layers=-1)

"""SFT and the PPO update on a tiny model: they move the policy the way their signals say."""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from milegpo_jax.models import ModelConfig, init_model
from milegpo_jax.rollout.collector import Generation
from milegpo_jax.train.loss import PPOLossConfig
from milegpo_jax.train.ppo import pack_rows, padded_rows, ppo_update, reference_logprobs, reference_logprobs_of_rows
from milegpo_jax.train.sft import SFTExample, pack_batch, train_sft

CONFIG = ModelConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, num_kv_heads=2)


def test_pack_batch_masks_only_the_response():
    batch = pack_batch([SFTExample((5, 6, 7), (8, 9)), SFTExample((5,), (9,))], pad_id=0, min_length=4)
    assert batch["inputs"].shape == (2, 4)
    assert batch["inputs"][0].tolist() == [5, 6, 7, 8] and batch["targets"][0].tolist() == [6, 7, 8, 9]
    assert batch["loss_mask"][0].tolist() == [0, 0, 1, 1]  # predicting 8 and 9
    assert batch["loss_mask"][1].tolist() == [1, 0, 0, 0] and batch["attention_mask"][1].tolist() == [1, 0, 0, 0]


def test_sft_learns_the_responses():
    model = init_model(CONFIG, seed=0)
    examples = [SFTExample((1, 2, 3), (10, 11, 2)), SFTExample((1, 4, 3), (12, 13, 2))]
    history = train_sft(model, examples, pad_id=0, steps=60, batch_size=2, learning_rate=3e-3)
    assert history[-1]["loss"] < 0.2 * history[0]["loss"]
    assert history[-1]["target_prob"] > 0.8


def _response_logprob(model, generation):
    batch = pack_rows([generation], [0.0], pad_id=0)
    logprobs = np.asarray(reference_logprobs(model, batch))
    return float((logprobs * batch["response_mask"]).sum())


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_ppo_update_follows_the_advantage_sign(sign):
    model = init_model(CONFIG, seed=1)
    prompt, response = (1, 2, 3, 4), (20, 21, 2)
    start = _response_logprob(model, Generation(prompt, response, (0.0, 0.0, 0.0), ""))
    # Behaviour log-probs = the current policy's, as right after sampling.
    batch = pack_rows([Generation(prompt, response, (0.0,) * 3, "")], [sign], pad_id=0)
    batch["old_logprobs"] = np.asarray(reference_logprobs(model, batch)) * batch["response_mask"]
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
    cfg = PPOLossConfig(kl_coef=0.0, entropy_coef=0.0)
    history = ppo_update(model, optimizer, batch, batch["old_logprobs"], cfg, minibatch_rows=1, microbatch_rows=1,
                         rng=np.random.default_rng(0))
    moved = _response_logprob(model, Generation(prompt, response, (0.0,) * 3, "")) - start
    assert np.sign(moved) == sign and history[0]["grad_norm"] > 0


@pytest.mark.parametrize("micro", [1, 3])  # 3: the second micro-batch is padded from 1 row to 3
def test_microbatch_accumulation_equals_one_big_batch(micro):
    generations = [Generation((1, 2, 3), (5 + i, 2), (0.0, 0.0), "") for i in range(4)]
    advantages = [1.0, -0.5, 0.25, 2.0]
    results = []
    for micro in (4, micro):
        model = init_model(CONFIG, seed=2)
        batch = pack_rows(generations, advantages, pad_id=0)
        batch["old_logprobs"] = np.asarray(reference_logprobs(model, batch)) * batch["response_mask"]
        optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
        ppo_update(model, optimizer, batch, batch["old_logprobs"], PPOLossConfig(), minibatch_rows=4,
                   microbatch_rows=micro, rng=np.random.default_rng(0))
        results.append(jax.tree.leaves(nnx.state(model, nnx.Param)))
    for together, accumulated in zip(*results, strict=True):
        np.testing.assert_allclose(np.asarray(together), np.asarray(accumulated), atol=1e-6)


def test_padded_rows_add_nothing_and_keep_one_shape():
    generations = [Generation((1, 2, 3, 4), (5 + i, 2), (0.0, 0.0), "") for i in range(3)]
    batch = pack_rows(generations, [1.0, -1.0, 0.5], pad_id=0)
    padded = padded_rows(batch, np.array([2, 0]), 4)
    assert all(value.shape[0] == 4 for value in padded.values())
    assert padded["response_mask"][2:].sum() == 0 and padded["response_mask"][:2].sum() == batch["response_mask"][[2, 0]].sum()
    np.testing.assert_array_equal(padded["inputs"][:2], batch["inputs"][[2, 0]])

    model = init_model(CONFIG, seed=3)
    whole = np.asarray(reference_logprobs(model, batch))
    np.testing.assert_allclose(reference_logprobs_of_rows(model, batch, microbatch_rows=2), whole, atol=1e-6)

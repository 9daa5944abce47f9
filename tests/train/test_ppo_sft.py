"""SFT and the PPO update on a tiny model: they move the policy the way their signals say, and the
step's micro-batch accumulation is the one-batch gradient."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from milegpo_jax.models import ModelConfig, init_model, token_logprobs
from milegpo_jax.rollout.collector import PolicyResponse
from milegpo_jax.train.loss import PPOLossConfig
from milegpo_jax.train.ppo import place_on_default_device, ppo_epoch, ppo_rows, with_reference_logprobs
from milegpo_jax.train.sft import SFTExample, packed_sft_batch, sft_rows, train_sft
from milegpo_jax.train.step import PPOLoss, TrainStep, jit_train_step

CONFIG = ModelConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, num_kv_heads=2)


def test_sft_batch_masks_only_the_response():
    rows = sft_rows([SFTExample((5, 6, 7), (8, 9)), SFTExample((5,), (9,))])
    batch = packed_sft_batch(rows, [0, 1], pad_id=0, max_sequences=2, capacity=16)
    assert batch["inputs"].shape == (1, 1, 16)  # both rows share one packed sequence, no spare one
    assert batch["inputs"][0, 0, :5].tolist() == [5, 6, 7, 8, 5]
    # the LM head reads the response positions only: predicting 8, 9 and then 9
    assert batch["head_index"][0, 0, :3].tolist() == [2, 3, 4] and batch["targets"][0, 0, :3].tolist() == [8, 9, 9]
    assert batch["loss_mask"][0, 0].tolist() == [1, 1, 1] + [0] * 13
    assert batch["attention_mask"][0, 0, :6].tolist() == [1, 1, 1, 1, 2, 0]


def test_sft_learns_the_responses():
    model = init_model(CONFIG, seed=0)
    examples = [SFTExample((1, 2, 3), (10, 11, 2)), SFTExample((1, 4, 3), (12, 13, 2))]
    _, history = train_sft(model, examples, pad_id=0, steps=60, batch_size=2, learning_rate=3e-3)
    assert history[-1]["loss"] < 0.2 * history[0]["loss"]
    assert history[-1]["target_prob"] > 0.8


def _response_logprob(model, prompt, response):
    ids = jnp.asarray([list(prompt) + list(response)])
    logprobs = token_logprobs(model, ids[:, :-1], ids[:, 1:])
    return float(jnp.sum(logprobs[0, len(prompt) - 1 :]))


def _rows_with_current_logprobs(model, prompts_responses, advantages):
    """PPO rows whose behaviour log-probs are the model's own (as right after sampling)."""
    generations = []
    for prompt, response in prompts_responses:
        ids = jnp.asarray([list(prompt) + list(response)])
        logprobs = np.asarray(token_logprobs(model, ids[:, :-1], ids[:, 1:]))[0, len(prompt) - 1 :]
        generations.append(PolicyResponse(tuple(prompt), tuple(response), tuple(float(x) for x in logprobs), ""))
    rows = ppo_rows(generations, advantages)
    return with_reference_logprobs(model, rows, capacity=16, max_sequences=8, pad_id=0, place=place_on_default_device)


def _epoch(model, rows, tx, cfg, minibatch_rows, microbatch_rows, capacity=16):
    graphdef, params = nnx.split(model)
    step = TrainStep(graphdef, tx, PPOLoss(cfg))
    params, _, history = ppo_epoch(
        jit_train_step(step), params, tx.init(params), rows, minibatch_rows=minibatch_rows,
        microbatch_rows=microbatch_rows, capacity=capacity, rng=np.random.default_rng(0), pad_id=0,
        place=place_on_default_device,
    )
    return nnx.merge(graphdef, params), history


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_ppo_update_follows_the_advantage_sign(sign):
    model = init_model(CONFIG, seed=1)
    prompt, response = (1, 2, 3, 4), (20, 21, 2)
    start = _response_logprob(model, prompt, response)
    rows = _rows_with_current_logprobs(model, [(prompt, response)], [sign])
    trained, history = _epoch(model, rows, optax.adam(1e-2), PPOLossConfig(kl_coef=0.0, entropy_coef=0.0), 1, 1)
    moved = _response_logprob(trained, prompt, response) - start
    assert np.sign(moved) == sign and history[0]["grad_norm"] > 0


@pytest.mark.parametrize("capacity", [16, 8])  # 8: one row per sequence, three micro-batches of one
def test_microbatch_accumulation_equals_one_big_batch(capacity):
    pairs = [((1, 2, 3), (5 + i, 2)) for i in range(4)]
    advantages = [1.0, -0.5, 0.25, 2.0]
    results = []
    for micro in (8, 1):
        model = init_model(CONFIG, seed=2)
        rows = _rows_with_current_logprobs(model, pairs, advantages)
        trained, _ = _epoch(model, rows, optax.sgd(0.1), PPOLossConfig(), 4, micro, capacity)
        results.append(jax.tree.leaves(nnx.state(trained, nnx.Param)))
    for together, accumulated in zip(*results, strict=True):
        np.testing.assert_allclose(np.asarray(together), np.asarray(accumulated), atol=1e-6)


def test_reference_logprobs_of_packed_rows_are_each_rows_own():
    model = init_model(CONFIG, seed=3)
    pairs = [((1, 2, 3, 4), (5, 2)), ((7,), (8, 9, 2)), ((3, 3), (4,))]
    rows = _rows_with_current_logprobs(model, pairs, [1.0, -1.0, 0.5])
    for ids, ref, mask in zip(rows.tokens, rows.fields["ref_logprobs"], rows.fields["response_mask"], strict=True):
        alone = np.asarray(token_logprobs(model, jnp.asarray(ids[None, :-1]), jnp.asarray(ids[None, 1:])))[0]
        # the reference pass runs the LM head at the response positions only, the ones the loss reads
        np.testing.assert_allclose(ref[mask > 0], alone[mask > 0], atol=1e-5)
        assert not ref[mask == 0].any()

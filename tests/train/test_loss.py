"""PPO loss against a hand-computed case; zero advantage gives zero policy gradient."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from milegpo_jax.models.logprobs import logprobs_from_hidden
from milegpo_jax.train.loss import PPOLossConfig, kl_penalty, ppo_loss


def _case():
    old = jnp.log(jnp.array([[0.4, 0.5], [0.3, 0.6]]))
    new = old + jnp.log(jnp.array([[1.5, 1.0], [0.5, 1.0]]))  # ratios 1.5, 1, 0.5, (masked)
    entropy = jnp.array([[1.0, 2.0], [3.0, 9.0]])
    advantages = jnp.array([1.0, -2.0])
    mask = jnp.array([[1, 1], [1, 0]])
    return new, old, entropy, advantages, mask


def test_hand_computed_ppo_loss():
    new, old, entropy, advantages, mask = _case()
    loss, metrics = ppo_loss(new, old, new, entropy, advantages, mask, 3.0, PPOLossConfig())
    # token (0,0): ratio 1.5 > 1.2 with A=+1 -> clipped -1.2; (0,1): ratio 1 -> -1;
    # (1,0): ratio 0.5 < 0.8 with A=-2 -> max(1.0, 1.6) = 1.6; (1,1) masked. Token mean over 3 tokens.
    assert float(metrics["policy_loss"]) == pytest.approx((-1.2 - 1.0 + 1.6) / 3, abs=1e-6)
    assert float(metrics["entropy"]) == pytest.approx(2.0, abs=1e-6)
    assert float(metrics["kl"]) == pytest.approx(0.0, abs=1e-7)
    assert float(metrics["clip_fraction"]) == pytest.approx(2 / 3, abs=1e-6)
    assert float(metrics["ratio_min"]) == pytest.approx(0.5, abs=1e-6)
    assert float(metrics["ratio_max"]) == pytest.approx(1.5, abs=1e-6)
    assert float(loss) == pytest.approx(-0.2 - 0.001 * 2.0, abs=1e-6)


def test_clip_higher_widens_only_the_upper_bound():
    new, old, entropy, advantages, mask = _case()
    _, metrics = ppo_loss(new, old, new, entropy, advantages, mask, 3.0, PPOLossConfig(clip_high=0.6))
    # ratio 1.5 is now inside [0.8, 1.6]: -1.5 for token (0,0).
    assert float(metrics["policy_loss"]) == pytest.approx((-1.5 - 1.0 + 1.6) / 3, abs=1e-6)


def test_low_variance_kl_by_hand():
    value = kl_penalty(jnp.log(jnp.array([0.5])), jnp.log(jnp.array([0.25])), "low_var_kl")
    r = math.log(0.5)
    assert float(value[0]) == pytest.approx(math.exp(r) - r - 1, abs=1e-6)
    assert float(kl_penalty(jnp.array([0.0]), jnp.array([-100.0]), "low_var_kl")[0]) <= 10.0


def test_zero_advantage_gives_zero_policy_gradient():
    new, old, entropy, _, mask = _case()
    cfg = PPOLossConfig(kl_coef=0.0, entropy_coef=0.0)
    grad = jax.grad(lambda lp: ppo_loss(lp, old, lp, entropy, jnp.zeros(2), mask, 3.0, cfg)[0])(new)
    np.testing.assert_array_equal(np.asarray(grad), 0.0)
    # ...and a non-zero advantage does move unclipped tokens.
    grad = jax.grad(lambda lp: ppo_loss(lp, old, lp, entropy, jnp.array([1.0, 1.0]), mask, 3.0, cfg)[0])(new)
    assert float(jnp.abs(grad[0, 1])) > 0


def test_chunked_logprobs_and_entropy_match_the_full_softmax():
    key = jax.random.key(0)
    hidden = jax.random.normal(key, (2, 7, 16))
    weight = jax.random.normal(jax.random.key(1), (50, 16))
    targets = jax.random.randint(jax.random.key(2), (2, 7), 0, 50)
    logits = jnp.einsum("btd,vd->btv", hidden, weight)
    log_probs = jax.nn.log_softmax(logits, -1)
    want_lp = jnp.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    want_ent = -jnp.sum(jnp.exp(log_probs) * log_probs, -1)
    for chunk in (None, 3):
        lp, ent = logprobs_from_hidden(hidden, weight, targets, tied=True, chunk_size=chunk, with_entropy=True)
        np.testing.assert_allclose(lp, want_lp, atol=1e-5)
        np.testing.assert_allclose(ent, want_ent, atol=1e-5)

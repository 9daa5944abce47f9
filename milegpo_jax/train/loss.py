"""Token-level PPO-clip with a KL penalty to the reference policy and an entropy bonus (verl-agent's
actor loss, docs/credit.md §7): pure functions over ``[B, L]`` response-token arrays.

Every step row's scalar advantage is broadcast over its response tokens. Aggregation is token-mean:
each term is summed over the response tokens and divided by ``token_count``, the number of response
tokens of the whole mini-batch, so gradient accumulation over micro-batches gives exactly the
mini-batch token mean.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# the loss's options, jax-free so that the training config derives its ppo section from them
from milegpo_jax.train.options import KL_ESTIMATORS, PPOLossConfig


def kl_penalty(logprobs: jax.Array, ref_logprobs: jax.Array, estimator: str) -> jax.Array:
    """Per-token KL(π || π_ref) estimate from sampled tokens.

    ``low_var_kl`` is Schulman's k3, exp(r) - r - 1 with r = log π_ref - log π, non-negative and
    unbiased; clamped to [-10, 10] as verl does, so one extreme token cannot dominate the batch.
    """
    log_ratio = ref_logprobs - logprobs
    if estimator == "low_var_kl":
        log_ratio = jnp.clip(log_ratio, -20.0, 20.0)
        return jnp.clip(jnp.exp(log_ratio) - log_ratio - 1.0, -10.0, 10.0)
    if estimator == "kl":
        return -log_ratio
    return 0.5 * log_ratio**2


def ppo_loss(
    logprobs: jax.Array,
    old_logprobs: jax.Array,
    ref_logprobs: jax.Array,
    entropy: jax.Array,
    advantages: jax.Array,
    response_mask: jax.Array,
    token_count: jax.Array | float,
    cfg: PPOLossConfig,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The PPO objective of one micro-batch and its diagnostics.

    logprobs / old_logprobs / ref_logprobs / entropy / response_mask: ``[B, L]`` per response token
    (current policy, behaviour policy at sampling time, frozen reference policy); advantages ``[B]``
    per step row, or ``[B, L]`` per token (packed rows carry each row's advantage on its tokens).
    Returns (loss, metrics); sums are divided by ``token_count``.
    """
    mask = response_mask.astype(jnp.float32)
    advantage = (advantages if advantages.ndim == 2 else advantages[:, None]).astype(jnp.float32)
    log_ratio = logprobs - old_logprobs
    ratio = jnp.exp(log_ratio)
    clipped_ratio = jnp.clip(ratio, 1.0 - cfg.clip_low, 1.0 + cfg.clip_high)
    unclipped_loss = -advantage * ratio
    clipped_loss = -advantage * clipped_ratio
    policy_loss = jnp.maximum(unclipped_loss, clipped_loss)
    kl = kl_penalty(logprobs, ref_logprobs, cfg.kl_estimator)

    def token_mean(x):
        return jnp.sum(x * mask) / token_count

    loss = token_mean(policy_loss) + cfg.kl_coef * token_mean(kl) - cfg.entropy_coef * token_mean(entropy)
    big = jnp.finfo(jnp.float32).max
    metrics = {
        "policy_loss": token_mean(policy_loss),
        "kl": token_mean(kl),
        "entropy": token_mean(entropy),
        "clip_fraction": token_mean((clipped_loss > unclipped_loss).astype(jnp.float32)),
        "approx_kl_behaviour": token_mean(0.5 * log_ratio**2),
        "ratio_min": jnp.min(jnp.where(mask > 0, ratio, big)),
        "ratio_max": jnp.max(jnp.where(mask > 0, ratio, -big)),
        "logprob_gap": token_mean(jnp.abs(log_ratio)),  # trainer vs sampler log-prob disagreement
    }
    return loss, metrics


__all__ = ["KL_ESTIMATORS", "PPOLossConfig", "kl_penalty", "ppo_loss"]

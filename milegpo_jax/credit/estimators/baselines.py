"""GRPO, GiGPO and GraphGPO (docs/credit.md §2-4): one group's [K, T] rows -> its terms, incl. "advantage"."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from milegpo_jax.credit.batch import CreditBatch
from milegpo_jax.credit.config import CreditConfig
from milegpo_jax.credit.estimators.terms import (
    anchor_normalize,
    discounted_returns,
    episode_advantage,
    graph_return,
    invalid_penalty,
    return_distances,
    sink_distances,
)


def grpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    adv_episode = episode_advantage(b, cfg)
    return {"adv_episode": adv_episode, "advantage": adv_episode}



def gigpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    step_return = discounted_returns(b, cfg.gamma)  # the penalty -p comes after
    penalty = invalid_penalty(b, cfg)
    adv_step = anchor_normalize(step_return, penalty, b, cfg)
    adv_episode = episode_advantage(b, cfg)
    return {
        "step_return": jnp.where(b.step_mask, step_return - penalty, 0.0),
        "adv_episode": adv_episode,
        "adv_step": adv_step,
        "advantage": cfg.episode_weight * adv_episode + cfg.step_weight * adv_step,
    }


def graphgpo_group(b: CreditBatch, cfg: CreditConfig) -> dict[str, jax.Array]:
    distance = return_distances(sink_distances(b), b.node_mask, cfg)
    step_reward = graph_return(b, distance, cfg.graph_gamma, cfg)
    penalty = invalid_penalty(b, cfg)
    adv_graph = anchor_normalize(step_reward, penalty, b, cfg)
    adv_episode = episode_advantage(b, cfg)
    return {
        "step_reward": jnp.where(b.step_mask, step_reward - penalty, 0.0),
        "adv_graph": adv_graph,
        "adv_episode": adv_episode,
        "advantage": cfg.step_weight * adv_graph + cfg.episode_weight * adv_episode,
    }


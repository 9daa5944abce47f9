"""The optax optimizer of an ``OptimizerConfig`` (the config's ``optim`` section): global-norm clipping, then AdamW.

The learning rate counts optimizer updates (one per PPO mini-batch): an optional linear warmup from
0 over ``warmup_steps``, then constant, or a cosine / linear decay over ``decay_steps`` to
``end_lr_ratio * learning_rate``. The paper's recipe is constant 1e-6 with clip 1.0 (docs/credit.md §7).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from milegpo_jax.train.options import OptimizerConfig


def learning_rate_schedule(optim: OptimizerConfig) -> optax.Schedule:
    peak = optim.learning_rate
    end = peak * optim.end_lr_ratio
    if optim.schedule == "constant":
        after_warmup = optax.constant_schedule(peak)
    elif optim.schedule == "cosine":
        after_warmup = optax.cosine_decay_schedule(peak, optim.decay_steps, alpha=optim.end_lr_ratio)
    elif optim.schedule == "linear":
        after_warmup = optax.linear_schedule(peak, end, optim.decay_steps)
    else:  # OptimizerConfig validates the name; this is a schema/implementation mismatch
        raise ValueError(f"unknown schedule {optim.schedule!r}")
    if optim.warmup_steps == 0:
        return after_warmup
    warmup = optax.linear_schedule(0.0, peak, optim.warmup_steps)
    return optax.join_schedules([warmup, after_warmup], boundaries=[optim.warmup_steps])


def _path_keys(path) -> list:
    return [getattr(entry, "key", getattr(entry, "name", getattr(entry, "idx", None))) for entry in path]


def trainable_scale(params, trainable_layers: int):
    """A pytree like ``params`` (an NNX state) of 1.0 where a weight trains and 0.0 where it is frozen:
    with ``trainable_layers`` N > 0 only the top N decoder layers and the final norm train (the
    embedding, and so a tied LM head, is frozen). Stacked (scanned) layers get a ``[layers, 1, ...]``
    scale. 0: everything trains."""
    leaves = jax.tree_util.tree_leaves_with_path(params)
    listed = [keys[1] for keys in map(_path_keys, (p for p, _ in leaves)) if keys[0] == "layers" and isinstance(keys[1], int)]

    def scale(path, leaf):
        keys = _path_keys(path)
        if trainable_layers == 0 or keys[0] == "final_norm":
            return jnp.ones((), leaf.dtype)
        if keys[0] != "layers":
            return jnp.zeros((), leaf.dtype)
        if isinstance(keys[1], int):  # one module per layer
            return jnp.asarray(keys[1] >= max(listed) + 1 - trainable_layers, leaf.dtype)
        layers = leaf.shape[0]  # stacked: the leading axis is the layer
        per_layer = jnp.arange(layers) >= layers - trainable_layers
        return per_layer.astype(leaf.dtype).reshape((layers,) + (1,) * (leaf.ndim - 1))

    return jax.tree_util.tree_map_with_path(scale, params)


def keep_trainable(trainable_layers: int) -> optax.GradientTransformation:
    """Zeroes the updates of frozen weights (``trainable_scale``), so neither AdamW's step nor its
    weight decay moves them."""

    def update(updates, state, params=None):
        del params
        return jax.tree.map(jnp.multiply, updates, trainable_scale(updates, trainable_layers)), state

    return optax.GradientTransformation(lambda _: optax.EmptyState(), update)


def make_optimizer(optim: OptimizerConfig) -> optax.GradientTransformation:
    """``clip_by_global_norm(grad_clip_norm)`` (skipped when 0) then AdamW with the schedule; with
    ``trainable_layers`` > 0 the frozen weights' updates are zeroed last."""
    adamw = optax.adamw(
        learning_rate_schedule(optim),
        b1=optim.adam_b1,
        b2=optim.adam_b2,
        eps=optim.adam_eps,
        weight_decay=optim.weight_decay,
    )
    parts = [optax.clip_by_global_norm(optim.grad_clip_norm)] if optim.grad_clip_norm > 0 else []
    parts.append(adamw)
    if optim.trainable_layers:
        parts.append(keep_trainable(optim.trainable_layers))
    return optax.chain(*parts)

"""The optax optimizer of a ``TrainConfig.optim`` section: global-norm clipping, then AdamW.

The learning rate counts optimizer updates (one per PPO mini-batch): an optional linear warmup from
0 over ``warmup_steps``, then constant, or a cosine / linear decay over ``decay_steps`` to
``end_lr_ratio * learning_rate``. The paper's recipe is constant 1e-6 with clip 1.0 (docs/credit.md §7).
"""

from __future__ import annotations

import optax

from milegpo_jax.config import OptimSection


def learning_rate_schedule(optim: OptimSection) -> optax.Schedule:
    peak = optim.learning_rate
    end = peak * optim.end_lr_ratio
    if optim.schedule == "constant":
        after_warmup = optax.constant_schedule(peak)
    elif optim.schedule == "cosine":
        after_warmup = optax.cosine_decay_schedule(peak, optim.decay_steps, alpha=optim.end_lr_ratio)
    elif optim.schedule == "linear":
        after_warmup = optax.linear_schedule(peak, end, optim.decay_steps)
    else:  # OptimSection validates the name; this is a schema/implementation mismatch
        raise ValueError(f"unknown schedule {optim.schedule!r}")
    if optim.warmup_steps == 0:
        return after_warmup
    warmup = optax.linear_schedule(0.0, peak, optim.warmup_steps)
    return optax.join_schedules([warmup, after_warmup], boundaries=[optim.warmup_steps])


def make_optimizer(optim: OptimSection) -> optax.GradientTransformation:
    """``clip_by_global_norm(grad_clip_norm)`` (skipped when 0) then AdamW with the schedule."""
    adamw = optax.adamw(
        learning_rate_schedule(optim),
        b1=optim.adam_b1,
        b2=optim.adam_b2,
        eps=optim.adam_eps,
        weight_decay=optim.weight_decay,
    )
    if optim.grad_clip_norm > 0:
        return optax.chain(optax.clip_by_global_norm(optim.grad_clip_norm), adamw)
    return optax.chain(adamw)

"""The train package's option objects, without jax: the PPO loss's (``PPOLossConfig``) and the
optimizer's (``OptimizerConfig``). The training config's ``ppo`` and ``optim`` sections are derived
from them (``milegpo_jax.config.sections``, docs/training.md §1), so each field is declared and
checked here, once; the trainer builds them from the config and passes them down.
"""

from __future__ import annotations

import dataclasses

# the estimators train/loss.py's kl_penalty implements
KL_ESTIMATORS = ("low_var_kl", "kl", "mse")
LR_SCHEDULES = ("constant", "cosine", "linear")


def _check(ok: bool, name: str, value, rule: str) -> None:
    if not ok:  # "name=value: rule", the form the config prefixes with its section
        raise ValueError(f"{name}={value!r}: {rule}")


@dataclasses.dataclass(frozen=True)
class PPOLossConfig:
    """Token-level PPO-clip with KL to the reference policy and an entropy bonus (train/loss.py)."""

    clip_low: float = 0.2  # ratio floor 1 - clip_low
    clip_high: float = 0.2  # ratio ceiling 1 + clip_high ("clip-higher" when larger than clip_low)
    kl_coef: float = 0.01  # 0: no KL term (and no reference forward pass)
    kl_estimator: str = "low_var_kl"
    entropy_coef: float = 0.001

    def __post_init__(self):
        _check(0.0 < self.clip_low < 1.0, "clip_low", self.clip_low, "must lie in (0, 1)")
        _check(self.clip_high > 0, "clip_high", self.clip_high, "must be > 0")
        _check(self.kl_coef >= 0, "kl_coef", self.kl_coef, "must be >= 0")
        _check(self.kl_estimator in KL_ESTIMATORS, "kl_estimator", self.kl_estimator,
               f"must be one of {', '.join(KL_ESTIMATORS)}")
        _check(self.entropy_coef >= 0, "entropy_coef", self.entropy_coef, "must be >= 0")


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """AdamW with global-norm clipping and a learning-rate schedule (``train.optim.make_optimizer``)."""

    learning_rate: float = 1e-6
    weight_decay: float = 0.01
    grad_clip_norm: float = 1.0  # 0: no clipping
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-8
    schedule: str = "constant"  # constant | cosine | linear (decay after warmup)
    warmup_steps: int = 0  # optimizer updates of linear warmup from 0
    decay_steps: int = 0  # cosine/linear: updates from the end of warmup to the end of decay
    end_lr_ratio: float = 0.0  # cosine/linear: final learning rate / learning_rate
    # RL updates train only the top N decoder layers and the final norm (embedding and a tied LM head
    # frozen; no backward pass below them: docs/training.md §2); 0: every weight
    trainable_layers: int = 0

    def __post_init__(self):
        _check(self.learning_rate > 0, "learning_rate", self.learning_rate, "must be > 0")
        for name in ("weight_decay", "grad_clip_norm", "trainable_layers", "warmup_steps", "decay_steps"):
            _check(getattr(self, name) >= 0, name, getattr(self, name), "must be >= 0")
        for name in ("adam_b1", "adam_b2"):
            _check(0.0 <= getattr(self, name) < 1.0, name, getattr(self, name), "must lie in [0, 1)")
        _check(self.adam_eps > 0, "adam_eps", self.adam_eps, "must be > 0")
        _check(self.schedule in LR_SCHEDULES, "schedule", self.schedule, f"must be one of {', '.join(LR_SCHEDULES)}")
        _check(self.schedule == "constant" or self.decay_steps >= 1, "decay_steps", self.decay_steps,
               f"schedule {self.schedule!r} needs decay_steps >= 1")
        _check(0.0 <= self.end_lr_ratio <= 1.0, "end_lr_ratio", self.end_lr_ratio, "must lie in [0, 1]")


__all__ = ["KL_ESTIMATORS", "LR_SCHEDULES", "OptimizerConfig", "PPOLossConfig"]

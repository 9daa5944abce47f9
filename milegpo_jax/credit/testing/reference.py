"""The plain-Python reference over every estimator: the oracle the jnp estimators are tested against
and the baseline of ``experiments/bench/credit.py``.

The maths is in ``reference_baselines.py`` (GRPO, GiGPO, GraphGPO and the shared building blocks),
``reference_milegpo.py`` (docs/credit.md §5) and ``reference_family.py`` (docs/credit-family.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from milegpo_jax.credit.config import CreditConfig
from milegpo_jax.credit.rollouts import Group
from milegpo_jax.credit.testing.reference_baselines import gigpo_details, graphgpo_details, grpo_details
from milegpo_jax.credit.testing.reference_family import FAMILY_DETAILS, family_advantages, family_details
from milegpo_jax.credit.testing.reference_milegpo import milegpo_details

DETAILS = {
    "grpo": grpo_details,
    "gigpo": gigpo_details,
    "graphgpo": graphgpo_details,
    "milegpo": milegpo_details,
}


def estimator_details(group: Group, cfg: CreditConfig) -> dict:
    """The per-row details of ``cfg.estimator`` for one group; every row dict has "advantage"."""
    if cfg.estimator in DETAILS:
        return DETAILS[cfg.estimator](group, cfg)
    return family_details(group, cfg)


def advantages_and_ema(
    groups: Sequence[Group], cfg: CreditConfig, ema_prev: float = 0.0
) -> tuple[list[list[list[float]]], float]:
    """(advantages per group, per trajectory, per step; MVPO's updated success EMA, else ``ema_prev``)."""
    if cfg.estimator in DETAILS:
        details = [DETAILS[cfg.estimator](group, cfg) for group in groups]
        return [[[row["advantage"] for row in traj] for traj in d["rows"]] for d in details], ema_prev
    return family_advantages(groups, cfg, ema_prev)


def compute_advantages(groups: Sequence[Group], cfg: CreditConfig, ema_prev: float = 0.0) -> list[list[list[float]]]:
    """Advantages per group, per trajectory, per step for ``cfg.estimator`` (``ema_prev``: MVPO's EMA)."""
    return advantages_and_ema(groups, cfg, ema_prev)[0]

"""The plain-Python reference over every estimator: the oracle the jnp estimators are tested against
and the baseline of ``experiments/bench/credit.py``.

Which function is each estimator's reference is its ``EstimatorSpec.reference`` (``credit/registry.py``).
The maths is in ``reference_baselines.py`` (GRPO, GiGPO, GraphGPO and the shared building blocks),
``reference_milegpo.py`` (docs/credit.md §5) and ``reference_family.py`` (docs/credit-family.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from milegpo_jax.credit import registry
from milegpo_jax.credit.config import CreditConfig
from milegpo_jax.credit.rollouts import Group
from milegpo_jax.credit.testing.reference_milegpo import milegpo_details  # noqa: F401 (tests call it from here)

# Every reference, imported once here, as credit/estimators/run.py does with the programs.
REFERENCES = {spec.name: registry.load(spec.reference) for spec in registry.SPECS}


def estimator_details(group: Group, cfg: CreditConfig) -> dict:
    """The per-row details of ``cfg.estimator`` for one group; every row dict has "advantage"."""
    spec, details = registry.spec_of(cfg.estimator), REFERENCES[cfg.estimator]
    if spec.level == "batch":  # the group as a batch of one, from MVPO's initial EMA
        return details([group], cfg, 0.0)[0][0]
    return details(group, cfg)


def advantages_and_ema(
    groups: Sequence[Group], cfg: CreditConfig, ema_prev: float = 0.0
) -> tuple[list[list[list[float]]], float]:
    """(advantages per group, per trajectory, per step; MVPO's updated success EMA, else ``ema_prev``)."""
    spec, details = registry.spec_of(cfg.estimator), REFERENCES[cfg.estimator]
    if spec.level == "batch":
        per_group, ema_prev = details(groups, cfg, ema_prev)
    else:
        per_group = [details(group, cfg) for group in groups]
    return [[[row["advantage"] for row in traj] for traj in d["rows"]] for d in per_group], ema_prev


def compute_advantages(groups: Sequence[Group], cfg: CreditConfig, ema_prev: float = 0.0) -> list[list[list[float]]]:
    """Advantages per group, per trajectory, per step for ``cfg.estimator`` (``ema_prev``: MVPO's EMA)."""
    return advantages_and_ema(groups, cfg, ema_prev)[0]

"""The credit estimators' programs and how they run (docs/credit-implementation.md §4 lists what goes where).

``terms.py`` holds the terms they share, ``baselines.py`` GRPO / GiGPO / GraphGPO, ``milegpo.py``
MileGPO, ``family.py`` the estimators of docs/credit-family.md; ``run.py`` jits and dispatches them as
their ``EstimatorSpec`` in ``credit/registry.py`` says. This package exports the entry points.
"""

from milegpo_jax.credit.estimators.milegpo import MileGPOTerms
from milegpo_jax.credit.estimators.run import (
    advantages_and_ema,
    estimate_advantages,
    estimator_terms,
    milegpo_terms,
)
from milegpo_jax.credit.registry import NAMES, host_parts

__all__ = [
    "MileGPOTerms",
    "advantages_and_ema",
    "host_parts",
    "estimate_advantages",
    "estimator_terms",
    "milegpo_terms",
    "registered_estimators",
]


def registered_estimators() -> tuple[str, ...]:
    """Every estimator's name, in the registry's order."""
    return NAMES

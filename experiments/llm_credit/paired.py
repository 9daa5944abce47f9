"""Paired statistics of held-out outcomes (pure): the same ordered task list played by two policies
(before and after training, or two arms from one warm start), so task i of one is paired with task i
of the other (docs/results/llm-credit.md, "Evaluation").

* ``mcnemar_exact``: the exact two-sided McNemar test. Only discordant tasks carry information: ``b``
  won by the first and lost by the second, ``c`` the reverse; under "no difference" ``b`` is
  Binomial(b + c, 1/2), and p = min(1, 2 P(X <= min(b, c))).
* ``paired_bootstrap``: the difference in success (second minus first) with a percentile interval
  from resampling the pairs (tasks) with replacement; the pairing is kept because a whole pair is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np


def _pairs(first: Sequence[bool], second: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(first, dtype=bool), np.asarray(second, dtype=bool)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(f"paired outcomes need two equal, non-empty lists; got {a.shape} and {b.shape}")
    return a, b


def mcnemar_exact(first: Sequence[bool], second: Sequence[bool]) -> dict[str, float | int]:
    """``{"b", "c", "p"}``: tasks only the first won, only the second won, and the exact two-sided p."""
    a, s = _pairs(first, second)
    b, c = int(np.count_nonzero(a & ~s)), int(np.count_nonzero(~a & s))
    n, k = b + c, min(b, c)
    if n == 0:
        return {"b": b, "c": c, "p": 1.0}
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n  # exact: integers, then one division
    return {"b": b, "c": c, "p": min(1.0, 2 * tail)}


def paired_bootstrap(first: Sequence[bool], second: Sequence[bool], *, rounds: int = 10_000,
                     level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """``{"difference", "low", "high"}``: mean(second) - mean(first) and its percentile interval at
    ``level`` over ``rounds`` resamples of the task pairs (``seed`` fixes them, so a table rebuilds
    to the same digits)."""
    a, s = _pairs(first, second)
    if rounds < 1 or not 0 < level < 1:
        raise ValueError(f"rounds={rounds}, level={level}: need rounds >= 1 and 0 < level < 1")
    differences = s.astype(np.float64) - a.astype(np.float64)
    draws = np.random.default_rng(seed).integers(0, differences.size, size=(rounds, differences.size))
    means = differences[draws].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return {"difference": float(differences.mean()), "low": float(low), "high": float(high)}


def mcnemar_detectable(discordant: float, pairs: int, *, alpha: float, power: float = 0.8) -> float:
    """The smallest difference in success that McNemar's test at two-sided ``alpha`` detects with
    ``power`` over ``pairs`` pairs of which a share ``discordant`` disagree. Normal approximation: the
    difference (c - b) / pairs has variance about discordant / pairs under "no difference", so it is
    (z[1 - alpha/2] + z[power]) * sqrt(discordant / pairs)."""
    if pairs < 1 or not 0 <= discordant <= 1 or not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"discordant={discordant}, pairs={pairs}, alpha={alpha}, power={power}: out of range")
    z = NormalDist().inv_cdf
    return (z(1 - alpha / 2) + z(power)) * math.sqrt(discordant / pairs)


def success_auc(curve: Sequence[float]) -> float:
    """Training-success AUC: the mean of the per-iteration success rates (in [0, 1], as the arena's)."""
    if not curve:
        raise ValueError("an AUC needs at least one iteration")
    return float(np.mean(np.asarray(curve, dtype=np.float64)))

"""How many evaluation seeds a claim needs (pure maths), for the design of a study before its runs.

A claim is resolved when its interval at the family's level (two-sided, confidence 1 - level)
excludes 0 or lies within ±margin. Per game the test is the paired t test over n seeds; pooled over
games it is the stratified t test (family.stratified_t: each game its own spread, Welch df).

* ``detect_power``: the chance that the interval excludes 0 when the true difference is ``delta``
  (noncentral t, both tails);
* ``equivalence_power``: the chance that it lies within ±margin when the true difference is 0, by
  the lower bound P(above -margin) + P(below +margin) - 1 (so the sizes err towards more seeds);
* ``seeds_needed``: the smallest n per game with both chances >= ``power``;
* ``planning_sd``: a spread measured on few seeds, raised to its one-sided upper confidence bound,
  so a lucky small spread does not undersize the study.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats as scipy_stats

MAX_SEEDS = 10_000


def _se_df(sds: Sequence[float], n: int) -> tuple[float, float]:
    """Standard error and Welch-Satterthwaite df of the mean over games of per-game means of n seeds."""
    games = len(sds)
    terms = [sd**2 / n / games**2 for sd in sds]
    variance = sum(terms)
    df = variance**2 / sum(t**2 / (n - 1) for t in terms) if variance > 0 else games * (n - 1)
    return math.sqrt(variance), df


def detect_power(sds: Sequence[float], n: int, delta: float, level: float) -> float:
    """P(the two-sided interval at confidence 1 - level excludes 0 | true difference delta)."""
    se, df = _se_df(sds, n)
    if se == 0.0:
        return 1.0
    critical = float(scipy_stats.t.ppf(1 - level / 2, df))
    shift = abs(delta) / se
    return float(scipy_stats.nct.sf(critical, df, shift) + scipy_stats.nct.cdf(-critical, df, shift))


def equivalence_power(sds: Sequence[float], n: int, margin: float, level: float) -> float:
    """Lower bound on P(the interval lies within ±margin | true difference 0): each side's one-sided
    test at level/2 has the chance P(T' > t crit) with T' noncentral at margin / se; both hold with at
    least twice that minus 1."""
    se, df = _se_df(sds, n)
    if se == 0.0:
        return 1.0
    critical = float(scipy_stats.t.ppf(1 - level / 2, df))
    one_side = float(scipy_stats.nct.sf(critical, df, margin / se))
    return max(0.0, 2 * one_side - 1)


def seeds_needed(sds: Sequence[float], delta: float, level: float, power: float = 0.8) -> int:
    """Smallest seeds per game (>= 2) with detect_power(delta) and equivalence_power(delta) >= power:
    a true difference of delta is found, and a true 0 is shown within ±delta."""
    if delta <= 0 or not sds:
        raise ValueError("seeds_needed takes delta > 0 and at least one game")
    for n in range(2, MAX_SEEDS + 1):
        if detect_power(sds, n, delta, level) >= power and equivalence_power(sds, n, delta, level) >= power:
            return n
    raise ValueError(f"more than {MAX_SEEDS} seeds per game")


def planning_sd(sd: float, seeds: int, confidence: float = 0.8) -> float:
    """The upper one-sided ``confidence`` bound of a standard deviation measured on ``seeds`` seeds:
    sd * sqrt((seeds - 1) / chi2 quantile at 1 - confidence)."""
    if seeds < 2:
        raise ValueError("a spread needs >= 2 seeds")
    return sd * math.sqrt((seeds - 1) / float(scipy_stats.chi2.ppf(1 - confidence, seeds - 1)))

"""Summary statistics of arena curves (pure): per-run scores, mean ± std over seeds, paired intervals.

* ``last``: success rate of the last iteration's training rollouts;
* ``auc``: area under the success curve, as the mean over iterations (so it lies in [0, 1]);
* ``iters_to_50`` / ``iters_to_80``: first iteration whose success rate reaches the level (None if
  never; the mean is over the runs that reached it, ``reached`` counts them);
* paired comparison: per seed, contestant minus reference (GiGPO) on ``auc`` and ``last``; the mean
  difference with a two-sided 95 % Student-t interval over seeds;
* a family of claims (``claim_family``): paired AUC differences, every interval at the Bonferroni
  level alpha/m so the verdicts read off the intervals agree with the correction, against an
  equivalence margin fixed before the runs (``judge_claims``, docs/arena.md); Holm's adjusted p beside.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from scipy import stats as scipy_stats

LEVELS = (0.5, 0.8)


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score 95 % interval of a binomial proportion (sensible at 0 and at few trials)."""
    if trials < 1:
        raise ValueError("a proportion needs >= 1 trial")
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_t(differences: Sequence[float], level: float) -> dict[str, float]:
    """Two-sided paired t test of mean 0 and the mean's two-sided interval at confidence ``1 - level``.

    Needs two or more differences. Identical differences (s.d. 0) give a point interval and p = 1
    when they are 0, else p = 0.
    """
    n = len(differences)
    if n < 2:
        raise ValueError(f"a paired t test needs >= 2 seeds, got {n}")
    mean, std = mean_std(differences)
    error = std / math.sqrt(n)
    if error == 0.0:
        return {"mean": mean, "low": mean, "high": mean, "p": 1.0 if mean == 0 else 0.0}
    half = float(scipy_stats.t.ppf(1 - level / 2, n - 1)) * error
    p = 2 * float(scipy_stats.t.sf(abs(mean) / error, n - 1))
    return {"mean": mean, "low": mean - half, "high": mean + half, "p": p}


def holm_levels(p_values: Sequence[float], alpha: float = 0.05) -> tuple[list[float], list[float]]:
    """Holm's step-down procedure: per hypothesis (input order) the adjusted p value
    ``max_{j <= rank} min(1, (m - j + 1) p_(j))`` and the level ``alpha / (m - rank + 1)`` its own
    test and interval use (rank 1 = the smallest p). A hypothesis is rejected iff its adjusted p < alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, levels = [0.0] * m, [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
        levels[index] = alpha / (m - rank)
    return adjusted, levels


VERDICTS = ("supported", "refuted", "equivalent", "unresolved")


def verdict(low: float, high: float, mean: float, rejected: bool, margin: float) -> str:
    """One claim "A is better than B" from the corrected interval of A - B:

    * ``equivalent``: the whole interval lies within [-margin, +margin] (a difference too small to
      matter, whichever sign and whether or not it is significant);
    * ``supported`` / ``refuted``: Holm rejects "no difference" and the mean is > 0 / < 0;
    * ``unresolved``: neither (the seeds cannot tell).
    """
    if -margin <= low and high <= margin:
        return "equivalent"
    if rejected:
        return "supported" if mean > 0 else "refuted"
    return "unresolved"


# The paper's chain of claims, each "A beats B": MileGPO full >= w/o PCC >= w/o PCC and RCS >= GraphGPO >= GiGPO.
PAPER_CHAIN = (("milegpo:full", "milegpo:rcs"), ("milegpo:rcs", "milegpo:md"), ("milegpo:md", "graphgpo"), ("graphgpo", "gigpo"))


def claim_family(names: Sequence[str], best_outsider: str | None) -> list[tuple[str, str]]:
    """The comparisons judged together: the links of PAPER_CHAIN whose two contestants ran, and MileGPO
    full against ``best_outsider`` (the best contestant outside the paper's six, chosen before scoring)."""
    pairs = [pair for pair in PAPER_CHAIN if set(pair) <= set(names)]
    if best_outsider is not None and "milegpo:full" in names:
        pairs.append(("milegpo:full", best_outsider))
    return pairs


def judge_claims(
    scores: Mapping[str, Mapping[int, float]], pairs: Sequence[tuple[str, str]], margin: float, alpha: float = 0.05
) -> list[dict]:
    """Per pair (A, B): the paired differences A - B over their common seeds, each interval at the
    Bonferroni level alpha/m (simultaneous coverage >= 1 - alpha), and the verdict read off it: it
    excludes 0 exactly when the Bonferroni-adjusted p is < alpha. Holm's adjusted p is kept beside
    (never larger; the earlier design's test). ``scores``: name -> seed -> AUC."""
    rows = []
    for better, worse in pairs:
        seeds = sorted(set(scores[better]) & set(scores[worse]))
        differences = [scores[better][s] - scores[worse][s] for s in seeds]
        rows.append({"claim": f"{better} > {worse}", "a": better, "b": worse, "seeds": len(seeds),
                     "p": paired_t(differences, alpha)["p"], "differences": differences})
    adjusted, _ = holm_levels([row["p"] for row in rows], alpha)
    level = alpha / len(rows) if rows else alpha
    for row, p_holm in zip(rows, adjusted):
        test = paired_t(row.pop("differences"), level)
        p_bonferroni = min(1.0, len(rows) * row["p"])
        row.update(mean=test["mean"], low=test["low"], high=test["high"], p_holm=p_holm, p_bonferroni=p_bonferroni,
                   level=level, verdict=verdict(test["low"], test["high"], test["mean"], p_bonferroni < alpha, margin))
    return rows


def iterations_to(curve: Sequence[float], level: float) -> int | None:
    return next((i for i, value in enumerate(curve, 1) if value >= level), None)


def run_scores(curve: Sequence[float], greedy: Sequence[float]) -> dict[str, float | int | None]:
    if not curve:
        raise ValueError("an empty success curve")
    scores: dict[str, float | int | None] = {"last": curve[-1], "auc": sum(curve) / len(curve), "greedy_last": greedy[-1]}
    for level in LEVELS:
        scores[f"iters_to_{round(level * 100)}"] = iterations_to(curve, level)
    return scores


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return mean, std


def paired_interval(differences: Sequence[float]) -> dict[str, float | None]:
    """Mean of per-seed differences and its 95 % t interval (None bounds with a single seed)."""
    mean, std = mean_std(differences)
    n = len(differences)
    if n < 2:
        return {"mean": mean, "low": None, "high": None}
    half = float(scipy_stats.t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half}


def contestant_summary(per_seed: Mapping[int, Mapping[str, float | int | None]]) -> dict:
    """Mean ± std over seeds of every score (threshold iterations over the runs that reached them)."""
    summary: dict = {"seeds": len(per_seed)}
    for name in next(iter(per_seed.values())):
        values = [scores[name] for scores in per_seed.values() if scores[name] is not None]
        entry = dict(zip(("mean", "std"), mean_std(values))) if values else {"mean": None, "std": None}
        if name.startswith("iters_to_"):
            entry["reached"] = len(values)
        summary[name] = entry
    return summary


def paired_against(per_seed: Mapping[int, Mapping], reference: Mapping[int, Mapping]) -> dict:
    seeds = sorted(set(per_seed) & set(reference))
    if not seeds:
        return {}
    return {
        name: paired_interval([per_seed[s][name] - reference[s][name] for s in seeds]) | {"seeds": len(seeds)}
        for name in ("auc", "last")
    }


def band(curves: Sequence[Sequence[float]]) -> tuple[list[float], list[float]]:
    """Per-iteration mean and standard error over runs (curves of equal length)."""
    means, errors = [], []
    for values in zip(*curves):
        mean, std = mean_std(values)
        means.append(mean)
        errors.append(std / math.sqrt(len(values)))
    return means, errors


CREDIT_PREFIX = "credit/"
# ratio -> the count it is a share of, for the pooled (count-weighted) rate over a run's batches
POOLED = {"tie_correction_rate": "opposite_outcome_tied_pairs", "tie_share": "same_state_action_pairs"}


def diagnostics_means(records: Sequence[Mapping]) -> dict[str, float | None]:
    """Each ``credit/*`` value's mean over the iteration records that define it (None: never), plus
    ``pooled_<ratio>`` for the ratios of ``POOLED``: over all batches' pairs together, so an
    iteration with two tied pairs weighs less than one with two hundred."""
    values: dict[str, list[float]] = {}
    for record in records:
        for key, value in record.items():
            if key.startswith(CREDIT_PREFIX) and isinstance(value, (int, float)):
                values.setdefault(key[len(CREDIT_PREFIX):], []).append(float(value))
    means: dict[str, float | None] = {key: sum(v) / len(v) for key, v in sorted(values.items())}
    for ratio, count in POOLED.items():
        pairs = [(r[CREDIT_PREFIX + ratio], r[CREDIT_PREFIX + count]) for r in records
                 if isinstance(r.get(CREDIT_PREFIX + ratio), (int, float)) and r.get(CREDIT_PREFIX + count)]
        total = sum(n for _, n in pairs)
        means[f"pooled_{ratio}"] = sum(rate * n for rate, n in pairs) / total if total else None
    return means

"""Claims read together across settings (pure maths): the pooled (stratified) test of one claim over
several games, each game's scale, the shared option of a matched-rate comparison and the family-wide
Bonferroni judgement (docs/arena.md, "Reading several studies together").

* **Scale of a game**: GiGPO's learning gain on the selection seeds, its AUC minus its first
  iteration's success (the uniform policy's, as a fresh table is uniform), at its chosen option. It is
  measured on seeds that are never scored, so the scored differences can treat it as a constant.
* **Pooled claim**: per game, the per-seed paired differences A - B divided by the game's scale; the
  estimate is the unweighted mean over games of the per-game means (a game effect: each game keeps
  its own mean and spread), with a Welch-Satterthwaite t interval.
* **Family**: every claim given a verdict; each interval at alpha/m, so every verdict read off the
  intervals (sign or equivalence) holds family-wise at alpha.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from scipy import stats as scipy_stats

from experiments.arena import stats


def learning_gain(curves: Sequence[Sequence[float]]) -> float:
    """Mean over runs of AUC minus the first iteration's success (the uniform policy's)."""
    if not curves:
        raise ValueError("a game's scale needs at least one run")
    return sum(sum(c) / len(c) - c[0] for c in curves) / len(curves)


def stratified_t(differences: Mapping[str, Sequence[float]], scales: Mapping[str, float], level: float) -> dict:
    """Pooled claim over games: per game g, mean_g and var_g of differences / scale_g over n_g seeds;
    estimate = mean over games of mean_g, its variance sum(var_g / n_g) / G**2, Welch-Satterthwaite
    degrees of freedom, a two-sided t test of 0 and the interval at confidence 1 - level."""
    games = list(differences)
    if not games or any(len(differences[g]) < 2 for g in games):
        raise ValueError("a pooled claim needs >= 2 seeds in every game")
    means, terms, dfs = [], [], []
    for game in games:
        scaled = [d / scales[game] for d in differences[game]]
        mean, std = stats.mean_std(scaled)
        means.append(mean)
        terms.append(std**2 / len(scaled) / len(games) ** 2)
        dfs.append(len(scaled) - 1)
    estimate, variance = sum(means) / len(games), sum(terms)
    if variance == 0.0:
        return {"mean": estimate, "low": estimate, "high": estimate, "p": 1.0 if estimate == 0 else 0.0,
                "se": 0.0, "df": float(sum(dfs))}
    df = variance**2 / sum(t**2 / d for t, d in zip(terms, dfs))
    se = math.sqrt(variance)
    half = float(scipy_stats.t.ppf(1 - level / 2, df)) * se
    p = 2 * float(scipy_stats.t.sf(abs(estimate) / se, df))
    return {"mean": estimate, "low": estimate - half, "high": estimate + half, "p": p, "se": se, "df": df}


def matched_option(mean_auc_a: Mapping, mean_auc_b: Mapping, order: Sequence) -> tuple | None:
    """The option (rate, update) both arms share: the best mean of the two arms' selection AUCs among
    the options both ran; ties go to the first in ``order``. None if they share none."""
    shared = [option for option in order if option in mean_auc_a and option in mean_auc_b]
    if not shared:
        return None
    return max(shared, key=lambda option: mean_auc_a[option] + mean_auc_b[option])


def judge_family(rows: Sequence[Mapping], alpha: float = 0.05) -> list[dict]:
    """``rows``: one per claim, each with ``test`` (a function level -> {"mean", "low", "high", "p"}),
    ``margin`` (in the claim's own units) and any labels. Every interval at alpha / m; the verdict
    from that interval (stats.verdict, Bonferroni rejection); Holm's adjusted p beside."""
    m = len(rows)
    if m == 0:
        return []
    level = alpha / m
    first = [row["test"](alpha)["p"] for row in rows]
    holm, _ = stats.holm_levels(first, alpha)
    judged = []
    for row, p, p_holm in zip(rows, first, holm):
        test = row["test"](level)
        p_bonferroni = min(1.0, m * p)
        labels = {key: value for key, value in row.items() if key != "test"}
        judged.append(labels | {"mean": test["mean"], "low": test["low"], "high": test["high"], "p": p,
                                "p_bonferroni": p_bonferroni, "p_holm": p_holm, "level": level,
                                "verdict": stats.verdict(test["low"], test["high"], test["mean"],
                                                         p_bonferroni < alpha, row["margin"])})
    return judged

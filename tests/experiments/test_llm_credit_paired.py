"""The paired statistics of held-out outcomes (experiments/llm_credit/paired.py) against hand-computed
cases: McNemar's exact p from the binomial tail written out, the bootstrap's interval on pairs whose
resampled means can be enumerated."""

import itertools
import math

import pytest

from scipy import stats

from experiments.llm_credit.paired import mcnemar_detectable, mcnemar_exact, paired_bootstrap, success_auc


def test_mcnemar_counts_only_discordant_tasks():
    # tasks: (first, second) = (1,1), (1,0), (0,1), (0,1), (0,1), (0,0): b = 1, c = 3
    first = [1, 1, 0, 0, 0, 0]
    second = [1, 0, 1, 1, 1, 0]
    result = mcnemar_exact(first, second)
    assert (result["b"], result["c"]) == (1, 3)
    # P(X <= 1), X ~ Bin(4, 1/2) = (1 + 4) / 16; two-sided: 10/16
    assert result["p"] == pytest.approx(10 / 16, abs=1e-15)


def test_mcnemar_extremes():
    assert mcnemar_exact([0, 1, 1], [0, 1, 1])["p"] == 1.0  # no discordant task
    # 6 tasks, all won only by the second: 2 * (1/2)^6
    assert mcnemar_exact([0] * 6, [1] * 6)["p"] == pytest.approx(2 / 64, abs=1e-15)
    # b = c: the tail reaches past one half, and p is capped at 1
    assert mcnemar_exact([1, 0], [0, 1])["p"] == 1.0
    # 10 discordant, 1 against 9: 2 * (1 + 10) / 1024
    first = [1] + [0] * 9 + [1, 1]
    second = [0] + [1] * 9 + [1, 0]
    result = mcnemar_exact(first, second)
    assert (result["b"], result["c"]) == (2, 9)
    assert result["p"] == pytest.approx(2 * sum(math.comb(11, i) for i in range(3)) / 2**11, abs=1e-15)


def test_bootstrap_interval_of_enumerable_pairs():
    # differences (second - first) of two pairs: 1 and 0. A resample's mean is 0, 1/2 or 1 with
    # probability 1/4, 1/2, 1/4, so the 2.5 % and 97.5 % quantiles are 0 and 1.
    result = paired_bootstrap([0, 1], [1, 1], rounds=20_000, seed=3)
    assert result == {"difference": 0.5, "low": 0.0, "high": 1.0}
    # a 40 % interval (quantiles 0.3 and 0.7) lies where the mass of 1/2 sits
    narrow = paired_bootstrap([0, 1], [1, 1], rounds=20_000, level=0.4, seed=3)
    assert (narrow["low"], narrow["high"]) == (0.5, 0.5)


def test_bootstrap_keeps_the_pairing():
    # every pair differs by exactly +1: any resample's mean difference is 1, so the interval is a point,
    # whereas an unpaired resampling of the two lists would spread it
    result = paired_bootstrap([0, 0, 0, 0], [1, 1, 1, 1], rounds=500)
    assert result == {"difference": 1.0, "low": 1.0, "high": 1.0}
    # same outcomes on both sides: a point at 0 however the first list alone varies
    outcomes = [1, 0, 1, 1, 0, 0, 1]
    assert paired_bootstrap(outcomes, outcomes, rounds=500) == {"difference": 0.0, "low": 0.0, "high": 0.0}


def test_bootstrap_matches_the_exact_resampling_distribution():
    # three pairs with differences -1, 0, 1: the 27 equally likely resamples give the exact quantiles
    first, second = [1, 0, 0], [0, 0, 1]
    means = sorted(sum(c) / 3 for c in itertools.product([-1, 0, 1], repeat=3))
    result = paired_bootstrap(first, second, rounds=50_000, level=0.5, seed=1)
    # the 25 % and 75 % points of the exact distribution: -1/3 and 1/3 (each of those atoms holds 6/27)
    assert means[6] == pytest.approx(-1 / 3) and means[20] == pytest.approx(1 / 3)
    assert result["low"] == pytest.approx(-1 / 3) and result["high"] == pytest.approx(1 / 3)
    assert result["difference"] == 0.0


def test_bad_input_and_auc():
    with pytest.raises(ValueError):
        mcnemar_exact([1, 0], [1])
    with pytest.raises(ValueError):
        paired_bootstrap([], [])
    with pytest.raises(ValueError):
        paired_bootstrap([1], [0], level=1.0)
    assert success_auc([0.0, 0.5, 1.0]) == 0.5
    with pytest.raises(ValueError):
        success_auc([])


def test_detectable_difference_is_the_designs_figure():
    """The design's "What it can resolve": 96 pairs at 0.025 and 80 % power detect about 0.14, 0.17, 0.22
    when 20 %, 30 %, 50 % of them disagree; z from scipy, independently of the stdlib's."""
    z = stats.norm.ppf(1 - 0.025 / 2) + stats.norm.ppf(0.8)
    for share, rounded in ((0.2, 0.14), (0.3, 0.17), (0.5, 0.22)):
        found = mcnemar_detectable(share, 96, alpha=0.025)
        assert found == pytest.approx(z * math.sqrt(share / 96), rel=1e-9) and round(found, 2) == rounded
    assert mcnemar_detectable(0.0, 96, alpha=0.025) == 0.0  # no pair disagrees: nothing to detect against
    assert mcnemar_detectable(0.5, 24, alpha=0.025) == pytest.approx(2 * mcnemar_detectable(0.5, 96, alpha=0.025))
    for bad in ({"discordant": 1.5, "pairs": 96}, {"discordant": 0.5, "pairs": 0}):
        with pytest.raises(ValueError):
            mcnemar_detectable(**bad, alpha=0.025)

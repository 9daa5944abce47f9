"""The credit study's design (pure): arms, seeds, what each run is and which runs remain
(docs/results/llm-credit.md, "Design", fixed before the first counted run, and its amendments).

An arm is a credit estimator; everything else is the recipe's (experiments/configs/smollm2_twc2.py since
"Amendment 3"; the coin recipe's records stay in docs/results/llm-credit-coin11/), identical for every
arm: iterations, groups, rollouts, tokens, learning rate. A seed fixes the warm start (computed once per
machine type, "Amendment 4", and shared by every arm of the seed on it), the training task draws and the
sampler's streams, so arms of one seed are paired. The held-out list is the same for every run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

RECIPE = "experiments/configs/smollm2_twc2.py"
ARMS: dict[str, dict[str, str]] = {  # arm -> config overrides (the credit section only)
    "grpo": {"credit.estimator": "grpo", "credit.stage": "None"},
    "gigpo": {"credit.estimator": "gigpo", "credit.stage": "None"},
    "milegpo": {"credit.estimator": "milegpo", "credit.stage": "full"},
    "mvpo": {"credit.estimator": "mvpo", "credit.stage": "None"},
}
DEFAULT_ARMS = ("grpo", "gigpo", "milegpo")  # mvpo if the budget allows (issue 42)
DEFAULT_SEEDS = (0, 1, 2)
REFERENCES = ("grpo", "gigpo")  # paired differences are reported against these
# The pre-registered verdict ("Design"): each primary comparison on the primary list is supported (or
# refuted) when McNemar's exact p is below 0.05 Bonferroni-corrected for the two comparisons and the
# difference is positive (or negative), otherwise unresolved; final once every planned seed has run.
PRIMARY_COMPARISONS = ("milegpo - grpo", "milegpo - gigpo")
PRIMARY_LIST = "eval_id"
VERDICT_ALPHA = 0.05 / len(PRIMARY_COMPARISONS)
GOAL_IMPROVEMENT = 0.15  # issue 42's goal: held-out success over the warm start, on every seed


class DesignError(ValueError):
    """Bad input to the study (one line naming the flag)."""


def parse_arms(text: str) -> tuple[str, ...]:
    arms = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [arm for arm in arms if arm not in ARMS]
    if not arms or unknown:
        raise DesignError(f"--arms {text!r}: choose among {', '.join(ARMS)}")
    return arms


def parse_seeds(text: str) -> tuple[int, ...]:
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise DesignError(f"--seeds {text!r}: integers and ranges, such as 0-2 or 0,3")
        first, last = int(low), int(high or low)
        if last < first or last - first >= 100 or last >= 2**31:
            raise DesignError(f"--seeds {text!r}: a range runs upwards, at most 100 seeds, each below 2**31")
        seeds.extend(range(first, last + 1))
    if not seeds:
        raise DesignError(f"--seeds {text!r}: no seed")
    return tuple(sorted(set(seeds)))


def warm_overrides(seed: int, evaluate: bool) -> list[str]:
    """The warm-start run: no RL iteration; it builds the warm start, or (``evaluate``) plays the
    held-out lists with the one already built in its work directory."""
    return [f"run.seed={seed}", "run.iterations=0", f"run.eval_before_training={str(evaluate).lower()}"]


def arm_overrides(arm: str, seed: int) -> list[str]:
    """An arm's run: the seed's shared warm start (evaluated once, by the warm-start run), this arm's
    credit estimator."""
    return [f"run.seed={seed}", "run.eval_before_training=false", *(f"{k}={v}" for k, v in ARMS[arm].items())]


def pending(arms: Sequence[str], seeds: Sequence[int], done: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """The (arm, seed) runs without a record, seed by seed (so a seed's arms finish together and a
    study stopped early is still paired), arms in the given order."""
    finished = set(done)
    return [(arm, seed) for seed in seeds for arm in arms if (arm, seed) not in finished]

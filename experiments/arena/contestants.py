"""Who competes in the arena: credit estimators from the registry, MileGPO stages, option overrides,
and the random-advantage control. Pure: names in, credit configs and advantages out.

A contestant is written ``estimator[:stage][@key=value...]``, e.g. ``gigpo``, ``milegpo:rcs``,
``milegpo:full@eta=0.5@rho=0.5``; ``random`` is the control whose advantages are standard normal
noise, blind to the reward. ``all`` expands to every registered estimator (MileGPO once per stage)
plus ``random``, so an estimator added to the registry joins without any change here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from milegpo_jax.config import parse_credit_options
from milegpo_jax.credit.api import compute_credit
from milegpo_jax.credit.columns import RolloutColumns
from milegpo_jax.credit.config import NEEDS_MILESTONES, STAGES, CreditConfig, CreditConfigError, make_credit_config
from milegpo_jax.credit.estimators import registered_estimators
from milegpo_jax.credit.rollouts import Group

RANDOM = "random"
PAPER_CONTESTANTS = ("grpo", "gigpo", "graphgpo", "milegpo:md", "milegpo:rcs", "milegpo:full")
BASELINE = "gigpo"  # the paired comparison's reference


@dataclasses.dataclass(frozen=True)
class Contestant:
    name: str  # the spec as written (labels, directory names)
    config: CreditConfig  # the estimator's config; for ``random`` the one its diagnostics use
    random: bool = False


def expand_all(milestones: bool = True) -> tuple[str, ...]:
    """Every registered estimator; without ``milestones`` (an env that flags none) those needing them are left out."""
    names = []
    for estimator in registered_estimators():
        if estimator in NEEDS_MILESTONES and not milestones:
            continue
        if estimator == "milegpo":
            names += [f"milegpo:{stage}" for stage in ("md", "rcs", "full")]
        else:
            names.append(estimator)
    return (*names, RANDOM)


def parse_contestant(spec: str, recipe: str, overrides: Mapping[str, Any] | None = None) -> Contestant:
    """One contestant; a bad name, stage or option raises CreditConfigError naming it."""
    head, *assignments = spec.split("@")
    name, _, stage = head.partition(":")
    own = dict(overrides or {})
    try:
        own.update(parse_credit_options(assignments, flag="option"))
    except CreditConfigError as error:
        raise CreditConfigError(f"contestant {spec!r}: {error}") from None
    if name == RANDOM:
        if stage or assignments:
            raise CreditConfigError(f"contestant {spec!r}: the random control takes no stage or options")
        return Contestant(spec, make_credit_config("milegpo", recipe, None, overrides), random=True)
    if name not in registered_estimators():
        raise CreditConfigError(
            f"unknown estimator {name!r} in contestant {spec!r}: registered are {', '.join(registered_estimators())}, or {RANDOM}"
        )
    if stage and stage not in STAGES:
        raise CreditConfigError(f"unknown stage {stage!r} in contestant {spec!r}: choose one of {', '.join(STAGES)}")
    try:
        return Contestant(spec, make_credit_config(name, recipe, stage or None, own))
    except CreditConfigError as error:
        raise CreditConfigError(f"contestant {spec!r}: {error}") from None


def parse_contestants(
    specs: Sequence[str], recipe: str, overrides: Mapping[str, Any] | None = None, milestones: bool = True
) -> list[Contestant]:
    """``milestones``: whether the env flags milestone steps (estimators in NEEDS_MILESTONES read them)."""
    expanded = [name for spec in specs for name in (expand_all(milestones) if spec == "all" else (spec,))]
    for name in expanded:
        if name.split("@")[0].split(":")[0] in NEEDS_MILESTONES and not milestones:
            raise CreditConfigError(f"contestant {name!r} needs milestone flags, which this environment does not report")
    if not expanded:
        raise CreditConfigError("no contestants given")
    if len(set(expanded)) != len(expanded):
        raise CreditConfigError(f"a contestant is listed twice: {', '.join(expanded)}")
    return [parse_contestant(spec, recipe, overrides) for spec in expanded]


def advantages_and_diagnostics(
    contestant: Contestant,
    rollouts: Sequence[Group] | RolloutColumns,
    noise: np.random.Generator,
    ema_prev: float = 0.0,
    pad_to: tuple[int, int, int] = (8, 8, 8),
    step_of: np.ndarray | None = None,
) -> tuple[list, dict, float, tuple[int, int, int]]:
    """Per-step advantages (group, trajectory, step), the batch's credit diagnostics, MVPO's new EMA and
    the padded (steps, nodes, edges) used, which the caller passes back as ``pad_to`` for the next batch.
    Tree groups (``step_of``: ``compute_credit``'s, docs/credit-implementation.md §5): one advantage per recorded step
    instead, the mean over the leaves through it (the control: noise per recorded step)."""
    result = compute_credit(rollouts, contestant.config, ema_prev=ema_prev, pad_to=pad_to, step_of=step_of)
    shape = (result.batch.src.shape[-1], result.batch.node_mask.shape[-1], result.batch.edge_mask.shape[-1])
    if step_of is not None:
        steps = result.step_advantages
        advantages = noise.standard_normal(len(steps)) if contestant.random else steps
        return [float(x) for x in advantages], result.diagnostics, result.ema, shape
    if not contestant.random:
        return result.advantages, result.diagnostics, result.ema, shape
    noisy = [[[float(x) for x in noise.standard_normal(len(steps))] for steps in group] for group in result.advantages]
    return noisy, result.diagnostics, result.ema, shape

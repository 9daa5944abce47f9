"""One call from rollout columns to advantages and diagnostics (used by the CLI, replay, arena and trainer)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

from milegpo_jax.credit.batch import BatchLayout, CreditBatch, padded_batch
from milegpo_jax.credit.columns import RolloutColumns, check_columns_for
from milegpo_jax.credit.config import CreditConfig
from milegpo_jax.credit.diagnostics import credit_diagnostics
from milegpo_jax.credit.estimators import advantages_and_ema, host_parts, milegpo_terms
from milegpo_jax.credit.registry import spec_of
from milegpo_jax.credit.trees import mean_per_step


@dataclasses.dataclass(frozen=True)
class CreditResult:
    # float64 [S]: every step's advantage, in the steps' (trajectory-major) order; with ``step_of``
    # (a tree group's leaves), one per recorded step: the mean over the leaves through it
    step_advantages: np.ndarray
    padded_advantages: np.ndarray  # [G, K, T] as the estimator returned them (0 on padded rows)
    diagnostics: dict
    batch: CreditBatch
    ema: float = 0.0  # MVPO's success EMA after this batch (the ``ema_prev`` passed in for other estimators)
    layout_of: Callable[[], BatchLayout] = dataclasses.field(default=None, repr=False, compare=False)

    @functools.cached_property
    def layout(self) -> BatchLayout:
        """Lengths and node names of the batch, built on first use (the trainer needs neither)."""
        return self.layout_of()

    @functools.cached_property
    def advantages(self) -> list[list[list[float]]]:
        """``step_advantages`` per group, per trajectory, per step (the CLI's and the arena's form)."""
        return self.layout.unpad(self.padded_advantages)


def compute_credit(
    columns: RolloutColumns,
    cfg: CreditConfig,
    with_diagnostics: bool = True,
    ema_prev: float = 0.0,
    pad_to: tuple[int, ...] | None = None,
    step_of: np.ndarray | None = None,
) -> CreditResult:
    """Advantages of ``cfg.estimator`` for every step of ``columns`` (+ the MileGPO diagnostics).

    The columns come interned from their producer (columns.py): the collector's recording, the
    arena's interner, or ``columns_from_groups`` at the JSON edge (CLI, replay). ``pad_to = (steps,
    nodes[, edges])`` pads the batch to at least that many steps per trajectory, nodes and distinct
    edges per group, so that a caller whose batches vary keeps one compiled program per shape instead
    of one per power-of-two bucket it passes through.

    ``ema_prev`` is MVPO's success EMA of the previous iteration (m_0 = 0); the result carries the
    updated value, which the caller keeps in its state (docs/credit-family.md). Rollouts that lack a
    field the estimator needs raise ``RolloutFormatError`` (``columns.check_columns_for``).

    ``step_of`` (tree groups, docs/credit-implementation.md §5): the columns hold every leaf from the root, and entry
    i is a copy of recorded step ``step_of[i]``; ``step_advantages`` then has one entry per recorded
    step, the mean over its copies (the padded advantages and the diagnostics stay per leaf).

    The diagnostics are MileGPO's; for a baseline estimator they use the MileGPO fields of ``cfg``
    (its recipe defaults) on the same graph, so that tie statistics can be compared across estimators.
    """
    check_columns_for(columns, cfg.estimator)
    if step_of is not None and not spec_of(cfg.estimator).trees:
        raise ValueError(f"estimator {cfg.estimator} is not defined on tree groups (docs/credit-implementation.md §5)")
    minima = {} if pad_to is None else dict(zip(("min_steps", "min_nodes", "min_edges"), pad_to))
    parts = host_parts(cfg.estimator) | (host_parts("milegpo") if with_diagnostics else frozenset())  # MileGPO's
    batch, layout_of, step_index = padded_batch(columns, parts=parts, **minima)
    advantages, ema = advantages_and_ema(batch, cfg, ema_prev)
    # through numpy: float() of a jax scalar takes ~35 µs of checks, as long as the [G, K, T] fetch
    advantages, ema = np.asarray(advantages), float(np.asarray(ema))
    diagnostics = {}
    if with_diagnostics:
        terms_cfg = cfg if cfg.estimator == "milegpo" else dataclasses.replace(cfg, estimator="milegpo")
        terms = milegpo_terms(batch, terms_cfg)
        diagnostics = credit_diagnostics(batch, terms, advantages, theta_m=terms_cfg.theta_m)
        if "ema" in spec_of(cfg.estimator).reads:  # a batch-level program's success EMA (MVPO's)
            diagnostics[f"{cfg.estimator}_success_ema"] = ema
    step_advantages = advantages.reshape(-1)[step_index].astype(np.float64)
    if step_of is not None:
        step_advantages = mean_per_step(step_advantages, step_of)
    return CreditResult(step_advantages, advantages, diagnostics, batch, ema, layout_of)

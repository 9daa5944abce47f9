"""Credit-assignment configuration: one frozen dataclass, with the recipes of docs/credit.md §5.10.

Every reconstruction choice R1-R16 of docs/credit.md §5.12 that is not fixed by the data model is an
option here, defaulting to the documented choice; its check sits with the estimator that reads it
(``EstimatorSpec.options``, or ``registry.SHARED_OPTIONS``). ``make_credit_config`` applies, in order: the field
defaults, the estimator's recipe defaults (its ``EstimatorSpec.recipes`` in ``credit/registry.py``:
verl-agent run scripts for GRPO/GiGPO/GraphGPO, paper Table 5 for MileGPO), the MileGPO stage, then
user overrides (typed values; a command line's ``--set key=value`` text is parsed by
``milegpo_jax.config.parse_credit_options``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from milegpo_jax.credit import registry

# Names, stages and recipes come from the registry (one EstimatorSpec per estimator, docs/credit-implementation.md §4).
ESTIMATORS = registry.NAMES
# Estimators that read the per-step ``milestone`` flag of the rollout record.
NEEDS_MILESTONES = registry.reading("milestones")
ON_TREES = registry.on_trees()  # the estimators defined on tree groups (docs/credit-implementation.md §5)
RECIPES = registry.RECIPES
STAGES = registry.STAGES
STAGED = registry.staged()  # the estimators that have stages

# Comparisons against a threshold (trap score >= 0.10, m >= θ_m, ψ > 0, c_bcc > 0) treat values
# within this distance of it as on it. Rates such as 0.25·0.6·(2/3) = 0.1 land on either side of the
# threshold depending on float rounding (float32 in jnp, float64 in the reference); the tolerance
# gives both the exact-arithmetic answer. It is far below any real difference of these statistics.
THRESHOLD_TOLERANCE = 1e-6

# A group normalisation whose values spread by less than this fraction of their magnitude (sample
# std <= TIE_RELATIVE_TOLERANCE * max |x|) is a tie: every member gets advantage 0. Values that are
# equal in exact arithmetic but computed along different paths (a -0.1 shaping term next to a -0.1
# invalid penalty) differ by float rounding, and mean-std normalisation would blow that noise up to
# O(1) advantages. Real spreads of these returns are many orders of magnitude larger.
TIE_RELATIVE_TOLERANCE = 1e-5


class CreditConfigError(ValueError):
    """A bad credit option (unknown key, wrong type or value out of range)."""


@dataclasses.dataclass(frozen=True)
class CreditConfig:
    estimator: str = "milegpo"
    # --- shared (docs/credit.md §1.2-1.4) ---
    norm_mode: str = "mean_std"  # step/anchor groups: mean_std_norm or mean_norm
    episode_norm_mode: str = "same"  # R16: "same" applies norm_mode to the episode term too
    # R15: verl-agent cross-steps (statistics over every row's Z = R_i - p·1[invalid]), or the papers'
    # one value per trajectory (Z_i = R_i - p·#invalid steps, the same advantage on all its rows)
    episode_stats: str = "cross_steps"
    epsilon: float = 1e-6
    invalid_penalty: float = 0.1
    step_weight: float = 1.0  # GiGPO step_advantage_w, GraphGPO/MileGPO w_step
    episode_weight: float = 1.0  # GraphGPO episode_advantage_w, MileGPO w_episode
    success_reward: float = 10.0  # c, the return scale of graph returns
    # --- GiGPO (docs/credit.md §3) ---
    gamma: float = 0.95
    # --- GraphGPO return, also MileGPO's base return (docs/credit.md §4, §5.3) ---
    graph_gamma: float = 0.2  # gamma_G
    unreachable: str = "zero"  # R4: "zero" (paper) or "dmax_plus_one" (GraphGPO code)
    normalize_distance: bool = False  # GraphGPO option: 10 * gamma^(d(next) - d(anchor) + 1)
    # --- MileGPO (docs/credit.md §5, paper Table 5) ---
    stage: str = "full"  # full | rcs (w/o PCC) | md (w/o PCC, RCS)
    omega: float = 0.2  # milestone/trap propagation discount
    gamma_phi: float = 1.0
    shaping_coef: float = 0.25  # lambda
    w_pos: float = 1.0
    w_neg: float = 0.25
    w_success: float = 1.0  # w_s
    w_coverage: float = 1.0  # w_m
    w_failure: float = 1.0  # w_f
    w_centrality: float = 0.25  # w_c
    w_revisit: float = 0.25  # w_l
    min_node_support: int = 1
    min_trap_visits: int = 2
    min_trap_score: float = 0.1
    trap_score_strict: bool = False  # R8: admission with >= (False) or > (True)
    alpha_d: float = 1.0
    alpha_s: float = 1.0
    alpha_f: float = 1.0
    w_bc: float = 1.0
    w_pg: float = 1.0
    w_pcc: float = 1.0
    theta_m: float = 1.1
    kappa_bc: int = 0
    rho: float = 0.0
    eta: float = 0.2
    include_start_state: bool = True  # R6
    visit_states: str = "all"  # R5: every s_0..s_T, or source states only
    degree_mode: str = "distinct"  # R7
    degree_norm_include_sink: bool = False  # R7
    bcc_self_loops: bool = True  # R10
    successful_edge: str = "any"  # R11
    progress_norm: str = "all_nodes"  # R13
    invalid_penalty_target: str = "both"  # R14
    # --- HGPO (docs/credit-family.md) ---
    hgpo_history: int = 2  # H: history keys of k = 1 .. H+1 anchors
    hgpo_alpha: float = 1.0  # cluster weight (k+1)^alpha
    hgpo_base_group: bool = False  # add the episode term as a k = 0 item
    # --- G2PO ---
    g2po_gamma: float = 0.95  # value discount (hard-coded 0.95 in the public code, not `gamma`)
    g2po_anchor_penalty: float = 0.1  # invalid penalty inside the anchor term (hard-coded in the code)
    # --- BEACON (MiGPO) ---
    beacon_gamma: float = 0.99  # gamma_m of the milestone segment reward; lambda is step_weight
    # --- ECPO (reconstructed, E1-E7) ---
    ecpo_kappa: float = 2.0  # shrinkage of per-action means towards the anchor mean
    ecpo_tau: float = 4.0  # count gate tanh(n_s / tau)
    ecpo_gate_epsilon: float = 1e-6  # epsilon of B / (B + W + eps)
    # omega of ECPO and ProGPO is step_weight
    # --- ProGPO (reconstructed, P1-P4) ---
    progpo_coverage_reward: float = 1.0  # c_cov
    progpo_base: str = "gigpo"  # zero-reward groups: GiGPO on novelty rewards, or its episode term only
    # --- MVPO (reconstructed, M1-M9) ---
    mvpo_w_future: float = 1.0  # w_f
    mvpo_w_progress: float = 1.0  # w_p
    mvpo_w_loop: float = 0.5  # w_l
    mvpo_potential_weight: float = 1.0  # lambda_pot
    mvpo_ema_beta: float = 0.9  # beta of the success EMA carried across iterations
    mvpo_success_ref: float = 1.0  # s_ref of kappa = clip(1 - m / s_ref, 0, 1)
    mvpo_kappa_decay: bool = True  # False: kappa = 1
    mvpo_route: str = "anchor"  # "anchor": GiGPO credit on informative anchors; "all": potential everywhere
    # --- numerics ---
    # float64 runs the jitted estimators in JAX's x64 mode (scoped to the call): group normalisations
    # of near-tied values are ill-conditioned, and only float64 matches a float64 oracle there.
    precision: str = "float32"

    def __post_init__(self):
        # every option's check is written once, in the registry (docs/credit-implementation.md §4)
        for name, allowed in (("estimator", ESTIMATORS), ("stage", STAGES)):
            if getattr(self, name) not in allowed:
                raise CreditConfigError(f"{name}={getattr(self, name)!r}: must be one of {', '.join(allowed)}")
        for name, rule in registry.OPTION_RULES.items():
            value = getattr(self, name)
            if rule is not None and rule.refuses(value):
                shown = repr(value) if isinstance(value, str) else value
                raise CreditConfigError(f"{name}={shown}: must {rule.text}")

    @property
    def resolved_episode_norm_mode(self) -> str:
        return self.norm_mode if self.episode_norm_mode == "same" else self.episode_norm_mode


DEFAULT_RECIPE = registry.DEFAULT_RECIPE


def _checked(name: str, value: Any, field_type: type) -> Any:
    """A Python value of the field's type (int accepted for float). Text from a command line is parsed
    before it gets here, by ``milegpo_jax.config.parse_credit_options``."""
    if field_type is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if field_type is bool and not isinstance(value, bool):
        raise CreditConfigError(f"{name}={value!r}: expected true/false")
    if field_type in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise CreditConfigError(f"{name}={value!r}: expected a number")
    if field_type is str and not isinstance(value, str):
        raise CreditConfigError(f"{name}={value!r}: expected a string")
    return value


_FIELD_TYPES = {f.name: {"str": str, "float": float, "int": int, "bool": bool}[f.type] for f in dataclasses.fields(CreditConfig)}


def make_credit_config(
    estimator: str = "milegpo",
    recipe: str | None = None,
    stage: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> CreditConfig:
    """Builds the config for ``estimator`` under ``recipe`` (default ALFWorld), ``stage`` and overrides."""
    if estimator not in ESTIMATORS:
        raise CreditConfigError(f"unknown estimator {estimator!r}: choose one of {', '.join(ESTIMATORS)}")
    recipe = DEFAULT_RECIPE if recipe is None else recipe
    if recipe not in RECIPES:
        raise CreditConfigError(f"unknown recipe {recipe!r}: choose one of {', '.join(RECIPES)}")
    spec = registry.spec_of(estimator)
    if stage is not None and not spec.stages:
        raise CreditConfigError(f"--stage applies to {', '.join(registry.staged())} only, not {estimator}")
    values: dict[str, Any] = {"estimator": estimator, **spec.recipes[recipe]}
    if stage is not None:
        values["stage"] = stage
    for name, value in (overrides or {}).items():
        if name not in _FIELD_TYPES or name == "estimator":
            raise CreditConfigError(f"unknown credit option {name!r}")
        values[name] = _checked(name, value, _FIELD_TYPES[name])
    return CreditConfig(**values)

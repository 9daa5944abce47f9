"""One description per credit estimator: the registry every table of names, recipes and programs
derives from (docs/credit.md §13).

An ``EstimatorSpec`` says what an estimator is called, where its program lives and at which level it
runs, which host structure and rollout fields it reads, its own options, stages and recipe defaults,
and its plain-Python reference. The config checks (``credit/config.py``), the program dispatch
(``credit/estimators/run.py``), the credit CLI, ``experiments/replay.py``, the credit benchmark and
the reference lookup (``credit/testing/reference.py``) all read it.

Programs and references are named by ``"module:function"`` and imported where they are run, so that
this module (and the config that reads it) needs no JAX, and the library never imports the test
material.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import Any

RECIPES = ("alfworld", "webshop")
DEFAULT_RECIPE = "alfworld"

# What a program may read beyond the rows: the host parts built by the passes of ``credit/passes/``
# (distinct edges, hops to the sink, MVPO's regions, the row clusters: HGPO's histories, ECPO's
# (state, action) pairs, ProGPO's first visits), the rollouts' per-step milestone flags, and the
# success EMA carried across iterations.
HOST_PARTS = ("edges", "hops", "regions", "clusters")
READS = (*HOST_PARTS, "milestones", "ema")
# "group": ``f(group, cfg) -> terms`` on one group's [K, T] rows, vmapped over groups;
# "batch": ``f(batch, cfg, ema_prev) -> terms`` incl. "ema_new", for state across the groups.
LEVELS = ("group", "batch")

# Options every estimator reads (docs/credit.md §1.2-1.4); the rest belong to the estimators below.
SHARED_OPTIONS = (
    "norm_mode", "episode_norm_mode", "episode_stats", "epsilon", "invalid_penalty", "step_weight",
    "episode_weight", "success_reward", "precision",
)
_GRAPH_RETURN_OPTIONS = ("graph_gamma", "unreachable", "normalize_distance")
_MILEGPO_OPTIONS = (
    "stage", "omega", "gamma_phi", "shaping_coef", "w_pos", "w_neg", "w_success", "w_coverage", "w_failure",
    "w_centrality", "w_revisit", "min_node_support", "min_trap_visits", "min_trap_score", "trap_score_strict",
    "alpha_d", "alpha_s", "alpha_f", "w_bc", "w_pg", "w_pcc", "theta_m", "kappa_bc", "rho", "eta",
    "include_start_state", "visit_states", "degree_mode", "degree_norm_include_sink", "bcc_self_loops",
    "successful_edge", "progress_norm", "invalid_penalty_target",
)

_PROGRAMS = "milegpo_jax.credit.estimators"
_REFERENCES = "milegpo_jax.credit.testing"


@dataclasses.dataclass(frozen=True)
class EstimatorSpec:
    """What one estimator is and needs (the table of docs/credit.md §13 explains each field)."""

    name: str
    label: str  # its column title in tables (experiments/replay.py)
    page: str  # where its maths is written
    program: str  # "module:function", at ``level``
    level: str
    reads: frozenset[str]
    recipes: Mapping[str, Mapping[str, Any]]  # recipe -> option defaults (docs/credit.md §5.10)
    reference: str  # "module:function" of credit/testing: per group ``f(group, cfg) -> details``, or
    # per batch ``f(groups, cfg, ema_prev) -> (details per group, ema_new)``
    # tree groups (docs/credit.md §14): True where the estimator is defined on a group's leaves, each
    # a trajectory from the root, a shared step taking the mean of its leaves' advantages
    trees: bool = True
    options: tuple[str, ...] = ()  # CreditConfig fields of its own (beyond SHARED_OPTIONS)
    stages: tuple[str, ...] = ()  # ablation stages, the full method first (its default)

    def __post_init__(self):
        if self.level not in LEVELS or not self.reads <= set(READS) or set(self.recipes) != set(RECIPES):
            raise ValueError(f"estimator {self.name}: level in {LEVELS}, reads within {READS}, recipes {RECIPES}")
        if (self.level == "batch") != ("ema" in self.reads):  # the EMA is the batch-level state there is
            raise ValueError(f"estimator {self.name}: a batch-level program is one that reads the EMA")


SPECS: tuple[EstimatorSpec, ...] = (
    # GRPO / GiGPO / GraphGPO follow verl-agent's run scripts; GraphGPO keeps its code's d_max + 1
    # rule for unreachable states.
    EstimatorSpec(
        name="grpo", label="GRPO", page="docs/credit.md §2", level="group", reads=frozenset(),
        program=f"{_PROGRAMS}.baselines:grpo_group", reference=f"{_REFERENCES}.reference_baselines:grpo_details",
        recipes={"alfworld": {"norm_mode": "mean_std"}, "webshop": {"norm_mode": "mean_std"}},
    ),
    EstimatorSpec(
        name="gigpo", label="GiGPO", page="docs/credit.md §3", level="group", reads=frozenset(),
        program=f"{_PROGRAMS}.baselines:gigpo_group", reference=f"{_REFERENCES}.reference_baselines:gigpo_details",
        options=("gamma",),
        recipes={"alfworld": {"norm_mode": "mean_std", "gamma": 0.95}, "webshop": {"norm_mode": "mean", "gamma": 0.95}},
    ),
    EstimatorSpec(
        name="graphgpo", label="GraphGPO", page="docs/credit.md §4", level="group", reads=frozenset({"hops"}),
        program=f"{_PROGRAMS}.baselines:graphgpo_group", reference=f"{_REFERENCES}.reference_baselines:graphgpo_details",
        options=_GRAPH_RETURN_OPTIONS,
        recipes={
            "alfworld": {"norm_mode": "mean_std", "graph_gamma": 0.1, "unreachable": "dmax_plus_one"},
            "webshop": {"norm_mode": "mean_std", "graph_gamma": 0.2, "unreachable": "dmax_plus_one"},
        },
    ),
    # MileGPO: paper Table 5.
    EstimatorSpec(
        name="milegpo", label="MileGPO", page="docs/credit.md §5", level="group", reads=frozenset({"edges", "hops"}),
        program=f"{_PROGRAMS}.milegpo:milegpo_group", reference=f"{_REFERENCES}.reference_milegpo:milegpo_details",
        options=_GRAPH_RETURN_OPTIONS + _MILEGPO_OPTIONS, stages=("full", "rcs", "md"),
        recipes={
            "alfworld": {"norm_mode": "mean_std", "eta": 0.2, "theta_m": 1.1, "rho": 0.0, "kappa_bc": 0},
            "webshop": {"norm_mode": "mean", "eta": 1.0, "theta_m": 0.5, "rho": 0.5, "kappa_bc": 1},
        },
    ),
    # The family: HGPO / G2PO / BEACON follow their public run scripts; ECPO and ProGPO use GiGPO's
    # script modes; MVPO is mean-std on both.
    EstimatorSpec(
        name="hgpo", label="HGPO", page="docs/credit-family.md", level="group", reads=frozenset({"clusters"}),
        program=f"{_PROGRAMS}.family:hgpo_group", reference=f"{_REFERENCES}.reference_family:hgpo_details",
        options=("gamma", "hgpo_history", "hgpo_alpha", "hgpo_base_group"),
        recipes={
            "alfworld": {"norm_mode": "mean_std", "gamma": 0.95, "hgpo_history": 2},
            "webshop": {"norm_mode": "mean", "gamma": 0.95, "hgpo_history": 2},
        },
    ),
    EstimatorSpec(
        name="g2po", label="G2PO", page="docs/credit-family.md", level="group", reads=frozenset(),
        program=f"{_PROGRAMS}.family:g2po_group", reference=f"{_REFERENCES}.reference_family:g2po_details",
        options=("g2po_gamma", "g2po_anchor_penalty"),
        recipes={"alfworld": {"norm_mode": "mean_std"}, "webshop": {"norm_mode": "mean"}},
    ),
    EstimatorSpec(
        name="beacon", label="BEACON", page="docs/credit-family.md", level="group", reads=frozenset({"milestones"}),
        program=f"{_PROGRAMS}.family:beacon_group", reference=f"{_REFERENCES}.reference_family:beacon_details",
        options=("beacon_gamma",),
        recipes={
            "alfworld": {"norm_mode": "mean", "beacon_gamma": 0.9, "step_weight": 10.0, "invalid_penalty": 0.1},
            "webshop": {"norm_mode": "mean", "beacon_gamma": 0.95, "step_weight": 1.0, "invalid_penalty": 1.0},
        },
    ),
    EstimatorSpec(
        name="ecpo", label="ECPO", page="docs/credit-family.md", level="group", reads=frozenset({"clusters"}),
        program=f"{_PROGRAMS}.family:ecpo_group", reference=f"{_REFERENCES}.reference_family:ecpo_details",
        options=("gamma", "ecpo_kappa", "ecpo_tau", "ecpo_gate_epsilon"),
        recipes={"alfworld": {"norm_mode": "mean_std"}, "webshop": {"norm_mode": "mean"}},
    ),
    EstimatorSpec(
        name="progpo", label="ProGPO", page="docs/credit-family.md", level="group", reads=frozenset({"clusters"}),
        program=f"{_PROGRAMS}.family:progpo_group", reference=f"{_REFERENCES}.reference_family:progpo_details",
        options=("gamma", "progpo_coverage_reward", "progpo_base"),
        recipes={"alfworld": {"norm_mode": "mean_std"}, "webshop": {"norm_mode": "mean"}},
    ),
    EstimatorSpec(
        name="mvpo", label="MVPO", page="docs/credit-family.md", level="batch", reads=frozenset({"regions", "ema"}),
        program=f"{_PROGRAMS}.family:mvpo_batch", reference=f"{_REFERENCES}.reference_family:mvpo_batch_details",
        options=("gamma", "mvpo_w_future", "mvpo_w_progress", "mvpo_w_loop", "mvpo_potential_weight", "mvpo_ema_beta",
                 "mvpo_success_ref", "mvpo_kappa_decay", "mvpo_route"),
        recipes={"alfworld": {"norm_mode": "mean_std"}, "webshop": {"norm_mode": "mean_std"}},
    ),
)
_BY_NAME = {spec.name: spec for spec in SPECS}
NAMES = tuple(_BY_NAME)
STAGES = tuple(dict.fromkeys(stage for spec in SPECS for stage in spec.stages))


def spec_of(name: str) -> EstimatorSpec:
    """The spec of a registered estimator (KeyError for an unknown name: callers check NAMES first)."""
    return _BY_NAME[name]


def reading(what: str) -> tuple[str, ...]:
    """The estimators whose programs read ``what`` (one of READS)."""
    assert what in READS, what
    return tuple(spec.name for spec in SPECS if what in spec.reads)


def host_parts(name: str) -> frozenset[str]:
    """The host parts the program of ``name`` reads: what ``batch.padded_batch`` builds for it (the
    host skips the rest)."""
    return spec_of(name).reads & frozenset(HOST_PARTS)


def staged() -> tuple[str, ...]:
    """The estimators that have ablation stages."""
    return tuple(spec.name for spec in SPECS if spec.stages)


def variants(spec: EstimatorSpec) -> tuple[str | None, ...]:
    """Its stages from the smallest ablation up to the full method, or (None,) without stages: the order
    in which tables list them."""
    return tuple(reversed(spec.stages)) or (None,)


def load(path: str) -> Callable:
    """The function named ``"module:function"`` (a program or a reference)."""
    module, function = path.split(":")
    return getattr(importlib.import_module(module), function)


def on_trees() -> tuple[str, ...]:
    """The estimators defined on tree groups (docs/credit.md §14)."""
    return tuple(spec.name for spec in SPECS if spec.trees)

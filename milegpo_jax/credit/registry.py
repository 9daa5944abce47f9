"""One description per credit estimator: the registry every table of names, recipes and programs
derives from (docs/credit-implementation.md §4).

An ``EstimatorSpec`` says what an estimator is called, where its program lives and at which level it
runs, which host structure and rollout fields it reads, its own options with their checks, stages and
recipe defaults, and its plain-Python reference. The config checks (``credit/config.py``), the program dispatch
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

from milegpo_jax.credit.passes import PASSES

RECIPES = ("alfworld", "webshop")
DEFAULT_RECIPE = "alfworld"

# What a program may read beyond the rows: the host parts built by the passes of ``credit/passes/``
# (``passes.PASSES``: distinct edges, hops to the sink, MVPO's regions, the row clusters: HGPO's
# histories, ECPO's (state, action) pairs, ProGPO's first visits), the rollouts' per-step milestone
# flags, and the success EMA carried across iterations.
HOST_PARTS = tuple(host_pass.name for host_pass in PASSES)
READS = (*HOST_PARTS, "milestones", "ema")
# "group": ``f(group, cfg) -> terms`` on one group's [K, T] rows, vmapped over groups;
# "batch": ``f(batch, cfg, ema_prev) -> terms`` incl. "ema_new", for state across the groups.
LEVELS = ("group", "batch")


@dataclasses.dataclass(frozen=True)
class Rule:
    """The check of one ``CreditConfig`` option: ``refuses(value)`` is an error "name=value: must <text>"."""

    text: str
    refuses: Callable[[Any], bool]


def one_of(*allowed: str) -> Rule:
    return Rule(f"be one of {', '.join(allowed)}", lambda value: value not in allowed)


# Each refusal is written as the comparison that fails, so that NaN passes where it always did.
UNIT = Rule("lie in (0, 1]", lambda value: not 0.0 < value <= 1.0)  # a discount
NOT_NEGATIVE = Rule("be >= 0", lambda value: value < 0)
POSITIVE = Rule("be > 0", lambda value: value <= 0)
AT_LEAST_ONE = Rule("be >= 1", lambda value: value < 1)

# Options every estimator reads (docs/credit.md §1.2-1.4), each with its check (None: any value of its
# type); the rest belong to the estimators below, the checks with them.
SHARED_OPTIONS: Mapping[str, Rule | None] = {
    "norm_mode": one_of("mean_std", "mean"), "episode_norm_mode": one_of("same", "mean_std", "mean"),
    "episode_stats": one_of("cross_steps", "per_trajectory"), "epsilon": NOT_NEGATIVE,
    "invalid_penalty": NOT_NEGATIVE, "step_weight": None, "episode_weight": None, "success_reward": None,
    "precision": one_of("float32", "float64"),
}
_GAMMA = {"gamma": UNIT}
_GRAPH_RETURN_OPTIONS = {"graph_gamma": UNIT, "unreachable": one_of("zero", "dmax_plus_one"), "normalize_distance": None}
_MILEGPO_OPTIONS = {
    **dict.fromkeys((
        "stage", "omega", "gamma_phi", "shaping_coef", "w_pos", "w_neg", "w_success", "w_coverage", "w_failure",
        "w_centrality", "w_revisit", "min_node_support", "min_trap_visits", "min_trap_score", "trap_score_strict",
        "alpha_d", "alpha_s", "alpha_f", "w_bc", "w_pg", "w_pcc", "theta_m", "kappa_bc", "rho", "eta",
        "include_start_state", "visit_states", "degree_mode", "degree_norm_include_sink", "bcc_self_loops",
        "successful_edge", "progress_norm", "invalid_penalty_target",
    )),
    # (the stage is checked against STAGES, with the estimator, by CreditConfig)
    "omega": UNIT, "min_node_support": AT_LEAST_ONE, "min_trap_visits": AT_LEAST_ONE,
    "kappa_bc": Rule("be 0 or 1", lambda value: value not in (0, 1)),
    "visit_states": one_of("all", "sources"), "degree_mode": one_of("distinct", "multigraph"),
    "successful_edge": one_of("any", "majority"), "progress_norm": one_of("all_nodes", "candidates"),
    "invalid_penalty_target": one_of("both", "none", "mix_only"),
}

_PROGRAMS = "milegpo_jax.credit.estimators"
_REFERENCES = "milegpo_jax.credit.testing"


@dataclasses.dataclass(frozen=True)
class EstimatorSpec:
    """What one estimator is and needs (the table of docs/credit-implementation.md §4 explains each field)."""

    name: str
    label: str  # its column title in tables (experiments/replay.py)
    page: str  # where its maths is written
    program: str  # "module:function", at ``level``
    level: str
    reads: frozenset[str]
    recipes: Mapping[str, Mapping[str, Any]]  # recipe -> option defaults (docs/credit.md §5.10)
    reference: str  # "module:function" of credit/testing: per group ``f(group, cfg) -> details``, or
    # per batch ``f(groups, cfg, ema_prev) -> (details per group, ema_new)``
    # tree groups (docs/credit-implementation.md §5): True where the estimator is defined on a group's leaves, each
    # a trajectory from the root, a shared step taking the mean of its leaves' advantages
    trees: bool = True
    # CreditConfig fields of its own (beyond SHARED_OPTIONS), each with its check (None: any value of
    # its type); an option several estimators share has one check
    options: Mapping[str, Rule | None] = dataclasses.field(default_factory=dict)
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
        options=_GAMMA,
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
        options={**_GRAPH_RETURN_OPTIONS, **_MILEGPO_OPTIONS}, stages=("full", "rcs", "md"),
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
        options={**_GAMMA, "hgpo_history": Rule("lie in 0..8", lambda value: not 0 <= value <= 8), "hgpo_alpha": None,
                 "hgpo_base_group": None},
        recipes={
            "alfworld": {"norm_mode": "mean_std", "gamma": 0.95, "hgpo_history": 2},
            "webshop": {"norm_mode": "mean", "gamma": 0.95, "hgpo_history": 2},
        },
    ),
    EstimatorSpec(
        name="g2po", label="G2PO", page="docs/credit-family.md", level="group", reads=frozenset(),
        program=f"{_PROGRAMS}.family:g2po_group", reference=f"{_REFERENCES}.reference_family:g2po_details",
        options={"g2po_gamma": UNIT, "g2po_anchor_penalty": NOT_NEGATIVE},
        recipes={"alfworld": {"norm_mode": "mean_std"}, "webshop": {"norm_mode": "mean"}},
    ),
    EstimatorSpec(
        name="beacon", label="BEACON", page="docs/credit-family.md", level="group", reads=frozenset({"milestones"}),
        program=f"{_PROGRAMS}.family:beacon_group", reference=f"{_REFERENCES}.reference_family:beacon_details",
        options={"beacon_gamma": UNIT},
        recipes={
            "alfworld": {"norm_mode": "mean", "beacon_gamma": 0.9, "step_weight": 10.0, "invalid_penalty": 0.1},
            "webshop": {"norm_mode": "mean", "beacon_gamma": 0.95, "step_weight": 1.0, "invalid_penalty": 1.0},
        },
    ),
    EstimatorSpec(
        name="ecpo", label="ECPO", page="docs/credit-family.md", level="group", reads=frozenset({"clusters"}),
        program=f"{_PROGRAMS}.family:ecpo_group", reference=f"{_REFERENCES}.reference_family:ecpo_details",
        options={**_GAMMA, "ecpo_kappa": NOT_NEGATIVE, "ecpo_tau": POSITIVE, "ecpo_gate_epsilon": NOT_NEGATIVE},
        recipes={"alfworld": {"norm_mode": "mean_std"}, "webshop": {"norm_mode": "mean"}},
    ),
    EstimatorSpec(
        name="progpo", label="ProGPO", page="docs/credit-family.md", level="group", reads=frozenset({"clusters"}),
        program=f"{_PROGRAMS}.family:progpo_group", reference=f"{_REFERENCES}.reference_family:progpo_details",
        options={**_GAMMA, "progpo_coverage_reward": None, "progpo_base": one_of("gigpo", "grpo")},
        recipes={"alfworld": {"norm_mode": "mean_std"}, "webshop": {"norm_mode": "mean"}},
    ),
    EstimatorSpec(
        name="mvpo", label="MVPO", page="docs/credit-family.md", level="batch", reads=frozenset({"regions", "ema"}),
        program=f"{_PROGRAMS}.family:mvpo_batch", reference=f"{_REFERENCES}.reference_family:mvpo_batch_details",
        options={
            **_GAMMA, "mvpo_w_future": None, "mvpo_w_progress": None, "mvpo_w_loop": None, "mvpo_potential_weight": None,
            "mvpo_ema_beta": Rule("lie in [0, 1)", lambda value: not 0.0 <= value < 1.0), "mvpo_success_ref": POSITIVE,
            "mvpo_kappa_decay": None, "mvpo_route": one_of("anchor", "all"),
        },
        recipes={"alfworld": {"norm_mode": "mean_std"}, "webshop": {"norm_mode": "mean_std"}},
    ),
)
_BY_NAME = {spec.name: spec for spec in SPECS}
NAMES = tuple(_BY_NAME)
STAGES = tuple(dict.fromkeys(stage for spec in SPECS for stage in spec.stages))


def _option_rules() -> dict[str, Rule | None]:
    rules = dict(SHARED_OPTIONS)
    for spec in SPECS:
        for option, rule in spec.options.items():
            if rules.setdefault(option, rule) is not rule:
                raise ValueError(f"estimator {spec.name}: option {option} has one check, whichever estimators read it")
    return rules


# Every option's check (``CreditConfig`` runs them all, whichever the estimator).
OPTION_RULES = _option_rules()


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
    """The estimators defined on tree groups (docs/credit-implementation.md §5)."""
    return tuple(spec.name for spec in SPECS if spec.trees)

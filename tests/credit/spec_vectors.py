"""The numeric test vectors of docs/credit.md §9 (Examples A, B, C) as reusable data.

Layout:

* ``GROUPS[name]`` — the rollout group of each example (``make_group`` tuples
  ``(state, action, next_state, reward, valid)``; the last step of a successful trajectory already
  names the sink, which the data model would substitute anyway).
* ``COLUMNS[column]`` — how to reproduce one table column: a ``ColumnSpec`` with the
  ``make_credit_config`` arguments (estimator, recipe, stage, overrides) and ``field``, the key of
  the per-step row dicts of ``milegpo_jax.credit.testing.reference.estimator_details`` holding the value.
* ``EXAMPLES[name]`` — ``"row_labels"`` (table order = trajectory-major, then time),
  ``"columns"`` ({column: per-row values in table order}, every column of every §9 table) and
  ``"milegpo"`` ({recipe: {"candidates", "traps", "potential_pos", "potential_neg"}}, the
  Candidates / Traps / Φ lines; they describe the full-stage config ``MILEGPO_LINE_CONFIGS[recipe]``).

All values are given at 4-decimal precision, so compare with an absolute
tolerance of 1e-4 (``TOLERANCE``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from milegpo_jax.credit.config import CreditConfig, make_credit_config
from milegpo_jax.credit.rollouts import SUCCESS_STATE, make_group

TOLERANCE = 1e-4


class ColumnSpec(NamedTuple):
    """One §9 table column: the config that produces it and the row field that holds it."""

    header: str  # the column's name, e.g. "GRPO (mean-std)"
    estimator: str
    recipe: str | None
    stage: str | None
    overrides: dict[str, Any] | None
    field: str

    def config(self) -> CreditConfig:
        return make_credit_config(self.estimator, self.recipe, self.stage, self.overrides)


_GRAPHGPO_MEAN_ONLY = {"norm_mode": "mean"}

COLUMNS: dict[str, ColumnSpec] = {
    "grpo": ColumnSpec("GRPO (mean-std)", "grpo", None, None, None, "advantage"),
    "gigpo_step_return": ColumnSpec("GiGPO R_t (γ=0.95, −0.1 inv)", "gigpo", "alfworld", None, None, "step_return"),
    "gigpo_adv_episode_ms": ColumnSpec("GiGPO A^E (ms)", "gigpo", "alfworld", None, None, "adv_episode"),
    "gigpo_adv_step_ms": ColumnSpec("GiGPO A^S (ms)", "gigpo", "alfworld", None, None, "adv_step"),
    "gigpo_total_ms": ColumnSpec("GiGPO total (ms)", "gigpo", "alfworld", None, None, "advantage"),
    "gigpo_total_mean": ColumnSpec("GiGPO total (mean-only)", "gigpo", "webshop", None, None, "advantage"),
    "graphgpo_step_reward_gamma01": ColumnSpec(
        "GraphGPO-code r (γ=0.1, after −0.1 inv)", "graphgpo", "alfworld", None, None, "step_reward"
    ),
    "graphgpo_total_ms_gamma01": ColumnSpec(
        "GraphGPO total (ms, γ=0.1)", "graphgpo", "alfworld", None, None, "advantage"
    ),
    "graphgpo_step_reward_gamma02": ColumnSpec(
        "GraphGPO-code r (γ=0.2, after −0.1 inv)", "graphgpo", "webshop", None, _GRAPHGPO_MEAN_ONLY, "step_reward"
    ),
    "graphgpo_total_mean_gamma02": ColumnSpec(
        "GraphGPO total (mean-only, γ=0.2)", "graphgpo", "webshop", None, _GRAPHGPO_MEAN_ONLY, "advantage"
    ),
}

# MileGPO tables: (column suffix, header, stage, row field). The stage-independent columns use "full".
_MILEGPO_COLUMNS = [
    ("r_graph", "r^G (γ_G=0.2, ∞→0; before −0.1 inv)", "full", "r_graph"),
    ("delta_pos", "δ+", "full", "delta_pos"),
    ("delta_neg", "δ−", "full", "delta_neg"),
    ("r_mix", "r^M (before −0.1 inv)", "full", "r_mix"),
    ("adv_graph", "Â^G", "full", "adv_graph"),
    ("adv_mix", "Â^mix", "full", "adv_mix"),
    ("adv_res", "Â^res", "full", "adv_res"),
    ("adv_episode", "Norm_q(Z)", "full", "adv_episode"),
    ("advantage_full", "A (full)", "full", "advantage"),
    ("advantage_rcs", "A (w/o PCC)", "rcs", "advantage"),
    ("advantage_md", "A (w/o PCC,RCS)", "md", "advantage"),
]
for _recipe in ("alfworld", "webshop"):
    for _suffix, _header, _stage, _field in _MILEGPO_COLUMNS:
        COLUMNS[f"milegpo_{_recipe}_{_suffix}"] = ColumnSpec(
            f"MileGPO {_recipe}: {_header}", "milegpo", _recipe, _stage, None, _field
        )

# The Candidates / Traps / Φ lines of each MileGPO table describe the full-stage config.
MILEGPO_LINE_CONFIGS: dict[str, ColumnSpec] = {
    recipe: ColumnSpec(f"MileGPO {recipe} lines", "milegpo", recipe, "full", None, "")
    for recipe in ("alfworld", "webshop")
}

_V = True  # valid step
_INV = False  # invalid-format step
_G = SUCCESS_STATE

GROUPS = {
    # K = 4, 2 successes. τ1 S0→A→B→g; τ2 S0→C→C(inv)→B→g; τ3 S0→A→D→D(inv); τ4 S0→C→E→A.
    "A": make_group(
        [
            [("S0", "go A", "A", 0.0, _V), ("A", "go B", "B", 0.0, _V), ("B", "finish", _G, 10.0, _V)],
            [
                ("S0", "go C", "C", 0.0, _V),
                ("C", "bad format", "C", 0.0, _INV),
                ("C", "go B", "B", 0.0, _V),
                ("B", "finish", _G, 10.0, _V),
            ],
            [("S0", "go A", "A", 0.0, _V), ("A", "go D", "D", 0.0, _V), ("D", "bad format", "D", 0.0, _INV)],
            [("S0", "go C", "C", 0.0, _V), ("C", "go E", "E", 0.0, _V), ("E", "go A", "A", 0.0, _V)],
        ]
    ),
    # K = 3, all fail. τ1 S0→A→L→L; τ2 S0→A→L→L(inv); τ3 S0→B→M→N.
    "B": make_group(
        [
            [("S0", "go A", "A", 0.0, _V), ("A", "go L", "L", 0.0, _V), ("L", "wait", "L", 0.0, _V)],
            [("S0", "go A", "A", 0.0, _V), ("A", "go L", "L", 0.0, _V), ("L", "bad format", "L", 0.0, _INV)],
            [("S0", "go B", "B", 0.0, _V), ("B", "go M", "M", 0.0, _V), ("M", "go N", "N", 0.0, _V)],
        ]
    ),
    # K = 3, all succeed. τ1 S0→A→g; τ2 S0→A→A→g; τ3 S0→B→A→g.
    "C": make_group(
        [
            [("S0", "go A", "A", 0.0, _V), ("A", "finish", _G, 10.0, _V)],
            [("S0", "go A", "A", 0.0, _V), ("A", "wait", "A", 0.0, _V), ("A", "finish", _G, 10.0, _V)],
            [("S0", "go B", "B", 0.0, _V), ("B", "go A", "A", 0.0, _V), ("A", "finish", _G, 10.0, _V)],
        ]
    ),
}

EXAMPLES: dict[str, dict[str, Any]] = {
    "A": {
        "group": GROUPS["A"],
        "row_labels": [
            "τ1 t=0 S0→A", "τ1 t=1 A→B", "τ1 t=2 B→g", "τ2 t=0 S0→C", "τ2 t=1 C→C (inv)", "τ2 t=2 C→B", "τ2 t=3 B→g",
            "τ3 t=0 S0→A", "τ3 t=1 A→D", "τ3 t=2 D→D (inv)", "τ4 t=0 S0→C", "τ4 t=1 C→E", "τ4 t=2 E→A",
        ],
        "columns": {
            "grpo": [
                0.8922, 0.8922, 0.8922, 0.8922, 0.873, 0.8922, 0.8922, -1.0345, -1.0345, -1.0538, -1.0345, -1.0345,
                -1.0345,
            ],
            "gigpo_step_return": [9.025, 9.5, 10.0, 8.5738, 8.925, 9.5, 10.0, 0.0, 0.0, -0.1, 0.0, 0.0, 0.0],
            "gigpo_adv_episode_ms": [
                0.8922, 0.8922, 0.8922, 0.8922, 0.873, 0.8922, 0.8922, -1.0345, -1.0345, -1.0538, -1.0345, -1.0345,
                -1.0345,
            ],
            "gigpo_adv_step_ms": [
                0.9098, 0.7071, 0.0, 0.8211, 0.5225, 0.6305, 0.0, -0.8655, -0.7071, 0.0, -0.8655, -1.153, 0.0,
            ],
            "gigpo_total_ms": [
                1.8021, 1.5993, 0.8922, 1.7133, 1.3955, 1.5227, 0.8922, -1.9, -1.7416, -1.0538, -1.9, -2.1875, -1.0345,
            ],
            "gigpo_total_mean": [
                9.2561, 9.3808, 4.6308, 8.8048, 7.3141, 7.9891, 4.6308, -9.7689, -10.1192, -5.4692, -9.7689, -11.5109,
                -5.3692,
            ],
            "graphgpo_step_reward_gamma01": [0.1, 1.0, 10.0, 0.1, 0.0, 1.0, 10.0, 0.1, 0.001, -0.099, 0.1, 0.01, 0.1],
            "graphgpo_total_ms_gamma01": [
                0.8922, 1.5993, 0.8922, 0.8922, 0.2869, 2.0469, 0.8922, -1.0345, -1.7416, -1.0538, -1.0345, -1.6031,
                -1.0345,
            ],
            "graphgpo_step_reward_gamma02": [0.4, 2.0, 10.0, 0.4, 0.3, 2.0, 10.0, 0.4, 0.016, -0.084, 0.4, 0.08, 0.4],
            "graphgpo_total_mean_gamma02": [
                4.6308, 5.6228, 4.6308, 4.6308, 4.0374, 5.8374, 4.6308, -5.3692, -6.3612, -5.4692, -5.3692, -6.0826,
                -5.3692,
            ],
            "milegpo_alfworld_r_graph": [0.4, 2.0, 10.0, 0.4, 0.4, 2.0, 10.0, 0.4, 0.0, 0.0, 0.4, 0.08, 0.4],
            "milegpo_alfworld_delta_pos": [
                0.1543, 0.78, 0.0, 0.2626, 0.0, 0.6717, 0.0, 0.1543, 0.0, 0.0, 0.2626, 0.0, 0.176,
            ],
            "milegpo_alfworld_delta_neg": [0.04, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.04, 0.2, 0.0, 0.0, 0.008, 0.04],
            "milegpo_alfworld_r_mix": [
                0.6858, 3.9501, 10.0, 1.0566, 0.4, 3.6793, 10.0, 0.6858, -0.5, 0.0, 1.0566, 0.06, 0.74,
            ],
            "milegpo_alfworld_adv_graph": [
                0.0, 0.7071, 0.0, 0.0, -0.4695, 1.1484, 0.0, 0.0, -0.7071, 0.0, 0.0, -0.6789, 0.0,
            ],
            "milegpo_alfworld_adv_mix": [
                -0.866, 0.7071, 0.0, 0.866, -0.517, 1.1527, 0.0, -0.866, -0.7071, 0.0, 0.866, -0.6356, 0.0,
            ],
            "milegpo_alfworld_adv_res": [
                -0.866, 0.0, 0.0, 0.866, -0.0475, 0.0043, 0.0, -0.866, 0.0, 0.0, 0.866, 0.0432, 0.0,
            ],
            "milegpo_alfworld_adv_episode": [
                0.8922, 0.8922, 0.8922, 0.8922, 0.873, 0.8922, 0.8922, -1.0345, -1.0345, -1.0538, -1.0345, -1.0345,
                -1.0345,
            ],
            "milegpo_alfworld_advantage_full": [
                0.719, 1.5993, 0.8922, 1.0654, 0.394, 2.0414, 0.8922, -1.2077, -1.7416, -1.0538, -0.8613, -1.7047,
                -1.0345,
            ],
            "milegpo_alfworld_advantage_rcs": [
                0.719, 1.5993, 0.8922, 1.0654, 0.3952, 2.0414, 0.8922, -1.2077, -1.7416, -1.0538, -0.8613, -1.7059,
                -1.0345,
            ],
            "milegpo_alfworld_advantage_md": [
                0.719, 1.5993, 0.8922, 1.0654, 0.4053, 2.0404, 0.8922, -1.2077, -1.7416, -1.0538, -0.8613, -1.715,
                -1.0345,
            ],
            "milegpo_webshop_r_graph": [0.4, 2.0, 10.0, 0.4, 0.4, 2.0, 10.0, 0.4, 0.0, 0.0, 0.4, 0.08, 0.4],
            "milegpo_webshop_delta_pos": [0.0, 0.78, 0.0, 0.1061, 0.0, 0.6717, 0.0, 0.0, 0.0, 0.0, 0.1061, 0.0, 0.176],
            "milegpo_webshop_delta_neg": [0.04, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.04, 0.2, 0.0, 0.0, 0.008, 0.04],
            "milegpo_webshop_r_mix": [0.3, 3.9501, 10.0, 0.6652, 0.4, 3.6793, 10.0, 0.3, -0.5, 0.0, 0.6652, 0.06, 0.74],
            "milegpo_webshop_adv_graph": [0.0, 1.0, 0.0, 0.0, -0.4933, 1.2067, 0.0, 0.0, -1.0, 0.0, 0.0, -0.7133, 0.0],
            "milegpo_webshop_adv_mix": [
                -0.1826, 2.225, 0.0, 0.1826, -1.0464, 2.3329, 0.0, -0.1826, -2.225, 0.0, 0.1826, -1.2864, 0.0,
            ],
            "milegpo_webshop_adv_res": [
                -0.1826, 1.225, 0.0, 0.1826, -0.5531, 1.1262, 0.0, -0.1826, -1.225, 0.0, 0.1826, -0.5731, 0.0,
            ],
            "milegpo_webshop_adv_episode": [
                4.6308, 4.6308, 4.6308, 4.6308, 4.5308, 4.6308, 4.6308, -5.3692, -5.3692, -5.4692, -5.3692, -5.3692,
                -5.3692,
            ],
            "milegpo_webshop_advantage_full": [
                4.4482, 6.8558, 4.6308, 4.8133, 3.4843, 6.9636, 4.6308, -5.5518, -7.5943, -5.4692, -5.1867, -6.6557,
                -5.3692,
            ],
            "milegpo_webshop_advantage_rcs": [
                4.5808, 6.6005, 4.6308, 4.6808, 3.5896, 6.7532, 4.6308, -5.4192, -7.3389, -5.4692, -5.3192, -6.5504,
                -5.3692,
            ],
            "milegpo_webshop_advantage_md": [
                4.5808, 5.8808, 4.6308, 4.6808, 4.0441, 5.8441, 4.6308, -5.4192, -6.6192, -5.4692, -5.3192, -6.0959,
                -5.3692,
            ],
        },
        "milegpo": {
            "alfworld": {
                "candidates": {
                    "A": {
                        "lift": 0.0, "coverage": 0.5, "centrality": 0.8, "score0": 0.7, "branch": 0.0,
                        "progress": 0.5556, "retained": 1, "score_pcc": 1.0889,
                    },
                    "B": {
                        "lift": 0.5, "coverage": 1.0, "centrality": 0.6, "score0": 1.65, "branch": 1.0, "progress": 1.0,
                        "retained": 1, "score_pcc": 4.95,
                    },
                    "C": {
                        "lift": 0.0, "coverage": 0.5, "centrality": 1.0, "score0": 0.75, "branch": 0.5,
                        "progress": 0.6667, "retained": 1, "score_pcc": 1.625,
                    },
                    "S0": {
                        "lift": 0.0, "coverage": 1.0, "centrality": 0.4, "score0": 1.1, "branch": 0.0, "progress": 0.0,
                        "retained": 0, "score_pcc": 0.0,
                    },
                },
                "traps": {
                    "D": {"lift_neg": 0.5, "fail_coverage": 0.5, "revisit": 1.0, "score": 0.625},
                },
                "potential_pos": {
                    "A": 0.22, "B": 1.0, "C": 0.3283, "D": 0.0, "E": 0.044, "S0": 0.0657, SUCCESS_STATE: 0.0,
                },
                "potential_neg": {"A": 0.2, "B": 0.0, "C": 0.008, "D": 1.0, "E": 0.04, "S0": 0.04, SUCCESS_STATE: 0.0},
            },
            "webshop": {
                "candidates": {
                    "A": {
                        "lift": 0.0, "coverage": 0.5, "centrality": 0.8, "score0": 0.7, "branch": 0.0,
                        "progress": 0.5556, "retained": 1, "score_pcc": 1.0889,
                    },
                    "B": {
                        "lift": 0.5, "coverage": 1.0, "centrality": 0.6, "score0": 1.65, "branch": 1.0, "progress": 1.0,
                        "retained": 1, "score_pcc": 4.95,
                    },
                    "C": {
                        "lift": 0.0, "coverage": 0.5, "centrality": 1.0, "score0": 0.75, "branch": 0.5,
                        "progress": 0.6667, "retained": 1, "score_pcc": 1.625,
                    },
                    "S0": {
                        "lift": 0.0, "coverage": 1.0, "centrality": 0.4, "score0": 1.1, "branch": 0.0, "progress": 0.0,
                        "retained": 1, "score_pcc": 1.1,
                    },
                },
                "traps": {
                    "D": {"lift_neg": 0.5, "fail_coverage": 0.5, "revisit": 1.0, "score": 0.625},
                },
                "potential_pos": {
                    "A": 0.22, "B": 1.0, "C": 0.3283, "D": 0.0, "E": 0.044, "S0": 0.2222, SUCCESS_STATE: 0.0,
                },
                "potential_neg": {"A": 0.2, "B": 0.0, "C": 0.008, "D": 1.0, "E": 0.04, "S0": 0.04, SUCCESS_STATE: 0.0},
            },
        },
    },
    "B": {
        "group": GROUPS["B"],
        "row_labels": [
            "τ1 t=0 S0→A", "τ1 t=1 A→L", "τ1 t=2 L→L", "τ2 t=0 S0→A", "τ2 t=1 A→L", "τ2 t=2 L→L (inv)", "τ3 t=0 S0→B",
            "τ3 t=1 B→M", "τ3 t=2 M→N",
        ],
        "columns": {
            "grpo": [0.3333, 0.3333, 0.3333, 0.3333, 0.3333, -2.6666, 0.3333, 0.3333, 0.3333],
            "gigpo_step_return": [0.0, 0.0, 0.0, 0.0, 0.0, -0.1, 0.0, 0.0, 0.0],
            "gigpo_adv_episode_ms": [0.3333, 0.3333, 0.3333, 0.3333, 0.3333, -2.6666, 0.3333, 0.3333, 0.3333],
            "gigpo_adv_step_ms": [0.0, 0.0, 0.7071, 0.0, 0.0, -0.7071, 0.0, 0.0, 0.0],
            "gigpo_total_ms": [0.3333, 0.3333, 1.0404, 0.3333, 0.3333, -3.3737, 0.3333, 0.3333, 0.3333],
            "gigpo_total_mean": [0.0111, 0.0111, 0.0611, 0.0111, 0.0111, -0.1389, 0.0111, 0.0111, 0.0111],
            "graphgpo_step_reward_gamma01": [1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 1.0, 1.0, 1.0],
            "graphgpo_total_ms_gamma01": [0.3333, 0.3333, 1.0404, 0.3333, 0.3333, -3.3737, 0.3333, 0.3333, 0.3333],
            "graphgpo_step_reward_gamma02": [2.0, 2.0, 2.0, 2.0, 2.0, 1.9, 2.0, 2.0, 2.0],
            "graphgpo_total_mean_gamma02": [0.0111, 0.0111, 0.0611, 0.0111, 0.0111, -0.1389, 0.0111, 0.0111, 0.0111],
            "milegpo_alfworld_r_graph": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "milegpo_alfworld_delta_pos": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "milegpo_alfworld_delta_neg": [0.04, 0.2, 0.0, 0.04, 0.2, 0.0, 0.0, 0.0, 0.0],
            "milegpo_alfworld_r_mix": [-0.1, -0.5, 0.0, -0.1, -0.5, 0.0, 0.0, 0.0, 0.0],
            "milegpo_alfworld_adv_graph": [0.0, 0.0, 0.7071, 0.0, 0.0, -0.7071, 0.0, 0.0, 0.0],
            "milegpo_alfworld_adv_mix": [-0.5773, 0.0, 0.7071, -0.5773, 0.0, -0.7071, 1.1547, 0.0, 0.0],
            "milegpo_alfworld_adv_res": [-0.5773, 0.0, 0.0, -0.5773, 0.0, 0.0, 1.1547, 0.0, 0.0],
            "milegpo_alfworld_adv_episode": [0.3333, 0.3333, 0.3333, 0.3333, 0.3333, -2.6666, 0.3333, 0.3333, 0.3333],
            "milegpo_alfworld_advantage_full": [
                0.2179, 0.3333, 1.0404, 0.2179, 0.3333, -3.3737, 0.5643, 0.3333, 0.3333,
            ],
            "milegpo_alfworld_advantage_rcs": [0.2179, 0.3333, 1.0404, 0.2179, 0.3333, -3.3737, 0.5643, 0.3333, 0.3333],
            "milegpo_alfworld_advantage_md": [0.2179, 0.3333, 1.0404, 0.2179, 0.3333, -3.3737, 0.5643, 0.3333, 0.3333],
            "milegpo_webshop_r_graph": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "milegpo_webshop_delta_pos": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "milegpo_webshop_delta_neg": [0.04, 0.2, 0.0, 0.04, 0.2, 0.0, 0.0, 0.0, 0.0],
            "milegpo_webshop_r_mix": [-0.1, -0.5, 0.0, -0.1, -0.5, 0.0, 0.0, 0.0, 0.0],
            "milegpo_webshop_adv_graph": [0.0, 0.0, 0.05, 0.0, 0.0, -0.05, 0.0, 0.0, 0.0],
            "milegpo_webshop_adv_mix": [-0.0333, 0.0, 0.05, -0.0333, 0.0, -0.05, 0.0667, 0.0, 0.0],
            "milegpo_webshop_adv_res": [-0.0333, 0.0, 0.0, -0.0333, 0.0, 0.0, 0.0667, 0.0, 0.0],
            "milegpo_webshop_adv_episode": [0.0111, 0.0111, 0.0111, 0.0111, 0.0111, -0.0889, 0.0111, 0.0111, 0.0111],
            "milegpo_webshop_advantage_full": [
                -0.0222, 0.0111, 0.0611, -0.0222, 0.0111, -0.1389, 0.0778, 0.0111, 0.0111,
            ],
            "milegpo_webshop_advantage_rcs": [
                -0.0222, 0.0111, 0.0611, -0.0222, 0.0111, -0.1389, 0.0778, 0.0111, 0.0111,
            ],
            "milegpo_webshop_advantage_md": [-0.0222, 0.0111, 0.0611, -0.0222, 0.0111, -0.1389, 0.0778, 0.0111, 0.0111],
        },
        "milegpo": {
            "alfworld": {
                "candidates": {
                },
                "traps": {
                    "L": {"lift_neg": 0.0, "fail_coverage": 0.6667, "revisit": 1.0, "score": 0.1667},
                },
                "potential_pos": {"A": 0.0, "B": 0.0, "L": 0.0, "M": 0.0, "N": 0.0, "S0": 0.0},
                "potential_neg": {"A": 0.2, "B": 0.0, "L": 1.0, "M": 0.0, "N": 0.0, "S0": 0.04},
            },
            "webshop": {
                "candidates": {
                },
                "traps": {
                    "L": {"lift_neg": 0.0, "fail_coverage": 0.6667, "revisit": 1.0, "score": 0.1667},
                },
                "potential_pos": {"A": 0.0, "B": 0.0, "L": 0.0, "M": 0.0, "N": 0.0, "S0": 0.0},
                "potential_neg": {"A": 0.2, "B": 0.0, "L": 1.0, "M": 0.0, "N": 0.0, "S0": 0.04},
            },
        },
    },
    "C": {
        "group": GROUPS["C"],
        "row_labels": [
            "τ1 t=0 S0→A", "τ1 t=1 A→g", "τ2 t=0 S0→A", "τ2 t=1 A→A", "τ2 t=2 A→g", "τ3 t=0 S0→B", "τ3 t=1 B→A",
            "τ3 t=2 A→g",
        ],
        "columns": {
            "grpo": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "gigpo_step_return": [9.5, 10.0, 9.025, 9.5, 10.0, 9.025, 9.5, 10.0],
            "gigpo_adv_episode_ms": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "gigpo_adv_step_ms": [1.1547, 0.5, -0.5773, -1.5, 0.5, -0.5773, 0.0, 0.5],
            "gigpo_total_ms": [1.1547, 0.5, -0.5773, -1.5, 0.5, -0.5773, 0.0, 0.5],
            "gigpo_total_mean": [0.3167, 0.125, -0.1583, -0.375, 0.125, -0.1583, 0.0, 0.125],
            "graphgpo_step_reward_gamma01": [1.0, 10.0, 1.0, 1.0, 10.0, 0.1, 1.0, 10.0],
            "graphgpo_total_ms_gamma01": [0.5773, 0.5, 0.5773, -1.5, 0.5, -1.1547, 0.0, 0.5],
            "graphgpo_step_reward_gamma02": [2.0, 10.0, 2.0, 2.0, 10.0, 0.4, 2.0, 10.0],
            "graphgpo_total_mean_gamma02": [0.5333, 2.0, 0.5333, -6.0, 2.0, -1.0667, 0.0, 2.0],
            "milegpo_alfworld_r_graph": [2.0, 10.0, 2.0, 2.0, 10.0, 0.4, 2.0, 10.0],
            "milegpo_alfworld_delta_pos": [0.8, 0.0, 0.8, 0.0, 0.0, 0.0, 0.8, 0.0],
            "milegpo_alfworld_delta_neg": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "milegpo_alfworld_r_mix": [4.0, 10.0, 4.0, 2.0, 10.0, 0.4, 4.0, 10.0],
            "milegpo_alfworld_adv_graph": [0.5773, 0.5, 0.5773, -1.5, 0.5, -1.1547, 0.0, 0.5],
            "milegpo_alfworld_adv_mix": [0.5773, 0.5, 0.5773, -1.5, 0.5, -1.1547, 0.0, 0.5],
            "milegpo_alfworld_adv_res": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "milegpo_alfworld_adv_episode": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "milegpo_alfworld_advantage_full": [0.5773, 0.5, 0.5773, -1.5, 0.5, -1.1547, 0.0, 0.5],
            "milegpo_alfworld_advantage_rcs": [0.5773, 0.5, 0.5773, -1.5, 0.5, -1.1547, 0.0, 0.5],
            "milegpo_alfworld_advantage_md": [0.5773, 0.5, 0.5773, -1.5, 0.5, -1.1547, 0.0, 0.5],
            "milegpo_webshop_r_graph": [2.0, 10.0, 2.0, 2.0, 10.0, 0.4, 2.0, 10.0],
            "milegpo_webshop_delta_pos": [0.56, 0.0, 0.56, 0.0, 0.0, 0.0, 0.8, 0.0],
            "milegpo_webshop_delta_neg": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "milegpo_webshop_r_mix": [3.4, 10.0, 3.4, 2.0, 10.0, 0.4, 4.0, 10.0],
            "milegpo_webshop_adv_graph": [0.5333, 2.0, 0.5333, -6.0, 2.0, -1.0667, 0.0, 2.0],
            "milegpo_webshop_adv_mix": [1.0, 2.0, 1.0, -6.0, 2.0, -2.0, 0.0, 2.0],
            "milegpo_webshop_adv_res": [0.4667, 0.0, 0.4667, 0.0, 0.0, -0.9333, 0.0, 0.0],
            "milegpo_webshop_adv_episode": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "milegpo_webshop_advantage_full": [1.0, 2.0, 1.0, -6.0, 2.0, -2.0, 0.0, 2.0],
            "milegpo_webshop_advantage_rcs": [0.6333, 2.0, 0.6333, -6.0, 2.0, -1.2667, 0.0, 2.0],
            "milegpo_webshop_advantage_md": [0.5333, 2.0, 0.5333, -6.0, 2.0, -1.0667, 0.0, 2.0],
        },
        "milegpo": {
            "alfworld": {
                "candidates": {
                    "A": {
                        "lift": 0.0, "coverage": 1.0, "centrality": 1.0, "score0": 1.25, "branch": 0.0, "progress": 1.0,
                        "retained": 1, "score_pcc": 2.5,
                    },
                    "B": {
                        "lift": 0.0, "coverage": 0.3333, "centrality": 0.4, "score0": 0.4333, "branch": 0.0,
                        "progress": 0.0, "retained": 0, "score_pcc": 0.0,
                    },
                    "S0": {
                        "lift": 0.0, "coverage": 1.0, "centrality": 0.4, "score0": 1.1, "branch": 0.0, "progress": 0.0,
                        "retained": 0, "score_pcc": 0.0,
                    },
                },
                "traps": {
                },
                "potential_pos": {"A": 1.0, "B": 0.2, "S0": 0.2, SUCCESS_STATE: 0.0},
                "potential_neg": {"A": 0.0, "B": 0.0, "S0": 0.0, SUCCESS_STATE: 0.0},
            },
            "webshop": {
                "candidates": {
                    "A": {
                        "lift": 0.0, "coverage": 1.0, "centrality": 1.0, "score0": 1.25, "branch": 0.0, "progress": 1.0,
                        "retained": 1, "score_pcc": 2.5,
                    },
                    "B": {
                        "lift": 0.0, "coverage": 0.3333, "centrality": 0.4, "score0": 0.4333, "branch": 0.0,
                        "progress": 0.0, "retained": 0, "score_pcc": 0.2167,
                    },
                    "S0": {
                        "lift": 0.0, "coverage": 1.0, "centrality": 0.4, "score0": 1.1, "branch": 0.0, "progress": 0.0,
                        "retained": 1, "score_pcc": 1.1,
                    },
                },
                "traps": {
                },
                "potential_pos": {"A": 1.0, "B": 0.2, "S0": 0.44, SUCCESS_STATE: 0.0},
                "potential_neg": {"A": 0.0, "B": 0.0, "S0": 0.0, SUCCESS_STATE: 0.0},
            },
        },
    },

}

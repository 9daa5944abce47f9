"""Hypothesis strategies for random rollout groups with the structures credit must survive.

Small state alphabets force state reuse, so groups contain loops and self-loops, invalid steps, dead
ends that cannot reach the sink, all-success and all-fail groups, single-trajectory groups and
states seen only once.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from milegpo_jax.credit.rollouts import Group, Step, Trajectory

# Options of CreditConfig worth flipping in property tests (every R-choice and the main weights).
OPTION_VALUES = {
    "norm_mode": ["mean_std", "mean"],
    "episode_norm_mode": ["same", "mean_std", "mean"],
    "episode_stats": ["cross_steps", "per_trajectory"],
    "unreachable": ["zero", "dmax_plus_one"],
    "normalize_distance": [False, True],
    "stage": ["full", "rcs", "md"],
    "visit_states": ["all", "sources"],
    "degree_mode": ["distinct", "multigraph"],
    "degree_norm_include_sink": [False, True],
    "bcc_self_loops": [True, False],
    "successful_edge": ["any", "majority"],
    "progress_norm": ["all_nodes", "candidates"],
    "invalid_penalty_target": ["both", "none", "mix_only"],
    "include_start_state": [True, False],
    "trap_score_strict": [False, True],
    "theta_m": [1.1, 0.5],
    "kappa_bc": [0, 1],
    "rho": [0.0, 0.5],
    "eta": [0.2, 1.0],
    "omega": [0.2, 0.5],
    "graph_gamma": [0.1, 0.2],
    "gamma": [0.95, 0.8],
    "min_trap_visits": [2, 1],
}


@st.composite
def trajectories(draw, num_states: int, success_chance: float, shared_start: bool) -> Trajectory:
    length = draw(st.integers(1, 7))
    start = "s0" if shared_start else f"s{draw(st.integers(0, num_states - 1))}"
    path = [start] + [f"s{draw(st.integers(0, num_states - 1))}" for _ in range(length)]
    succeeded = draw(st.floats(0, 1)) < success_chance
    steps = []
    for t in range(length):
        final_success = succeeded and t == length - 1
        steps.append(
            Step(
                state=path[t],
                action=f"a{draw(st.integers(0, 2))}",
                next_state="goal" if final_success else path[t + 1],
                reward=10.0 if final_success else 0.0,
                valid=draw(st.booleans()) or draw(st.booleans()),  # ~25 % invalid
            )
        )
    return Trajectory(tuple(steps))


@st.composite
def groups(draw, max_trajectories: int = 5) -> Group:
    num_states = draw(st.integers(1, 6))
    success_chance = draw(st.sampled_from([0.0, 0.3, 0.6, 1.0]))
    shared_start = draw(st.booleans()) or draw(st.booleans())
    count = draw(st.integers(1, max_trajectories))
    return Group(tuple(draw(trajectories(num_states, success_chance, shared_start)) for _ in range(count)))


def batches_of_groups(max_groups: int = 3):
    return st.lists(groups(), min_size=1, max_size=max_groups)


def option_overrides():
    """A random subset of non-default options."""
    return st.dictionaries(st.sampled_from(sorted(OPTION_VALUES)), st.none(), max_size=6).flatmap(
        lambda keys: st.fixed_dictionaries({key: st.sampled_from(OPTION_VALUES[key]) for key in keys})
    )


# Options of the family estimators (docs/credit-family.md) worth flipping, with the shared ones.
FAMILY_OPTION_VALUES = {
    "norm_mode": ["mean_std", "mean"],
    "episode_stats": ["cross_steps", "per_trajectory"],
    "gamma": [0.95, 0.8],
    "invalid_penalty": [0.1, 1.0],
    "step_weight": [1.0, 10.0],
    "hgpo_history": [0, 1, 2, 4],
    "hgpo_alpha": [1.0, 0.5],
    "hgpo_base_group": [False, True],
    "g2po_gamma": [0.95, 0.9],
    "g2po_anchor_penalty": [0.1, 0.0],
    "beacon_gamma": [0.99, 0.9],
    "ecpo_kappa": [2.0, 0.0],
    "ecpo_tau": [4.0, 8.0],
    "progpo_coverage_reward": [1.0, 2.0],
    "progpo_base": ["gigpo", "grpo"],
    "mvpo_w_loop": [0.5, 0.0],
    "mvpo_w_progress": [1.0, 0.5],
    "mvpo_ema_beta": [0.9, 0.5],
    "mvpo_kappa_decay": [True, False],
    "mvpo_route": ["anchor", "all"],
}


@st.composite
def groups_with_milestones(draw, max_trajectories: int = 5) -> Group:
    """``groups()`` with a random per-step milestone flag (BEACON's input)."""
    group = draw(groups(max_trajectories))
    return Group(
        tuple(
            Trajectory(tuple(dataclasses.replace(step, milestone=draw(st.booleans())) for step in traj.steps))
            for traj in group.trajectories
        )
    )


def family_batches(max_groups: int = 3):
    return st.lists(groups_with_milestones(), min_size=1, max_size=max_groups)


def family_option_overrides():
    return st.dictionaries(st.sampled_from(sorted(FAMILY_OPTION_VALUES)), st.none(), max_size=6).flatmap(
        lambda keys: st.fixed_dictionaries({key: st.sampled_from(FAMILY_OPTION_VALUES[key]) for key in keys})
    )

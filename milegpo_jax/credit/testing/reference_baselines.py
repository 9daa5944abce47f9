"""Plain-Python reference of docs/credit.md, part one: rows, the rollout graph, the normalisation
primitive, the episode term and the three baselines (GRPO, GiGPO, GraphGPO).

Test oracle and benchmark baseline only: nothing at runtime imports ``milegpo_jax.credit.testing``.
It favours readability over speed: plain Python floats (float64), dicts, sets and loops, one small
function per formula, each citing the docs/credit.md section or the MileGPO paper equation it
implements ("Eq. n" always means arXiv 2608.19803 v1, as in docs/credit.md §5). MileGPO is in
``reference_milegpo.py``, the family of docs/credit-family.md in ``reference_family.py``, and the
entry points over all of them in ``reference.py``.

* ``grpo``     — §2: A_row = Norm_q(Z_row).
* ``gigpo``    — §3.2: A = episode_weight·A^E + step_weight·A^S with discounted step returns grouped by anchor.
* ``graphgpo`` — §4.2: A = step_weight·A^G + episode_weight·A^E with the graph return c·γ^d.

Choices that docs/credit.md §5.12 does not list and the config has no option for are marked
"Choice:" in comments.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Sequence
from typing import NamedTuple

from milegpo_jax.credit.config import THRESHOLD_TOLERANCE, TIE_RELATIVE_TOLERANCE, CreditConfig
from milegpo_jax.credit.rollouts import SUCCESS_STATE, Group

INF = math.inf

Edge = tuple[str, str]


# ---------------------------------------------------------------------------------------------------
# §1.1 Rows and the rollout graph
# ---------------------------------------------------------------------------------------------------


class Row(NamedTuple):
    """One step row (§1.1): trajectory index, step index and the transition it records."""

    traj: int
    t: int
    state: str
    next_state: str  # the success sink on the last step of a successful trajectory
    reward: float
    valid: bool


class RolloutGraph(NamedTuple):
    """The rows of one group and the graph G_q = (V_q, E_q) built from them (§4.2, §5.2)."""

    rows: list[Row]  # verl-agent order: trajectory-major, then time
    succeeded: list[bool]  # y_i (R2: episode env reward > 0)
    episode_rewards: list[float]  # R_i
    visits: list[list[str]]  # the visited state sequence of each trajectory (R5)
    start_states: set[str]  # s_0 of every trajectory (R6)
    nodes: list[str]  # V_q: every state and next state, first-seen order (incl. the sink)
    edges: list[Edge]  # E_q: distinct (u, v) pairs, first-seen order (R3)
    successors: dict[str, set[str]]
    predecessors: dict[str, set[str]]
    node_trajectories: dict[str, set[int]]  # T(v): trajectories visiting v, each counted once
    edge_trajectories: dict[Edge, set[int]]  # T(e): trajectories using e, each counted once

    @property
    def num_trajectories(self) -> int:
        return len(self.succeeded)


def build_graph(group: Group, visit_states: str = "all") -> RolloutGraph:
    """Builds the rows and the rollout graph of one group.

    On the last step of a successful trajectory the next state is replaced by ``SUCCESS_STATE``
    (§1.1, GraphGPO rollout loop). ``visit_states`` is R5: ``"all"`` visits s_0..s_T (every step
    state, then the last step's next state); ``"sources"`` visits the step states only.
    """
    rows: list[Row] = []
    visits: list[list[str]] = []
    for i, traj in enumerate(group.trajectories):
        last = len(traj.steps) - 1
        for t, step in enumerate(traj.steps):
            next_state = SUCCESS_STATE if (traj.succeeded and t == last) else step.next_state
            rows.append(Row(i, t, step.state, next_state, step.reward, step.valid))
        sequence = [step.state for step in traj.steps]
        if visit_states == "all":
            sequence.append(rows[-1].next_state)
        visits.append(sequence)

    nodes: list[str] = []
    edges: list[Edge] = []
    successors: dict[str, set[str]] = {}
    predecessors: dict[str, set[str]] = {}
    edge_trajectories: dict[Edge, set[int]] = {}
    for row in rows:
        for node in (row.state, row.next_state):
            if node not in successors:
                nodes.append(node)
                successors[node] = set()
                predecessors[node] = set()
        edge = (row.state, row.next_state)
        if edge not in edge_trajectories:
            edges.append(edge)
            edge_trajectories[edge] = set()
        edge_trajectories[edge].add(row.traj)
        successors[row.state].add(row.next_state)
        predecessors[row.next_state].add(row.state)

    node_trajectories: dict[str, set[int]] = {node: set() for node in nodes}
    for i, sequence in enumerate(visits):
        for node in sequence:
            node_trajectories[node].add(i)

    return RolloutGraph(
        rows=rows,
        succeeded=[traj.succeeded for traj in group.trajectories],
        episode_rewards=[traj.episode_reward for traj in group.trajectories],
        visits=visits,
        start_states={traj.steps[0].state for traj in group.trajectories},
        nodes=nodes,
        edges=edges,
        successors=successors,
        predecessors=predecessors,
        node_trajectories=node_trajectories,
        edge_trajectories=edge_trajectories,
    )


def distances_to(graph: RolloutGraph, target: str) -> dict[str, int]:
    """d(s, target) by reverse BFS over the distinct edges (unit hops, §5.2).

    Only nodes that reach ``target`` appear in the result; use ``.get(s, INF)`` for the others.
    """
    if target not in graph.predecessors:
        return {}
    distance = {target: 0}
    queue = deque([target])
    while queue:
        v = queue.popleft()
        for u in graph.predecessors[v]:
            if u not in distance:
                distance[u] = distance[v] + 1
                queue.append(u)
    return distance


def unflatten(graph: RolloutGraph, values: Sequence) -> list[list]:
    """Splits per-row values (graph.rows order) into one list per trajectory."""
    nested: list[list] = [[] for _ in range(graph.num_trajectories)]
    for row, value in zip(graph.rows, values):
        nested[row.traj].append(value)
    return nested


# ---------------------------------------------------------------------------------------------------
# §1.3 / §1.4 The normalisation primitive and the episode term
# ---------------------------------------------------------------------------------------------------


def group_statistics(values: Sequence[float], singleton: str) -> tuple[float, float]:
    """Mean and sample std (ddof = 1) of one key's members (§1.3).

    A singleton uses mean = x, std = 1 at step level (so its advantage is 0) and mean = 0, std = 1 at
    episode level (so its advantage is x/(1+eps) in mean-std mode).
    """
    n = len(values)
    if n == 1:
        return (values[0], 1.0) if singleton == "step" else (0.0, 1.0)
    mean = sum(values) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))
    return mean, std


def apply_norm(x: float, mean: float, std: float, mode: str, eps: float) -> float:
    """``mean_std``: (x − mean)/(std + eps); ``mean``: x − mean (§1.3)."""
    return (x - mean) / (std + eps) if mode == "mean_std" else x - mean


def normalize_groups(
    values: Sequence[float], keys: Sequence[Hashable], mode: str, eps: float, singleton: str = "step"
) -> list[float]:
    """Norm(x; key): normalises each value within the members sharing its key (§1.3)."""
    members: dict[Hashable, list[int]] = {}
    for j, key in enumerate(keys):
        members.setdefault(key, []).append(j)
    out = [0.0] * len(values)
    for indices in members.values():
        members_values = [values[j] for j in indices]
        mean, std = group_statistics(members_values, singleton)
        if len(indices) > 1 and std <= TIE_RELATIVE_TOLERANCE * max(abs(x) for x in members_values):
            continue  # a tie up to rounding: advantage 0 (config.TIE_RELATIVE_TOLERANCE)
        for j in indices:
            out[j] = apply_norm(values[j], mean, std, mode, eps)
    return out


def episode_scores(graph: RolloutGraph, cfg: CreditConfig) -> list[float]:
    """Z_row = R_i − p·1[row invalid] (§1.1 token score, §2)."""
    return [graph.episode_rewards[row.traj] - cfg.invalid_penalty * (not row.valid) for row in graph.rows]


def episode_advantages(graph: RolloutGraph, cfg: CreditConfig) -> list[float]:
    """Norm_q(Z_row), the episode term of every estimator (§1.4, R15, R16).

    ``cross_steps`` (verl-agent default): statistics over all step rows of the group.
    ``per_trajectory`` (the papers' one value per trajectory): Z_i = R_i − p·(invalid steps of τ_i),
    normalised over the K trajectories (K == 1: mean 0, std 1); every row of τ_i gets A_i.
    """
    mode = cfg.resolved_episode_norm_mode
    if cfg.episode_stats == "cross_steps":
        scores = episode_scores(graph, cfg)
        return normalize_groups(scores, [0] * len(scores), mode, cfg.epsilon, singleton="episode")
    invalid_steps = [0] * graph.num_trajectories
    for row in graph.rows:
        invalid_steps[row.traj] += not row.valid
    trajectory_scores = [r - cfg.invalid_penalty * n for r, n in zip(graph.episode_rewards, invalid_steps)]
    per_trajectory = normalize_groups(trajectory_scores, [0] * len(trajectory_scores), mode, cfg.epsilon, "episode")
    return [per_trajectory[row.traj] for row in graph.rows]


def anchor_keys(graph: RolloutGraph) -> list[str]:
    """Step-group keys: the identical source state of each row within the group (§3.2 step 4,
    §4.2 A^G, §5.8 Norm_{q,s_t})."""
    return [row.state for row in graph.rows]


def step_penalty(row: Row, cfg: CreditConfig) -> float:
    """The invalid-action penalty p·1[row invalid] applied to step rewards (§1.2)."""
    return cfg.invalid_penalty if not row.valid else 0.0


# ---------------------------------------------------------------------------------------------------
# §2 GRPO
# ---------------------------------------------------------------------------------------------------


def grpo_details(group: Group, cfg: CreditConfig) -> dict:
    """GRPO (§2): A_row = Norm_q(Z_row), the episode term alone.

    Choice: GRPO has no step/episode weights (verl-agent ``compute_grpo_outcome_advantage``), so
    ``episode_weight`` is not applied.
    """
    graph = build_graph(group, "all")
    adv_episode = episode_advantages(graph, cfg)
    rows = [{"adv_episode": a, "advantage": a} for a in adv_episode]
    return {"rows": unflatten(graph, rows)}


# ---------------------------------------------------------------------------------------------------
# §3 GiGPO
# ---------------------------------------------------------------------------------------------------


def discounted_returns(graph: RolloutGraph, gamma: float) -> list[float]:
    """R_t = Σ_{k≥t} γ^{k−t} r_k per row (§3.1, ``compute_step_discounted_returns``)."""
    returns = [0.0] * len(graph.rows)
    running: dict[int, float] = {}
    for j in reversed(range(len(graph.rows))):
        row = graph.rows[j]
        running[row.traj] = row.reward + gamma * running.get(row.traj, 0.0)
        returns[j] = running[row.traj]
    return returns


def gigpo_details(group: Group, cfg: CreditConfig) -> dict:
    """GiGPO, verl-agent code semantics (§3.2).

    Rows carry ``step_return`` (R_t after the −p invalid penalty), ``adv_episode`` (A^E),
    ``adv_step`` (A^S) and ``advantage`` = episode_weight·A^E + step_weight·A^S (verl-agent has no
    episode weight, i.e. 1, the default).
    """
    graph = build_graph(group, "all")
    # Steps 1-2: discounted return, then the invalid penalty (not discounted, not propagated).
    step_returns = [r - step_penalty(row, cfg) for r, row in zip(discounted_returns(graph, cfg.gamma), graph.rows)]
    adv_episode = episode_advantages(graph, cfg)  # step 3
    adv_step = normalize_groups(step_returns, anchor_keys(graph), cfg.norm_mode, cfg.epsilon)  # steps 4-5
    rows = [
        {"step_return": r, "adv_episode": a_e, "adv_step": a_s, "advantage": cfg.episode_weight * a_e + cfg.step_weight * a_s}  # step 6
        for r, a_e, a_s in zip(step_returns, adv_episode, adv_step)
    ]
    return {"rows": unflatten(graph, rows)}


# ---------------------------------------------------------------------------------------------------
# §4 GraphGPO and the graph return shared with MileGPO (§5.3)
# ---------------------------------------------------------------------------------------------------


def return_distances(graph: RolloutGraph, cfg: CreditConfig) -> dict[str, float]:
    """d(s, g) as used by the graph return, with R4's unreachable rule.

    ``zero`` (paper, §5.3): unreachable states keep d = ∞ so their return is 0.
    ``dmax_plus_one`` (GraphGPO code, §4.2): unreachable d = (max finite d) + 1; a group with no
    success gives every node d = 1.
    """
    if SUCCESS_STATE not in graph.predecessors:
        return {v: (1 if cfg.unreachable == "dmax_plus_one" else INF) for v in graph.nodes}
    finite = distances_to(graph, SUCCESS_STATE)
    fallback = max(finite.values()) + 1 if cfg.unreachable == "dmax_plus_one" else INF
    return {v: finite.get(v, fallback) for v in graph.nodes}


def graph_return(row: Row, distance: dict[str, float], cfg: CreditConfig) -> float:
    """r^G = c·γ_G^{d(s_{t+1})} (§4.2 code convention, MileGPO Eq. 1); 0 when d = ∞.

    ``normalize_distance`` (GraphGPO option): r = c·γ_G^{d(s_{t+1}) − d(s_t) + 1}.
    """
    d_next = distance[row.next_state]
    if math.isinf(d_next):
        return 0.0
    exponent = d_next - distance[row.state] + 1 if cfg.normalize_distance else d_next
    return cfg.success_reward * cfg.graph_gamma**exponent


def graphgpo_details(group: Group, cfg: CreditConfig) -> dict:
    """GraphGPO, verl-agent recipe code semantics (§4.2).

    Rows carry ``step_reward`` (r^G after the −p invalid penalty), ``adv_graph`` (A^G),
    ``adv_episode`` (A^E) and ``advantage`` = step_weight·A^G + episode_weight·A^E.
    """
    graph = build_graph(group, "all")
    distance = return_distances(graph, cfg)
    step_rewards = [graph_return(row, distance, cfg) - step_penalty(row, cfg) for row in graph.rows]
    adv_graph = normalize_groups(step_rewards, anchor_keys(graph), cfg.norm_mode, cfg.epsilon)
    adv_episode = episode_advantages(graph, cfg)
    rows = [
        {
            "step_reward": r,
            "adv_graph": a_g,
            "adv_episode": a_e,
            "advantage": cfg.step_weight * a_g + cfg.episode_weight * a_e,
        }
        for r, a_g, a_e in zip(step_rewards, adv_graph, adv_episode)
    ]
    return {"rows": unflatten(graph, rows)}

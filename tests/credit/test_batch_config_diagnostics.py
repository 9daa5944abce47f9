"""Batch building, configuration and diagnostics of the credit engine."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from milegpo_jax.credit.api import compute_credit
from milegpo_jax.credit.batch import SINK, build_batch, bucket_size
from milegpo_jax.credit.columns import RolloutColumns, columns_from_groups
from milegpo_jax.config import parse_credit_options
from milegpo_jax.credit.config import CreditConfigError, make_credit_config
from milegpo_jax.credit.limits import bucketed_shape
from milegpo_jax.credit.rollouts import make_group
from tests.credit.spec_vectors import EXAMPLES


def test_bucket_sizes_are_powers_of_two():
    assert [bucket_size(n) for n in (0, 1, 2, 3, 5, 8, 9, 100)] == [1, 1, 2, 4, 8, 8, 16, 128]
    assert bucket_size(3, minimum=16) == 16


def test_batch_maps_states_to_dense_ids_with_the_sink_first():
    batch, layout = build_batch(columns_from_groups([EXAMPLES["A"]["group"], EXAMPLES["B"]["group"]]), min_steps=1, min_nodes=1)
    assert batch.src.shape == (2, 4, 4) and batch.node_mask.shape == (2, 8)
    assert layout.node_names[0] == ("success", "S0", "A", "B", "C", "D", "E")
    assert layout.node_names[1][0] == "success"
    # The last step of a successful trajectory enters the sink; a failed one ends at its own state.
    assert batch.dst[0, 0, 2] == SINK and batch.last_state[0, 0] == SINK
    assert layout.node_names[0][batch.last_state[0, 3]] == "A"
    # The sink is a real node only where some trajectory succeeded (A yes, B no).
    assert batch.node_mask[0].tolist() == [True] * 7 + [False]
    assert batch.node_mask[1, SINK] == False  # noqa: E712
    assert batch.step_mask.sum() == 13 + 9 and batch.traj_mask.sum() == 7
    assert batch.valid[0, 1, 1] == False and batch.reward[0, 1, 3] == 10.0  # noqa: E712
    assert layout.unpad(np.arange(32).reshape(2, 4, 4)) == [
        [[0, 1, 2], [4, 5, 6, 7], [8, 9, 10], [12, 13, 14]],
        [[16, 17, 18], [20, 21, 22], [24, 25, 26]],
    ]


def _ids_by_first_sight(columns: RolloutColumns) -> tuple[list, list, list, list]:
    """docs/credit.md §1.1 spelled out with a dict per group: node ids (sink 0, then states in order of
    first appearance, s_t before s_t+1) and action ids, per step, trajectory-major; the node names."""
    src, dst, action, names = [], [], [], []
    step = trajectory = 0
    for size in columns.group_sizes:
        nodes, actions = {}, {}
        for _ in range(size):
            length = columns.lengths[trajectory]
            success = sum(columns.reward[step : step + length]) > 0.0
            for t in range(length):
                key = nodes.setdefault(columns.state[step], len(nodes) + 1)
                final_sink = success and t == length - 1
                src.append(key)
                dst.append(SINK if final_sink else nodes.setdefault(columns.next_state[step], len(nodes) + 1))
                action.append(actions.setdefault(columns.action[step], len(actions)))
                step += 1
            trajectory += 1
        names.append(("success", *(columns.state_names[code] for code in nodes)))
    return src, dst, action, names


@pytest.mark.parametrize("code_span", [3, 40, 10**7])  # 10**7: codes too sparse for a dense table
def test_batch_ids_follow_first_appearance_per_group(code_span):
    rng = np.random.default_rng(code_span)
    for _ in range(20):
        group_sizes = rng.integers(1, 4, rng.integers(1, 5))
        lengths = rng.integers(1, 7, group_sizes.sum())
        steps = int(lengths.sum())
        state_names = _NamesOf()
        columns = RolloutColumns(
            state=rng.integers(0, code_span, steps), next_state=rng.integers(0, code_span, steps),
            action=rng.integers(0, code_span, steps), reward=np.where(rng.random(steps) < 0.2, 10.0, 0.0),
            valid=rng.random(steps) < 0.9, milestone=rng.integers(-1, 2, steps).astype(np.int8),
            lengths=lengths, group_sizes=group_sizes, state_names=state_names,
        )
        batch, layout = build_batch(columns)
        src, dst, action, names = _ids_by_first_sight(columns)
        mask = batch.step_mask
        assert (batch.src[mask].tolist(), batch.dst[mask].tolist(), batch.action[mask].tolist()) == (src, dst, action)
        assert list(layout.node_names) == names


def _edges_by_first_use(batch) -> tuple[list, list, list]:
    """docs/credit-implementation.md §1.1 spelled out with a dict and a set per group: each step's edge id (distinct
    (u, v) node pairs in order of first use), whether it is its trajectory's first use of the edge,
    and each group's edge list."""
    edge, first_use, edge_lists = [], [], []
    G, K, T = batch.src.shape
    for g in range(G):
        ids, used = {}, set()
        for k in range(K):
            for t in range(T):
                if batch.step_mask[g, k, t]:
                    e = ids.setdefault((int(batch.src[g, k, t]), int(batch.dst[g, k, t])), len(ids))
                    edge.append(e)
                    first_use.append((e, k) not in used)
                    used.add((e, k))
        edge_lists.append(list(ids))
    return edge, first_use, edge_lists


@pytest.mark.parametrize("code_span", [3, 12, 10**7])
def test_batch_edges_are_the_distinct_transitions_in_order_of_first_use(code_span):
    rng = np.random.default_rng(code_span)
    for _ in range(20):
        group_sizes = rng.integers(1, 5, rng.integers(1, 5))
        lengths = rng.integers(1, 40, group_sizes.sum())  # long groups: many collisions in the edge table
        steps = int(lengths.sum())
        columns = RolloutColumns(
            state=rng.integers(0, code_span, steps), next_state=rng.integers(0, code_span, steps),
            action=rng.integers(0, 3, steps), reward=np.where(rng.random(steps) < 0.1, 10.0, 0.0),
            valid=np.ones(steps, bool), milestone=np.zeros(steps, np.int8),
            lengths=lengths, group_sizes=group_sizes, state_names=_NamesOf(),
        )
        batch, _ = build_batch(columns)
        edge, first_use, edge_lists = _edges_by_first_use(batch)
        mask, E = batch.step_mask, batch.edge_mask.shape[-1]
        assert (batch.edge[mask].tolist(), batch.first_use[mask].tolist()) == (edge, first_use)
        assert (batch.edge[~mask] == E).all() and not batch.first_use[~mask].any()
        assert E == bucket_size(max(map(len, edge_lists)), 8)
        for g, edges in enumerate(edge_lists):
            n = len(edges)
            assert batch.edge_mask[g].tolist() == [True] * n + [False] * (E - n)
            assert list(zip(batch.edge_src[g, :n].tolist(), batch.edge_dst[g, :n].tolist())) == edges
        assert bucketed_shape(groups_from_columns(columns))[-1] == E  # the memory check's mirror


def groups_from_columns(columns: RolloutColumns) -> list:
    """The columns as ``Group`` records (state keys named by code)."""
    groups, step, trajectory = [], 0, 0
    for size in columns.group_sizes:
        trajectories = []
        for _ in range(size):
            steps = []
            for _ in range(columns.lengths[trajectory]):
                steps.append((f"s{columns.state[step]}", f"a{columns.action[step]}", f"s{columns.next_state[step]}",
                              float(columns.reward[step]), True))
                step += 1
            trajectories.append(steps)
            trajectory += 1
        groups.append(make_group(trajectories))
    return groups


class _NamesOf(dict):
    """code -> name for any code (the random columns above draw codes up to 10**7)."""

    def __getitem__(self, code):
        return f"s{code}"


def test_batch_without_buckets_and_with_minimum_sizes():
    groups = [EXAMPLES["C"]["group"]]
    exact, _ = build_batch(columns_from_groups(groups), bucket=False, min_steps=1, min_nodes=1)
    assert exact.src.shape == (1, 3, 3) and exact.node_mask.shape == (1, 4)
    padded, _ = build_batch(columns_from_groups(groups), min_groups=4, min_trajectories=8, min_steps=16, min_nodes=32)
    assert padded.src.shape == (4, 8, 16) and padded.node_mask.shape == (4, 32)


def test_batch_rejects_empty_groups_and_trajectories():
    with pytest.raises(ValueError, match="no groups"):
        build_batch(columns_from_groups([]))
    with pytest.raises(ValueError, match=r"groups\[0\]: no trajectories"):
        build_batch(columns_from_groups([make_group([])]))


def _columns(lengths, group_sizes, steps=None):
    steps = sum(lengths) if steps is None else steps
    codes = np.arange(steps, dtype=np.int64)
    return RolloutColumns(
        codes, codes, codes, np.zeros(steps), np.ones(steps, bool), np.zeros(steps, np.int8),
        np.asarray(lengths, np.int64), np.asarray(group_sizes, np.int64), [f"s{i}" for i in range(steps)],
    )


def test_columns_check_their_counts_and_name_the_first_empty_place():
    assert len(_columns([2, 1, 3], [1, 2]).state) == 6
    with pytest.raises(ValueError, match="do not add up to the steps"):
        _columns([2, 1], [2], steps=4)
    with pytest.raises(ValueError, match="do not add up to the steps"):
        _columns([2, 1], [1])
    with pytest.raises(ValueError, match=r"^groups\[1\]: no trajectories$"):
        _columns([2, 1], [2, 0, 0])
    with pytest.raises(ValueError, match=r"^groups\[1\]\.trajectories\[1\]: no steps$"):
        _columns([2, 1, 0, 3], [1, 3])
    with pytest.raises(ValueError, match="entries for"):
        RolloutColumns(*(np.zeros(3, np.int64),) * 2, np.zeros(2, np.int64), np.zeros(3), np.ones(3, bool),
                       np.zeros(3, np.int8), np.array([3]), np.array([1]), ["a"])


def test_recipes_follow_the_run_scripts_and_table_5():
    alfworld, webshop = make_credit_config("milegpo", "alfworld"), make_credit_config("milegpo", "webshop")
    assert (alfworld.norm_mode, alfworld.eta, alfworld.theta_m, alfworld.rho, alfworld.kappa_bc) == (
        "mean_std", 0.2, 1.1, 0.0, 0)
    assert (webshop.norm_mode, webshop.eta, webshop.theta_m, webshop.rho, webshop.kappa_bc) == (
        "mean", 1.0, 0.5, 0.5, 1)
    shared = ("graph_gamma", "omega", "gamma_phi", "shaping_coef", "w_pos", "w_neg", "w_centrality", "w_revisit",
              "min_trap_score", "unreachable", "success_reward", "invalid_penalty")
    assert [getattr(alfworld, f) for f in shared] == [0.2, 0.2, 1.0, 0.25, 1.0, 0.25, 0.25, 0.25, 0.1, "zero", 10.0, 0.1]
    assert make_credit_config("graphgpo", "alfworld").graph_gamma == 0.1
    assert make_credit_config("graphgpo", "webshop").graph_gamma == 0.2
    assert make_credit_config("graphgpo").unreachable == "dmax_plus_one"
    assert make_credit_config("gigpo", "webshop").norm_mode == "mean"
    assert make_credit_config("milegpo") == alfworld


def test_config_is_frozen_hashable_and_typed():
    text = parse_credit_options(["omega=0.5", "kappa_bc=1", "bcc_self_loops=false"])  # the CLI's --set
    cfg = make_credit_config("milegpo", overrides={**text, "rho": 1})
    assert (cfg.omega, cfg.kappa_bc, cfg.bcc_self_loops, cfg.rho) == (0.5, 1, False, 1.0)
    assert hash(cfg) == hash(dataclasses.replace(cfg))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.omega = 0.3  # type: ignore[misc]
    with pytest.raises(CreditConfigError, match="unknown credit option 'estimator'"):
        make_credit_config("grpo", overrides={"estimator": "gigpo"})
    with pytest.raises(CreditConfigError, match="kappa_bc=2"):
        make_credit_config("milegpo", overrides={"kappa_bc": 2})
    with pytest.raises(CreditConfigError, match="expected true/false"):
        make_credit_config("milegpo", overrides={"bcc_self_loops": "maybe"})
    with pytest.raises(CreditConfigError, match="expected true/false"):
        parse_credit_options(["bcc_self_loops=maybe"])


@pytest.mark.parametrize(
    ("recipe", "coverage_only", "weak"), [("alfworld", 0.0, 0.25), ("webshop", 0.25, 0.0)]
)
def test_diagnostics_of_example_a_by_hand(recipe, coverage_only, weak):
    # Same-state pairs with different actions: S0 gives 4 (a vs a2), A 1, C 3 -> 8. Ties of r^G: the
    # 4 pairs at S0 (all 0.4). Opposite outcomes among them: (τ1, τ4) and (τ2, τ3); r^M orders only
    # (τ2 > τ3) correctly. Candidates S0, A, B, C: progress > 0 for A, B, C; branch > 0 for B, C; S0
    # has neither, and m(S0) = 1 reaches θ_m only in the WebShop recipe. Rows leaving a state that
    # >= 2 trajectories leave: S0 4, A 2, B 2, C 3 -> 11 of 13.
    result = compute_credit(columns_from_groups([EXAMPLES["A"]["group"]]), make_credit_config("milegpo", recipe))
    d = result.diagnostics
    assert (d["same_state_action_pairs"], d["opposite_outcome_tied_pairs"], d["traps"]) == (8, 2, 1)
    assert d["tie_share"] == 0.5 and d["tie_correction_rate"] == 0.5
    assert d["milestone_candidates"] == 4 and d["candidates_local_evidence"] == 0.75
    assert d["candidates_coverage_only"] == coverage_only and d["candidates_weak"] == weak
    assert d["evidence_positive_progress"] == 1.0
    assert d["evidence_positive_branch"] == pytest.approx(2 / 3) and d["evidence_both"] == pytest.approx(2 / 3)
    assert d["shared_state_fraction"] == pytest.approx(11 / 13)
    assert d["zero_advantage_fraction"] == 0.0


def test_zero_advantage_fraction_and_empty_ratios():
    # Example C, GRPO: every trajectory succeeds with no invalid step -> every advantage is 0; there is
    # no trap and no opposite-outcome pair, so that ratio is None rather than a made-up 0.
    d = compute_credit(columns_from_groups([EXAMPLES["C"]["group"]]), make_credit_config("grpo")).diagnostics
    assert d["zero_advantage_fraction"] == 1.0
    assert d["opposite_outcome_tied_pairs"] == 0 and d["tie_correction_rate"] is None


def test_family_recipes_and_options():
    assert make_credit_config("beacon", "alfworld").step_weight == 10.0
    assert make_credit_config("beacon", "webshop").invalid_penalty == 1.0
    assert make_credit_config("hgpo", "webshop").norm_mode == "mean"
    assert make_credit_config("mvpo", "webshop").norm_mode == "mean_std"
    for bad, message in (
        ({"hgpo_history": -1}, "hgpo_history=-1"),
        ({"mvpo_ema_beta": 1.0}, "mvpo_ema_beta=1.0"),
        ({"ecpo_tau": 0}, "ecpo_tau=0.0"),
        ({"mvpo_route": "some"}, "mvpo_route='some'"),
    ):
        with pytest.raises(CreditConfigError, match=message):
            make_credit_config("mvpo", overrides=bad)


def test_mvpo_ema_chains_through_compute_credit():
    """The EMA returned by one call is the next call's input (the trainer's state)."""
    groups = [EXAMPLES["A"]["group"]]  # success share 0.5
    cfg = make_credit_config("mvpo")
    first = compute_credit(columns_from_groups(groups), cfg, with_diagnostics=False)
    second = compute_credit(columns_from_groups(groups), cfg, with_diagnostics=False, ema_prev=first.ema)
    assert first.ema == pytest.approx(0.05) and second.ema == pytest.approx(0.9 * 0.05 + 0.05)
    assert compute_credit(columns_from_groups(groups), make_credit_config("gigpo"), with_diagnostics=False, ema_prev=0.3).ema == pytest.approx(0.3)


def test_the_success_ema_is_a_diagnostic_of_the_estimator_that_carries_it():
    """A spec that reads the EMA (MVPO's) reports it among the diagnostics; no other does."""
    columns = columns_from_groups([EXAMPLES["A"]["group"]])
    mvpo = compute_credit(columns, make_credit_config("mvpo"))
    assert mvpo.diagnostics["mvpo_success_ema"] == mvpo.ema == pytest.approx(0.05)
    assert not [key for key in compute_credit(columns, make_credit_config("gigpo")).diagnostics if "ema" in key]


def test_step_advantages_are_the_nested_advantages_in_step_order():
    """The trainer pairs ``step_advantages[i]`` with the i-th step of the columns (trajectory-major)."""
    groups = [EXAMPLES[name]["group"] for name in ("A", "B", "C")]
    result = compute_credit(columns_from_groups(groups), make_credit_config("milegpo"), with_diagnostics=False)
    steps = [(g, k, t) for g, group in enumerate(groups) for k, traj in enumerate(group.trajectories) for t in range(len(traj.steps))]
    assert result.step_advantages.dtype == np.float64 and result.step_advantages.shape == (len(steps),)
    assert result.step_advantages.tolist() == [result.advantages[g][k][t] for g, k, t in steps]
    assert result.step_advantages.tolist() == [float(result.padded_advantages[g, k, t]) for g, k, t in steps]
    assert len({round(a, 6) for a in result.step_advantages.tolist()}) > 3  # not a constant that would hide a mix-up


def test_a_batch_without_a_host_part_serves_the_estimators_that_do_not_read_it():
    """Each host part is built alone (its pass only, with what it needs), leaves the other fields
    None, and serves exactly the estimators whose spec does not read a missing part."""
    from milegpo_jax.credit import registry
    from milegpo_jax.credit.batch import CreditBatch, padded_batch
    from milegpo_jax.credit.estimators import estimate_advantages, milegpo_terms, registered_estimators
    from milegpo_jax.credit.passes import PART_FIELDS

    columns = columns_from_groups([EXAMPLES["A"]["group"], EXAMPLES["C"]["group"]])
    full, _, _ = padded_batch(columns)
    assert full.parts == set(PART_FIELDS)
    rows_only, _, _ = padded_batch(columns, parts=())
    assert rows_only.parts == frozenset()
    for field in CreditBatch._fields:
        if field in CreditBatch._field_defaults:  # a host part's field
            assert getattr(rows_only, field) is None, field
        else:
            np.testing.assert_array_equal(getattr(rows_only, field), getattr(full, field))
    hops, _, _ = padded_batch(columns, parts=("hops",))
    assert hops.parts == {"hops", "edges"}  # the hops are found along the edges
    np.testing.assert_array_equal(hops.sink_hops, full.sink_hops)
    for part in PART_FIELDS:
        batch, _, _ = padded_batch(columns, parts=set(PART_FIELDS) - {part})
        assert batch.parts == set(PART_FIELDS) - {part} or part == "edges"  # kept for the hops
        for name in registered_estimators():
            cfg = make_credit_config(name)
            if part in registry.host_parts(name) - batch.parts:
                with pytest.raises(ValueError, match=f"{name}: the batch was built without its host parts {part}"):
                    estimate_advantages(batch, cfg)
            else:
                np.testing.assert_array_equal(estimate_advantages(batch, cfg), estimate_advantages(full, cfg))
    with pytest.raises(ValueError, match="without its host parts edges, hops"):
        milegpo_terms(rows_only, make_credit_config("milegpo"))

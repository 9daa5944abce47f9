"""Credit benchmark: vectorised jnp estimators against the plain-Python reference, in one process.

Batch: 16 groups x 8 rollouts x up to 50 steps of ALFWorld-like rollouts (``credit/testing/synthetic.py``:
shared start state, loops, traps, 25-50 % successes; every step carries a milestone flag, set on the
first visit of each new state, so that BEACON has input). For each estimator it reports the median wall
time per batch of

* ``jnp``: the jitted estimator on the padded batch already on the device (after compilation;
  compile time separately),
* ``end_to_end``: the trainer's road from the rollout records as the collector hands them over (a
  ``RolloutBatch``: steps in the lockstep order they were played, state keys and actions interned
  per group as each step was recorded) to every step's advantage on the host, as the trainer takes
  it: ``RolloutBatch.credit_columns`` (drop aborted episodes, order the steps) + ``compute_credit``
  without the diagnostics (padded batch, estimator, ``step_advantages``),
* ``host``: the host part of that alone (``credit_columns`` + ``build_batch``; the host parts only
  for the estimators that read them, as ``compute_credit`` does without diagnostics),
* ``end_to_end_from_groups``: ``compute_credit`` of ``columns_from_groups`` of ``Group`` records, i.e.
  including interning every state key and action string (the CLI's road),
* ``reference``: ``credit/testing/reference.py`` from the same groups,

and the ratios reference / jnp and reference / end_to_end, timed in interleaved rounds. The interning
the collector does while it records (outside the end-to-end figure, it overlaps the environment and
the policy) is timed once and reported as ``record_us_per_step``. Ends with one JSON line
(``speedup_vs_reference`` and ``ms_per_batch`` are MileGPO full; ``per_estimator`` has every
estimator, ``targets`` whether the family's >= 10x / <= 5 ms and the <= 3 ms end-to-end targets hold).
Run: ``python -m experiments.bench.credit [--rounds 15] [--cases grpo milegpo/full ...]``; ``--smoke``: a
miniature (2 groups x 2 rollouts of 5 steps, GRPO and MileGPO full, 3 rounds: the median skips the
first end-to-end call's compile) to check the code path.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time

import jax
import numpy as np

from milegpo_jax.credit.api import compute_credit
from milegpo_jax.credit.batch import build_batch
from milegpo_jax.credit import registry
from milegpo_jax.credit.columns import columns_from_groups
from milegpo_jax.credit.config import make_credit_config
from milegpo_jax.credit.estimators import estimate_advantages
from milegpo_jax.credit.planes import pack
from milegpo_jax.credit.rollouts import Group, Trajectory
from milegpo_jax.credit.testing import reference
from milegpo_jax.credit.testing.synthetic import alfworld_like_rollouts
from milegpo_jax.rollout.collector import RolloutBatch
from milegpo_jax.rollout.lockstep import lockstep_rows

# Every estimator and stage of the registry, in its order (stages from the smallest ablation up).
CASES = tuple((spec.name, stage) for spec in registry.SPECS for stage in registry.variants(spec))
FAMILY = tuple(spec.name for spec in registry.SPECS if spec.page == "docs/credit-family.md")
FAMILY_TARGETS = {"min_speedup": 10.0, "max_jnp_ms": 5.0}  # docs/credit-family.md, per paper batch
END_TO_END_TARGET_MS = 3.0


def _interleaved_medians_ms(functions: dict, rounds: int) -> dict[str, float]:
    """Median wall time of each function, timed in interleaved rounds (one call each per round) so
    that load from other processes on this shared machine hits every contestant alike."""
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for name, fn in functions.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: 1000.0 * statistics.median(values) for name, values in times.items()}


def with_first_visit_milestones(groups: list[Group]) -> list[Group]:
    """Flags each step that enters a state its trajectory has not seen (a stand-in milestone signal)."""
    flagged = []
    for group in groups:
        trajectories = []
        for traj in group.trajectories:
            seen, steps = set(), []
            for step in traj.steps:
                seen.add(step.state)
                steps.append(dataclasses.replace(step, milestone=step.next_state not in seen))
            trajectories.append(Trajectory(tuple(steps)))
        flagged.append(Group(tuple(trajectories)))
    return flagged


def as_collected(groups: list[Group]) -> tuple[RolloutBatch, float]:
    """The groups as ``rollout.collector.collect`` hands them over, and the seconds its per-step
    interning took: steps in lockstep order (turn by turn, every env of the plan in order), each
    recorded (interned) in that order, exactly as the collector does."""
    rows, episodes = lockstep_rows(groups)
    start = time.perf_counter()
    collected = RolloutBatch.from_rows(rows, episodes)
    return collected, time.perf_counter() - start


def _trainer_road(collected: RolloutBatch, cfg) -> np.ndarray:
    """Every training step's advantage, in ``credit_columns`` order (the trainer's credit call)."""
    return compute_credit(collected.credit_columns(), cfg, with_diagnostics=False).step_advantages


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds per estimator")
    parser.add_argument("--seed", type=int, default=0)
    names = [name if stage is None else f"{name}/{stage}" for name, stage in CASES]
    parser.add_argument("--cases", nargs="+", choices=names, default=names, metavar="CASE",
                        help=f"estimators to time (default all: {' '.join(names)})")
    parser.add_argument("--smoke", action="store_true", help="a miniature run, to check the code path")
    if parser.parse_known_args(argv)[0].smoke:
        parser.set_defaults(groups=2, group_size=2, max_steps=5, rounds=3, cases=["grpo", "milegpo/full"])
    args = parser.parse_args(argv)
    for name in ("groups", "group_size", "max_steps", "rounds"):
        if not 1 <= getattr(args, name) <= 10_000:
            parser.error(f"--{name.replace('_', '-')} must be in 1..10000")
    cases = [case for case, name in zip(CASES, names) if name in args.cases]

    groups = with_first_visit_milestones(alfworld_like_rollouts(args.groups, args.group_size, args.max_steps, seed=args.seed))
    collected, record_s = as_collected(groups)
    batch, layout = build_batch(collected.credit_columns())
    states = [len(names) - 1 for names in layout.node_names]
    success = np.mean([traj.succeeded for g in groups for traj in g.trajectories])
    steps = sum(len(t.steps) for g in groups for t in g.trajectories)
    print(
        f"batch: {args.groups} groups x {args.group_size} rollouts, {steps} steps, "
        f"{np.mean(states):.0f} distinct states per group (min {min(states)}, max {max(states)}), "
        f"success {success:.0%}, padded shape {batch.src.shape} x {batch.node_mask.shape[-1]} nodes, "
        f"{jax.device_count()} {jax.default_backend()} device(s); the collector's interning "
        f"{1e6 * record_s / steps:.2f} us per recorded step"
    )
    print(
        f"{'estimator':<16}{'compile ms':>12}{'jnp ms':>10}{'e2e ms':>10}{'host ms':>9}{'groups ms':>11}{'ref ms':>10}"
        f"{'x (jnp)':>10}{'x (e2e)':>10}"
    )
    figures = {}
    for estimator, stage in cases:
        cfg = make_credit_config(estimator, stage=stage)
        name = estimator if stage is None else f"{estimator}/{stage}"
        parts = registry.host_parts(estimator)  # as compute_credit builds it without diagnostics
        device_batch = jax.device_put(pack(build_batch(collected.credit_columns(), parts=parts)[0]))
        start = time.perf_counter()
        jax.block_until_ready(estimate_advantages(device_batch, cfg))
        compile_ms = 1000.0 * (time.perf_counter() - start)
        medians = _interleaved_medians_ms(
            {
                "jnp": lambda: jax.block_until_ready(estimate_advantages(device_batch, cfg)),
                "e2e": lambda: _trainer_road(collected, cfg),
                "host": lambda: build_batch(collected.credit_columns(), parts=parts),
                "groups": lambda: compute_credit(columns_from_groups(groups), cfg, with_diagnostics=False).advantages,
                "reference": lambda: reference.compute_advantages(groups, cfg),
            },
            args.rounds,
        )
        jnp_ms, e2e_ms, ref_ms = medians["jnp"], medians["e2e"], medians["reference"]
        figures[name] = {
            "compile_ms": compile_ms,
            "jnp_ms": jnp_ms,
            "end_to_end_ms": e2e_ms,
            "host_ms": medians["host"],
            "end_to_end_from_groups_ms": medians["groups"],
            "reference_ms": ref_ms,
            "speedup": ref_ms / jnp_ms,
            "speedup_end_to_end": ref_ms / e2e_ms,
        }
        print(
            f"{name:<16}{compile_ms:>12.0f}{jnp_ms:>10.2f}{e2e_ms:>10.2f}{medians['host']:>9.2f}{medians['groups']:>11.2f}{ref_ms:>10.1f}"
            f"{ref_ms / jnp_ms:>10.1f}{ref_ms / e2e_ms:>10.1f}"
        )
    full = figures.get("milegpo/full") or next(iter(figures.values()))  # the headline case
    family = [name for name in figures if name in FAMILY]
    targets = {
        "family_speedup_ge_10x": all(figures[n]["speedup"] >= FAMILY_TARGETS["min_speedup"] for n in family),
        "family_jnp_le_5ms": all(figures[n]["jnp_ms"] <= FAMILY_TARGETS["max_jnp_ms"] for n in family),
        "end_to_end_le_3ms": all(f["end_to_end_ms"] <= END_TO_END_TARGET_MS for f in figures.values()),
    }
    summary = {
        "bench": "credit",
        "speedup_vs_reference": round(full["speedup"], 2),
        "speedup_end_to_end": round(full["speedup_end_to_end"], 2),
        "ms_per_batch": round(full["jnp_ms"], 3),
        "ms_per_batch_end_to_end": round(full["end_to_end_ms"], 3),
        "reference_ms_per_batch": round(full["reference_ms"], 2),
        "compile_ms": round(full["compile_ms"], 1),
        "record_us_per_step": round(1e6 * record_s / steps, 3),
        "speedup_end_to_end_per_estimator": {name: round(f["speedup_end_to_end"], 2) for name, f in figures.items()},
        "ms_per_batch_end_to_end_per_estimator": {name: round(f["end_to_end_ms"], 3) for name, f in figures.items()},
        "per_estimator": {name: {k: round(v, 3) for k, v in f.items()} for name, f in figures.items()},
        "load_average": round(os.getloadavg()[0], 2),
        "targets": targets,
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()

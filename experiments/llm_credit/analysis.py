"""From the trainer's metrics to the study's records, and from the records to every table (pure).

Held-out outcomes pair by (run seed, eval seed, task): the arms of a run seed start from one warm
start recipe and play one fixed task list, so a task's outcome under one arm is paired with its
outcome under another, and with the warm start's. A seed's warm start built on machines with other
instruction sets differs in its last bits: each build is evaluated once, a run pairs with the build
it started from, and the warm-start row counts each (seed, task) once, averaged over a seed's builds
(docs/results/llm-credit.md, "Analysis").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from experiments.arena.power import planning_sd, seeds_needed
from experiments.arena.stats import diagnostics_means, mean_std, paired_interval, wilson_interval
from experiments.llm_credit.paired import mcnemar_detectable, mcnemar_exact, paired_bootstrap, success_auc
from milegpo_jax.train.evaluation import OUTCOMES_PREFIX, parse_outcomes

TIME_KEYS = ("time/generation_s", "time/advantage_s", "time/logprob_s", "time/update_s", "time/eval_s")
_OUTCOME_KEY = re.compile(rf"^{OUTCOMES_PREFIX}(?P<list>.+)/seed(?P<seed>\d+)$")


def evaluations(metrics: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every logged evaluation: its iteration, its figures (``eval/*``) and outcome strings."""
    found = []
    for record in sorted(metrics, key=lambda r: r["iteration"]):
        outcomes = {k: v for k, v in record.items() if k.startswith(OUTCOMES_PREFIX)}
        figures = {k: v for k, v in record.items() if k.startswith("eval/")}
        if outcomes or figures:
            found.append({"iteration": int(record["iteration"]), "figures": figures, "outcomes": outcomes})
    return found


def run_record(metrics: Sequence[Mapping[str, Any]], *, arm: str, seed: int) -> dict[str, Any]:
    """What a finished run contributes: its training-success curve, evaluations, credit diagnostics
    per iteration and the seconds its iterations took (summed, so a resumed run counts each once)."""
    trained = sorted((r for r in metrics if "rollout/success_rate" in r), key=lambda r: r["iteration"])
    return {
        "arm": arm, "seed": seed,
        "training_success": [float(r["rollout/success_rate"]) for r in trained],
        "evaluations": evaluations(metrics),
        "credit": [{k: v for k, v in r.items() if k.startswith("credit/")} for r in trained],
        "time_s": round(sum(float(r.get(key) or 0.0) for r in metrics for key in TIME_KEYS), 1),
    }


def policy_steps(metrics: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """The KL between consecutive policies (``actor/kl``) each iteration's update logged, by iteration;
    where a resumed run redid an iteration, its last line counts."""
    return {int(r["iteration"]): float(r["actor/kl"]) for r in metrics if r.get("actor/kl") is not None}


def _wins(outcomes: Sequence[bool | None]) -> int:
    return sum(1 for o in outcomes if o is True)


def outcome_lists(evaluation: Mapping[str, Any]) -> dict[str, list[bool | None]]:
    """``{"eval_id": [...], "greedy/eval_id": [...]}``: one list per task list and mode, the eval
    seeds' outcomes one after the other (in eval-seed order)."""
    lists: dict[str, list[tuple[int, list[bool | None]]]] = {}
    for key, text in evaluation["outcomes"].items():
        match = _OUTCOME_KEY.match(key)
        if match:
            lists.setdefault(match["list"], []).append((int(match["seed"]), parse_outcomes(text)))
    return {name: [o for _, seq in sorted(parts) for o in seq] for name, parts in sorted(lists.items())}


def _paired(first: Sequence[bool | None], second: Sequence[bool | None]) -> tuple[list[bool], list[bool]]:
    if len(first) != len(second):
        raise ValueError(f"outcome lists of {len(first)} and {len(second)} tasks cannot be paired")
    kept = [(a, b) for a, b in zip(first, second) if a is not None and b is not None]  # aborted: no pair
    return [a for a, _ in kept], [b for _, b in kept]


def compare(first: Mapping[int, Sequence], second: Mapping[int, Sequence]) -> dict[str, Any] | None:
    """Second minus first over the run seeds both have: McNemar and the paired bootstrap over every
    (seed, task) pair, and the per-seed differences with their t interval (seeds as replicates)."""
    seeds = sorted(set(first) & set(second))
    if not seeds:
        return None
    a_all, b_all, per_seed = [], [], []
    for seed in seeds:
        a, b = _paired(first[seed], second[seed])
        if a:
            a_all += a
            b_all += b
            per_seed.append(sum(b) / len(b) - sum(a) / len(a))
    if not a_all:
        return None
    return {"seeds": len(per_seed), "pairs": len(a_all), "mcnemar": mcnemar_exact(a_all, b_all),
            "bootstrap": paired_bootstrap(a_all, b_all), "per_seed": per_seed, "seed_t": paired_interval(per_seed)}


def _rate(lists: Mapping[int, Sequence]) -> dict[str, Any]:
    played = [o for seq in lists.values() for o in seq if o is not None]
    wins = sum(played)
    low, high = wilson_interval(wins, len(played)) if played else (None, None)
    return {"success": wins / len(played) if played else None, "ci95": [low, high], "tasks": len(played),
            "per_seed": {s: (sum(o for o in seq if o) / max(1, sum(o is not None for o in seq))) for s, seq in lists.items()}}


def _warm_by_seed(builds: Mapping[str, Mapping], build_lists: Mapping[str, Mapping[str, list]]) -> dict[int, dict[str, list]]:
    """Each seed's warm-start outcome per task: the mean over its builds (None where every build aborted).
    One entry per (seed, task), as for an arm: a second build replays the same tasks with nearly the same
    weights, so counting its outcomes as more tasks would narrow the interval without new evidence."""
    by_seed: dict[int, dict[str, list[list]]] = {}
    for digest in sorted(builds):
        for name, outcomes in build_lists[digest].items():
            by_seed.setdefault(builds[digest]["seed"], {}).setdefault(name, []).append(outcomes)
    pooled: dict[int, dict[str, list]] = {}
    for seed, lists in by_seed.items():
        for name, per_build in lists.items():
            if len({len(o) for o in per_build}) != 1:
                raise ValueError(f"seed {seed}'s warm-start builds played {name} with different task counts")
            tasks = [[o for o in task if o is not None] for task in zip(*per_build)]
            pooled.setdefault(seed, {})[name] = [sum(t) / len(t) if t else None for t in tasks]
    return pooled


def summary(builds: Mapping[str, Mapping], runs: Mapping[tuple[str, int], Mapping], arms: Sequence[str],
            references: Sequence[str], steps: Mapping[tuple[str, int], Mapping[int, float]]) -> dict[str, Any]:
    """Every table of the results page, from the records alone: ``builds`` are the warm-start records
    by weights digest, ``runs`` the run records by (arm, seed), ``steps`` each run's ``policy_steps``."""
    for (arm, seed), record in runs.items():
        build = builds.get(record["warm_start_sha256"])
        if build is None or build["seed"] != seed:
            raise ValueError(f"{arm} seed {seed} started from warm start {record['warm_start_sha256'][:12]}, "
                             f"which has no record of seed {seed}")
    build_lists = {digest: outcome_lists(record["evaluation"]) for digest, record in builds.items()}
    warm_lists = _warm_by_seed(builds, build_lists)
    last = {key: outcome_lists(rec["evaluations"][-1]) for key, rec in runs.items() if rec["evaluations"]}
    names = sorted({name for lists in [*warm_lists.values(), *last.values()] for name in lists})

    def by_seed(arm: str | None, name: str) -> dict[int, list]:
        source = warm_lists if arm is None else {s: last[(a, s)] for a, s in last if a == arm}
        return {seed: lists[name] for seed, lists in sorted(source.items()) if name in lists}

    def own_warm(arm: str, name: str) -> dict[int, list]:
        """The warm-start outcomes each of ``arm``'s runs pairs with: those of the build it started from."""
        mine = {s: build_lists[r["warm_start_sha256"]] for (a, s), r in runs.items() if a == arm}
        return {seed: lists[name] for seed, lists in sorted(mine.items()) if name in lists}

    out: dict[str, Any] = {"arms": list(arms), "lists": names, "heldout": {}, "improvement": {}, "paired": {},
                           "auc": {}, "auc_paired": {}, "diagnostics": {}, "cost": {}, "curves": {}}
    out["heldout"]["warm start"] = {name: _rate(by_seed(None, name)) for name in names}
    auc = {arm: {s: success_auc(r["training_success"]) for (a, s), r in runs.items() if a == arm and r["training_success"]} for arm in arms}
    for arm in arms:
        mine = {s: r for (a, s), r in runs.items() if a == arm}
        if not mine:
            continue
        out["heldout"][arm] = {name: _rate(by_seed(arm, name)) for name in names}
        out["improvement"][arm] = {name: compare(own_warm(arm, name), by_seed(arm, name)) for name in names}
        values = list(auc[arm].values())
        out["auc"][arm] = dict(zip(("mean", "std"), mean_std(values))) | {"seeds": len(values)} if values else None
        out["diagnostics"][arm] = diagnostics_means([c for r in mine.values() for c in r["credit"]])
        peaks = [r["peak_rss_gb"] for r in mine.values() if r.get("peak_rss_gb") is not None]
        out["cost"][arm] = {"time_s_mean": sum(r["time_s"] for r in mine.values()) / len(mine),
                            "peak_rss_gb_max": max(peaks) if peaks else None, "runs": len(mine),
                            "machines": sorted({r.get("machine") or "not recorded" for r in mine.values()})}
        curves = [r["training_success"] for r in mine.values()]
        width = min(len(c) for c in curves)
        out["curves"][arm] = [sum(c[i] for c in curves) / len(curves) for i in range(width)]
    out["runs"] = [_run_row(arm, seed, record["training_success"], auc[arm].get(seed), steps[(arm, seed)],
                            build_lists[record["warm_start_sha256"]], last.get((arm, seed), {}))
                   for arm in arms for (a, seed), record in sorted(runs.items()) if a == arm]
    for reference in references:
        if reference not in out["heldout"]:
            continue
        for arm in arms:
            # gigpo - grpo is reported once: not again as grpo - gigpo when gigpo is a reference too
            if arm == reference or arm not in out["heldout"] or f"{reference} - {arm}" in out["paired"]:
                continue
            label = f"{arm} - {reference}"
            out["paired"][label] = {name: compare(by_seed(reference, name), by_seed(arm, name)) for name in names}
            common = sorted(set(auc[arm]) & set(auc[reference]))
            out["auc_paired"][label] = paired_interval([auc[arm][s] - auc[reference][s] for s in common]) | {"seeds": len(common)} if common else None
    return out


def _run_row(arm: str, seed: int, training_success: list[float], auc: float | None, steps: Mapping[int, float],
             warm: Mapping[str, list], after: Mapping[str, list]) -> dict[str, Any]:
    """One run at a glance: wins per held-out list (its warm-start build's, then its own), its training
    curve, and its largest policy step."""
    largest = max(steps.items(), key=lambda item: item[1], default=None)
    return {"arm": arm, "seed": seed,
            "wins": {name: {"warm": _wins(warm[name]), "after": _wins(after[name]),
                            "tasks": sum(1 for o in after[name] if o is not None)}
                     for name in sorted(set(warm) & set(after))},
            "training_success": training_success, "auc": auc,
            "largest_step": None if largest is None else {"iteration": largest[0], "kl": largest[1]}}


def verdicts(summary_: Mapping[str, Any], comparisons: Sequence[str], list_name: str, alpha: float,
             planned_seeds: int, goal: float) -> dict[str, Any]:
    """The design's verdict on each primary comparison, and each arm's improvement over its warm start
    against the goal, seed by seed; both are provisional until ``planned_seeds`` seeds have run."""
    out: dict[str, Any] = {"list": list_name, "alpha": alpha, "planned_seeds": planned_seeds, "goal": goal,
                           "comparisons": {}, "goal_by_arm": {}}
    for label in comparisons:
        entry = summary_["paired"].get(label, {}).get(list_name)
        if entry is None:
            out["comparisons"][label] = {"verdict": "not run yet", "seeds": 0, "final": False}
            continue
        p, difference = entry["mcnemar"]["p"], entry["bootstrap"]["difference"]
        verdict = "unresolved" if p >= alpha or difference == 0 else "supported" if difference > 0 else "refuted"
        out["comparisons"][label] = {"verdict": verdict, "difference": difference, "p": p,
                                     "seeds": entry["seeds"], "final": entry["seeds"] >= planned_seeds}
    for arm, by_list in summary_["improvement"].items():
        entry = by_list.get(list_name)
        per_seed = entry["per_seed"] if entry else []
        out["goal_by_arm"][arm] = {"per_seed": per_seed, "met": sum(d >= goal - 1e-12 for d in per_seed),
                                   "seeds": len(per_seed), "final": len(per_seed) >= planned_seeds}
    return out


def resolution(summary_: Mapping[str, Any], comparisons: Sequence[str], list_name: str, alpha: float,
               target: float, power: float = 0.8) -> dict[str, Any]:
    """What the study can resolve at the spread it measured (the design's "What it can resolve",
    restated from the records): per primary comparison, the difference McNemar detects at ``alpha``
    with ``power`` given the share of discordant (seed, task) pairs observed, the seed-to-seed s.d. of
    the per-seed differences with the half-width of their 95 % t interval, and the seeds a fresh study
    would need at that s.d. (raised to its planning bound) to find a true ``target`` at ``alpha`` and
    show a true 0 within ±``target``, each with ``power`` (the arena's seed-level sizing)."""
    out: dict[str, Any] = {"list": list_name, "alpha": alpha, "power": power, "target": target, "comparisons": {}}
    for label in comparisons:
        entry = summary_["paired"].get(label, {}).get(list_name)
        if entry is None:
            continue
        discordant = (entry["mcnemar"]["b"] + entry["mcnemar"]["c"]) / entry["pairs"]
        t = entry["seed_t"]
        sd = mean_std(entry["per_seed"])[1] if entry["seeds"] > 1 else None
        out["comparisons"][label] = {
            "pairs": entry["pairs"], "discordant": discordant,
            "detectable": mcnemar_detectable(discordant, entry["pairs"], alpha=alpha, power=power),
            "seeds": entry["seeds"], "seed_sd": sd,
            "seed_half_width": (t["high"] - t["low"]) / 2 if t["low"] is not None else None,
            "fresh_seeds": (seeds_needed([planning_sd(sd, entry["seeds"])], target, alpha, power)
                            if sd is not None else None)}
    return out

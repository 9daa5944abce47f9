"""The results page's tables as markdown, from ``analysis.summary`` (pure)."""

from __future__ import annotations

from typing import Any


def _f(value: Any, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _signed(value: Any) -> str:
    """A difference: its sign always shown."""
    return "—" if value is None else f"{value:+.3f}"


def _ci(entry: dict) -> str:
    low, high = entry["ci95"]
    return f"{_f(entry['success'])} [{_f(low)}, {_f(high)}]"


def _comparison(entry: dict | None) -> str:
    if entry is None:
        return "—"
    boot, mc, t = entry["bootstrap"], entry["mcnemar"], entry["seed_t"]
    seeds = f"; seeds: {_signed(t['mean'])} [{_signed(t['low'])}, {_signed(t['high'])}]" if t["low"] is not None else ""
    return (f"{_signed(boot['difference'])} [{_signed(boot['low'])}, {_signed(boot['high'])}], "
            f"McNemar {mc['b']}/{mc['c']} p={mc['p']:.3g}{seeds}")


def _status(entry: dict, planned: int) -> str:
    return "final" if entry["final"] else f"provisional, {entry['seeds']} of {planned} seeds"


def _verdict_lines(v: dict[str, Any]) -> list[str]:
    planned = v["planned_seeds"]
    lines = ["## Verdicts (the pre-registered rule)", "",
             f"Primary comparisons on sampled `{v['list']}`: supported (refuted) when McNemar's exact p is below "
             f"{v['alpha']:g} and the difference is positive (negative), otherwise unresolved.", "",
             "| comparison | verdict | difference | McNemar p | status |", "|---|---|---|---|---|"]
    for label, entry in v["comparisons"].items():
        if "p" not in entry:
            lines.append(f"| {label} | {entry['verdict']} | — | — | — |")
        else:
            lines.append(f"| {label} | **{entry['verdict']}** | {_signed(entry['difference'])} | {entry['p']:.3g} | "
                         f"{_status(entry, planned)} |")
    lines += ["", f"Goal (issue 42): held-out `{v['list']}` success at least {v['goal']:+.2f} over the warm start "
              f"on each of {planned} seeds.", "", "| arm | improvement per seed (in seed order) | seeds meeting the goal | status |",
              "|---|---|---|---|"]
    for arm, entry in v["goal_by_arm"].items():
        seeds = ", ".join(_signed(d) for d in entry["per_seed"]) or "—"
        lines.append(f"| {arm} | {seeds} | {entry['met']} of {entry['seeds']} | {_status(entry, planned)} |")
    return [*lines, ""]


def _resolution_lines(r: dict[str, Any]) -> list[str]:
    lines = ["## What the study can resolve (at the spread it measured)", "",
             f"For each primary comparison on sampled `{r['list']}`: the difference McNemar's test at {r['alpha']:g} "
             f"detects with {r['power'] * 100:.0f} % power at the share of discordant (seed, task) pairs observed (normal "
             "approximation), and, seeds as replicates, the s.d. of the per-seed differences and the half-width of "
             "their 95 % t interval (what a mean difference must exceed for that interval to exclude zero). The last "
             f"column sizes a fresh study at that s.d. (raised to its 80 % upper bound, as the arena plans): the seeds "
             f"per arm to find a true {r['target']:g} at {r['alpha']:g} and to show a true 0 within ±{r['target']:g}, "
             f"each with {r['power'] * 100:.0f} % power.", "",
             "| comparison | pairs | discordant | McNemar detects | seeds | seed-to-seed s.d. | t half-width | fresh study's seeds |",
             "|---|---|---|---|---|---|---|---|"]
    for label, e in r["comparisons"].items():
        lines.append(f"| {label} | {e['pairs']} | {_f(e['discordant'])} | {_f(e['detectable'])} | {e['seeds']} | "
                     f"{_f(e['seed_sd'])} | {_f(e['seed_half_width'])} | {e['fresh_seeds'] if e['fresh_seeds'] is not None else '—'} |")
    return [*lines, ""]


def markdown(summary: dict[str, Any]) -> str:
    lists = summary["lists"]
    lines = [*_verdict_lines(summary["verdicts"]), *_resolution_lines(summary["resolution"]),
             "## Held-out success at the last evaluation (pooled over seeds, Wilson 95 %)", "",
             "Each row pools the seeds it names (the warm start's can be ahead of the arms'); the paired tables below "
             "compare like with like.", "",
             "| arm | seeds | " + " | ".join(lists) + " |", "|---|---|" + "---|" * len(lists)]
    for arm, rates in summary["heldout"].items():
        seeds = sorted({int(s) for rate in rates.values() for s in rate["per_seed"]})
        lines.append(f"| {arm} | {', '.join(map(str, seeds))} | "
                     + " | ".join(_ci(rates[name]) if name in rates else "—" for name in lists) + " |")
    for title, table in (("Improvement over the warm start (paired)", summary["improvement"]),
                         ("Paired differences between arms", summary["paired"])):
        lines += ["", f"## {title}", "",
                  "Difference in success with its paired-bootstrap 95 % interval over (seed, task) pairs; McNemar's "
                  "discordant counts (first only / second only) and exact p; the per-seed differences' t interval.", "",
                  "| comparison | " + " | ".join(lists) + " |", "|---|" + "---|" * len(lists)]
        for label, by_list in table.items():
            lines.append(f"| {label} | " + " | ".join(_comparison(by_list.get(name)) for name in lists) + " |")
    lines += ["", "## Training success and cost", "",
              "| arm | AUC (mean ± s.d. over seeds) | zero-advantage share | pooled tie-correction rate | iteration time per run (s) | peak RSS (GB) | machines |",
              "|---|---|---|---|---|---|---|"]
    for arm in summary["auc"]:
        auc, diag, cost = summary["auc"][arm], summary["diagnostics"][arm], summary["cost"][arm]
        auc_text = f"{_f(auc['mean'])} ± {_f(auc['std'])} ({auc['seeds']})" if auc else "—"
        lines.append(f"| {arm} | {auc_text} | {_f(diag.get('zero_advantage_fraction'))} | "
                     f"{_f(diag.get('pooled_tie_correction_rate'))} | {cost['time_s_mean']:.0f} | {_f(cost['peak_rss_gb_max'], 1)} | "
                     f"{'; '.join(cost['machines'])} |")
    if summary["auc_paired"]:
        lines += ["", "| AUC difference | mean [95 % t interval over seeds] |", "|---|---|"]
        for label, entry in summary["auc_paired"].items():
            lines.append(f"| {label} | " + ("—" if entry is None else f"{_signed(entry['mean'])} [{_signed(entry['low'])}, {_signed(entry['high'])}] ({entry['seeds']} seed{'' if entry['seeds'] == 1 else 's'})") + " |")
    return "\n".join([*lines, *_run_lines(summary["runs"], lists)]) + "\n"


def _run_lines(runs: list[dict[str, Any]], lists: list[str]) -> list[str]:
    lines = ["", "## Each run", "",
             "Held-out wins of its warm-start build → after its last iteration (of the tasks played), training "
             "success per iteration, and its largest policy step: the KL between consecutive policies its "
             "update logged (`actor/kl`, from the run's `metrics.jsonl`), with the iteration.", "",
             "| run | " + " | ".join(lists) + " | training success | AUC | largest step (KL, iteration) |",
             "|---|" + "---|" * len(lists) + "---|---|---|"]
    for run in runs:
        wins = [run["wins"].get(name) for name in lists]
        step = run["largest_step"]
        lines.append(f"| {run['arm']} seed {run['seed']} | "
                     + " | ".join("—" if w is None else f"{w['warm']} → {w['after']} of {w['tasks']}" for w in wins)
                     + f" | {', '.join(f'{v:.2f}' for v in run['training_success'])} | {_f(run['auc'])} | "
                     + ("—" if step is None else f"{step['kl']:.3f} ({step['iteration']})") + " |")
    return lines

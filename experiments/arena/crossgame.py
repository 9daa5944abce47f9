"""Several studies read together (pure): from each game's run records to the family-wide claims, the
matched-rate comparisons and the spreads a next study is sized from (docs/arena.md, "Reading several
studies together"; the maths in family.py and power.py).

A game is a mapping ``{"name", "records", "select_seeds", "margin"}`` (a study's results.jsonl and
arena.json). Per game the tuned claims are those of analysis.analyse (each arm at its own chosen
option); the pooled claim of a pair runs over the games where both arms ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from experiments.arena import analysis, family, power, stats
from experiments.arena.contestants import BASELINE

RELATIVE_MARGIN = 0.04  # pooled equivalence margin, a fraction of each game's scale (family.learning_gain)
OUTSIDER = "best outsider"  # the pooled claim "MileGPO full > each game's best outsider"


def _auc(record: Mapping) -> float:
    return sum(record["success"]) / len(record["success"])


def seed_aucs(records: Sequence[Mapping], name: str, option: tuple, seeds: set[int] | None = None) -> dict[int, float]:
    """seed -> AUC of ``name``'s runs at ``option`` (lr, update), over ``seeds`` (all: None)."""
    return {r["seed"]: _auc(r) for r in records if r["contestant"] == name and (r["lr"], r["update"]) == option
            and (seeds is None or r["seed"] in seeds)}


def option_means(records: Sequence[Mapping], name: str, seeds: set[int]) -> dict[tuple, float]:
    """(lr, update) -> mean AUC of ``name`` over ``seeds``."""
    grouped: dict[tuple, list[float]] = {}
    for r in records:
        if r["contestant"] == name and r["seed"] in seeds:
            grouped.setdefault((r["lr"], r["update"]), []).append(_auc(r))
    return {option: sum(v) / len(v) for option, v in grouped.items()}


def game_view(game: Mapping) -> dict:
    """A game's chosen options, its per-seed evaluation AUCs at them, its outsider and its scale."""
    records, select = game["records"], set(game["select_seeds"])
    names = analysis.contestant_order(records)
    chosen, grid = analysis.choose_options(records, names, select)
    evaluation = {name: {s: a for s, a in seed_aucs(records, name, chosen[name]).items() if s not in select} for name in names}
    outsider = analysis.best_outsider(names, {name: max(o["mean"] for o in grid[name].values()) for name in names})
    if BASELINE not in names:
        raise ValueError(f"{game['name']}: the scale needs {BASELINE} on the selection seeds")
    gains = [r["success"] for r in records if r["contestant"] == BASELINE and r["seed"] in select
             and (r["lr"], r["update"]) == chosen[BASELINE]]
    return {"names": names, "chosen": chosen, "eval": evaluation, "outsider": outsider,
            "scale": family.learning_gain(gains), "order": sorted({(r["lr"], r["update"]) for r in records},
                                                                   key=lambda o: (o[1], o[0]))}


def _differences(first: Mapping[int, float], second: Mapping[int, float]) -> list[float]:
    return [first[s] - second[s] for s in sorted(set(first) & set(second))]


def _compared(game: Mapping, view: Mapping, matched: bool) -> list[tuple[str, str, list[float]]]:
    """(A, B, evaluation differences A - B): each arm at its own chosen option (tuned: the chain and
    the outsider claim), or both at the pair's matched option (matched: the chain links only)."""
    if not matched:
        return [(a, b, _differences(view["eval"][a], view["eval"][b])) for a, b in stats.claim_family(view["names"], view["outsider"])]
    records, select = game["records"], set(game["select_seeds"])
    compared = []
    for a, b in stats.PAPER_CHAIN:
        if {a, b} <= set(view["names"]):
            shared = family.matched_option(option_means(records, a, select), option_means(records, b, select), view["order"])
            at = {name: {s: x for s, x in seed_aucs(records, name, shared).items() if s not in select} for name in (a, b)}
            compared.append((a, b, _differences(at[a], at[b])))
    return compared


def family_rows(games: Sequence[Mapping], relative_margin: float = RELATIVE_MARGIN, matched: bool = False) -> tuple[list[dict], dict]:
    """The claims with a verdict: each chain link (and, tuned, the outsider claim) pooled over the
    games (in units of each game's scale, margin ``relative_margin``), then every game's own claims
    (in AUC, the study's recorded margin). Returns (rows for family.judge_family, the per-game views)."""
    views = {game["name"]: game_view(game) for game in games}
    margins = {game["name"]: game["margin"] for game in games}
    pooled: dict[str, dict[str, list[float]]] = {}
    per_game = []
    for game in games:
        name = game["name"]
        for a, b, differences in _compared(game, views[name], matched):
            if len(differences) < 2:
                continue
            key = f"{a} > {b}" if (a, b) in stats.PAPER_CHAIN else f"milegpo:full > {OUTSIDER}"
            pooled.setdefault(key, {})[name] = differences
            per_game.append({"scope": name, "claim": f"{a} > {b}", "seeds": len(differences), "units": "AUC",
                             "margin": margins[name], "test": lambda level, d=differences: stats.paired_t(d, level)})
    scales = {name: view["scale"] for name, view in views.items()}
    rows = []
    for key, by_game in pooled.items():
        rows.append({"scope": "pooled: " + ", ".join(by_game), "claim": key, "seeds": sum(map(len, by_game.values())),
                     "units": "scale", "margin": relative_margin,
                     "test": lambda level, d=by_game: family.stratified_t(d, scales, level)})
    return rows + per_game, views


def matched_rows(games: Sequence[Mapping]) -> list[dict]:
    """Per game and chain link: the tuned options, the shared option chosen on the selection seeds
    (family.matched_option) and what the records hold at it: the paired differences on the
    evaluation seeds where both arms ran it (exploratory, plain 95 % interval) and the spread of the
    differences over every seed with both arms at it (what a next study is sized from)."""
    rows = []
    for game in games:
        records, select = game["records"], set(game["select_seeds"])
        view = game_view(game)
        for a, b in stats.PAPER_CHAIN:
            if not {a, b} <= set(view["names"]):
                continue
            shared = family.matched_option(option_means(records, a, select), option_means(records, b, select), view["order"])
            if shared is None:
                continue
            auc_a, auc_b = seed_aucs(records, a, shared), seed_aucs(records, b, shared)
            both = {s: auc_a[s] - auc_b[s] for s in auc_a if s in auc_b}
            evaluation = [d for s, d in sorted(both.items()) if s not in select]
            spread = stats.mean_std(list(both.values()))[1] if len(both) >= 2 else None
            rows.append({"game": game["name"], "claim": f"{a} > {b}", "tuned": [view["chosen"][a], view["chosen"][b]],
                         "matched": shared, "same_as_tuned": view["chosen"][a] == shared == view["chosen"][b],
                         "eval_seeds": len(evaluation),
                         "eval": stats.paired_interval(evaluation) if len(evaluation) >= 2 else None,
                         "spread": spread, "spread_seeds": len(both)})
    return rows


def plan(matched: Sequence[Mapping], scales: Mapping[str, float], games: Sequence[str], delta: float,
         relative_margin: float, family_size: int, alpha: float = 0.05, target: float = 0.8) -> list[dict]:
    """Evaluation seeds per game for each chain link at its matched option: per game to resolve
    ``delta`` AUC, pooled over ``games`` to resolve ``relative_margin`` of the scale, at the level
    alpha / family_size, from the measured spreads raised to their 80 % upper bounds."""
    level = alpha / family_size
    rows = []
    for claim in dict.fromkeys(row["claim"] for row in matched):
        spreads = {row["game"]: power.planning_sd(row["spread"], row["spread_seeds"])
                   for row in matched if row["claim"] == claim and row["game"] in games and row["spread"] is not None}
        if set(spreads) != set(games):
            continue
        per_game = {game: power.seeds_needed([sd], delta, level, target) for game, sd in spreads.items()}
        pooled = power.seeds_needed([spreads[g] / scales[g] for g in games], relative_margin, level, target)
        rows.append({"claim": claim, "planning_sd": spreads, "per_game": per_game, "pooled_per_game": pooled})
    return rows

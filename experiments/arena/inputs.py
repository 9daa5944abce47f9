"""The arena's input checks (pure): counts and their bounds, seeds, grids, and the files ``summarize``
and a resumed arena read. Every command checks its whole input here before it writes anything or
starts an environment; a problem is one line naming the flag, file or field (docs/arena.md, "Bad input").
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path

from envs_bridge.protocol import MAX_BATCH
from milegpo_jax.config.checks import seed_problem


class ArenaInputError(ValueError):
    """Bad command-line input: reported in one line, exit status 2."""


# Every count an arena command takes, (least, most). The bounds are far above any arena run so far
# and keep a typo (--seeds 100000000) from filling the memory before the first run starts.
MAX_EPISODES = MAX_BATCH  # episodes in flight at once (G x K, a task set, uniform's tasks x rollouts): one env-server batch
COUNT_BOUNDS = {
    "groups": (1, MAX_EPISODES),
    "group_size": (1, MAX_EPISODES),
    "tasks": (1, MAX_EPISODES),
    "rollouts": (1, MAX_EPISODES),
    "iterations": (1, 1_000_000),  # nothing is allocated per iteration up front; a test runs 100,000 to be killed
    "seeds": (1, 1000),  # also the count of --select-seeds and of --eval-seeds
    "ppo_epochs": (1, 100),
    "max_steps": (1, 1000),  # actions per episode
    "env_steps": (1, 10**9),  # a run's budget of training env steps
    "jobs": (1, 64),
    "servers": (1, 64),
}
MAX_SEEDS = COUNT_BOUNDS["seeds"][1]
MAX_GRID = 32  # values of --lr-grid
MAX_RUNS = 100_000  # seeds x contestants x rates x updates of one invocation


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_counts(args, names: Sequence[str]) -> None:
    """Each named count of ``args`` (None: not given) within its COUNT_BOUNDS."""
    for name in names:
        value = getattr(args, name)
        low, high = COUNT_BOUNDS[name]
        if value is not None and not low <= value <= high:
            raise ArenaInputError(f"{flag(name)} {value}: must be in {low}..{high}")


def check_episodes(flags: str, episodes: int) -> None:
    if episodes > MAX_EPISODES:
        raise ArenaInputError(f"{flags}: {episodes} episodes at once, at most {MAX_EPISODES} (one env-server batch)")


def check_runs(runs: int) -> None:
    if runs > MAX_RUNS:
        raise ArenaInputError(f"{runs} runs (seeds x contestants x rates x updates): at most {MAX_RUNS} per invocation")


def check_seed(name: str, seed: int) -> None:
    if seed_problem(seed):
        raise ArenaInputError(f"{name} {seed}: {seed_problem(seed)}")


def positive_number(name: str, value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ArenaInputError(f"{name} {value}: must be a finite number > 0")
    return value


def parse_seeds(text: str, name: str) -> list[int]:
    """``0-4`` / ``0,2,7-9`` -> sorted distinct seeds (overlaps merge), at most MAX_SEEDS of them."""
    seeds: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.partition("-")
        try:
            first, last = int(low), int(high) if dash else int(low)
        except ValueError:
            first, last = -1, -1
        if last < first or seed_problem(first) or seed_problem(last):
            raise ArenaInputError(f"{name} {text!r}: expected seeds like 0-4 or 0,2,7-9 (integers in 0..2**32-1)")
        if last - first + 1 > MAX_SEEDS:  # before the range is built
            raise ArenaInputError(f"{name} {text!r}: at most {MAX_SEEDS} seeds")
        seeds.update(range(first, last + 1))
        if len(seeds) > MAX_SEEDS:
            raise ArenaInputError(f"{name} {text!r}: at most {MAX_SEEDS} seeds")
    return sorted(seeds)


def parse_rates(text: str, name: str = "--lr-grid") -> list[float]:
    """A comma list of learning rates, each finite and > 0; refused when two are equal or print alike,
    since a run's directory names its rate as ``lr{rate:g}`` (0.1 and 0.1000001 would share one)."""
    try:
        rates = [float(part) for part in text.split(",")]
    except ValueError:
        raise ArenaInputError(f"{name} {text!r}: expected comma-separated numbers") from None
    if len(rates) > MAX_GRID:
        raise ArenaInputError(f"{name} {text!r}: at most {MAX_GRID} rates")
    labels: dict[str, float] = {}
    for rate in rates:
        if not (math.isfinite(rate) and rate > 0):
            raise ArenaInputError(f"{name} {text!r}: rate {rate:g} must be a finite number > 0")
        label = f"{rate:g}"
        if label in labels and labels[label] == rate:
            raise ArenaInputError(f"{name} {text!r}: rate {label} is given twice")
        if label in labels:
            raise ArenaInputError(f"{name} {text!r}: rates {labels[label]!r} and {rate!r} share the run directory "
                                  f"name lr{label}; give rates that differ in their first 6 digits")
        labels[label] = rate
    return rates


def parse_choices(text: str, name: str, allowed: Sequence[str]) -> list[str]:
    """A comma list of distinct names from ``allowed`` (a repeated one is refused, not merged)."""
    values = text.split(",")
    if any(value not in allowed for value in values):
        raise ArenaInputError(f"{name} {text!r}: choose from {', '.join(allowed)}")
    if len(set(values)) != len(values):
        raise ArenaInputError(f"{name} {text!r}: give each value once")
    return values


def parse_branching(text: str | None, group_size: int) -> tuple[int, int, str] | None:
    """``--branching ROOTS,BRANCHES,FORK_AT``: env.branching's fields, checked by the library's rules
    (``TreeShape``, docs/training.md, "Tree rollouts") for a tree of ``group_size`` leaves, and by the
    arena's bound on branches; None when not given."""
    if text is None:
        return None
    from milegpo_jax.rollout.tree_shape import TreeShape

    parts = text.split(",")
    try:
        roots, branches, fork_at = int(parts[0]), int(parts[1]), parts[2]
        if len(parts) != 3:
            raise ValueError
    except (ValueError, IndexError):
        raise ArenaInputError(f"--branching {text!r}: expected ROOTS,BRANCHES,FORK_AT, e.g. 2,3,uniform") from None
    try:
        TreeShape(roots, branches, fork_at, leaves=group_size)
    except ValueError as error:
        raise ArenaInputError(f"--branching {text!r}: {error}") from None
    if branches > MAX_EPISODES:
        raise ArenaInputError(f"--branching {text!r}: branches={branches}: must be <= {MAX_EPISODES} (the arena's "
                              "bound on episodes in flight: one env-server batch)")
    return roots, branches, fork_at


def read_json(path: Path, error: type[ValueError]):
    """``path`` parsed as JSON, or ``error`` naming the file (and line) when it is not UTF-8 JSON."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as problem:
        raise error(f"{path}:{problem.lineno}: not JSON ({problem.msg})") from None
    except FileNotFoundError:
        raise  # the caller says what a missing file means
    except OSError as problem:  # a directory, no permission
        raise error(f"{path}: not readable ({problem.strerror or problem})") from None


# ------------------------------------------------------------------ what summarize reads


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _curve(value) -> bool:
    return isinstance(value, list) and all(_number(v) and 0 <= v <= 1 for v in value)


def settings_problem(recorded) -> str | None:
    """What ``summarize`` cannot read in an arena.json (None: nothing)."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("env"), str):
        return "expected a JSON object with env and settings (an arena's arena.json)"
    settings = recorded.get("settings")
    if not isinstance(settings, dict):
        return "settings: expected a JSON object"
    for key in ("groups", "group_size", "tasks"):
        if not isinstance(settings.get(key), int) or isinstance(settings.get(key), bool):
            return f"settings.{key}: expected an integer"
    if not isinstance(settings.get("update"), str):
        return "settings.update: expected a string"
    study = recorded.get("study")
    if study is None:
        return None
    if not isinstance(study, dict):
        return "study: expected a JSON object"
    for key in ("select_seeds", "eval_seeds"):
        seeds = study.get(key)
        if not isinstance(seeds, list) or not seeds or any(seed_problem(seed) for seed in seeds):
            return f"study.{key}: expected a non-empty list of seeds (integers in 0..2**32-1)"
    if not _number(study.get("margin")) or study["margin"] < 0:
        return "study.margin: expected a finite number >= 0"
    updates = study.get("updates")
    if not isinstance(updates, list) or not updates or not all(isinstance(u, str) for u in updates):
        return "study.updates: expected a non-empty list of update rules"
    return None


def record_problem(record: Mapping) -> str | None:
    """What is wrong with one results.jsonl run record whose fields are all there (None: nothing)."""
    if not isinstance(record["contestant"], str) or not record["contestant"]:
        return "contestant: expected a name"
    if seed_problem(record["seed"]):
        return f"seed {record['seed']!r}: {seed_problem(record['seed'])}"
    if not _number(record["lr"]) or record["lr"] <= 0:
        return f"lr {record['lr']!r}: expected a finite number > 0"
    if not isinstance(record["update"], str):
        return f"update {record['update']!r}: expected an update rule's name"
    for key in ("success", "greedy"):
        if not _curve(record[key]):
            return f"{key}: expected a list of success rates (numbers in 0..1)"
    credit = record["credit"]
    if not isinstance(credit, dict) or not all(
            isinstance(values, list) and all(v is None or _number(v) for v in values) for values in credit.values()):
        return "credit: expected an object of lists of numbers or null"
    return None

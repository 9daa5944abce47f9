"""Where ALFWorld games live and which of them a split holds (no alfworld import: usable anywhere).

Both sources share ALFWorld's folder layout, one trial folder per game holding ``traj_data.json`` and
``game.tw-pddl``:

* official data: ``$ALFWORLD_DATA/json_2.1.1/{train,valid_seen,valid_unseen}`` (``alfworld-download``);
* generated games: ``DIR/{train,valid_seen,valid_unseen}`` written by ``envs_bridge.alfworld.generate``,
  by default under ``default_games_dir()``.

Splits map as verl-agent maps them: ``train`` -> ``train``, ``eval_id`` -> ``valid_seen`` (new tasks in
training rooms), ``eval_ood`` -> ``valid_unseen`` (held-out rooms: ALFWorld's 10, 219, 308 and 424 by
default; docs/alfworld-games.md). A split's games are the
solvable ones of the six task types, skipping movable-receptacle and sliced trials, exactly the filter of
ALFWorld's ``AlfredTWEnv.collect_game_files``, sorted by path so a task id names the same game in
every process.
"""

from __future__ import annotations

import json
import os
import threading

from envs_bridge.base import EnvError, check_split

SPLIT_DIRS = {"train": "train", "eval_id": "valid_seen", "eval_ood": "valid_unseen"}
# ALFWorld's six task types, in its numbering (alfred_tw_env.TASK_TYPES 1..6).
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
OFFICIAL_SUBDIR = "json_2.1.1"
GAMES_DIR_VARIABLE = "MILEGPO_ALFWORLD_GAMES"
GENERATE_HINT = (
    "generate games with `.venv-alfworld/bin/python -m envs_bridge.alfworld.generate --out {dir} "
    "--train 240 --eval-id 60 --eval-ood 60 --seed 0` (after `bash envs_bridge/alfworld/bootstrap.sh`), "
    "or set ALFWORLD_DATA to ALFWorld's official data (the folder holding json_2.1.1)"
)


def default_games_dir() -> str:
    """``$MILEGPO_ALFWORLD_GAMES``, else ``$XDG_CACHE_HOME/milegpo-jax/alfworld-games`` (~/.cache/...)."""
    configured = os.environ.get(GAMES_DIR_VARIABLE)
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "milegpo-jax", "alfworld-games")


def official_games_dir() -> str | None:
    """``$ALFWORLD_DATA/json_2.1.1`` when ``ALFWORLD_DATA`` is set and holds it."""
    data = os.environ.get("ALFWORLD_DATA")
    if not data:
        return None
    root = os.path.join(os.path.expanduser(data), OFFICIAL_SUBDIR)
    return root if os.path.isdir(root) else None


def resolve_games_dir(games_dir: str | None) -> tuple[str, str]:
    """(source, root): an explicit ``games_dir`` wins, then official data, then the generated cache."""
    if games_dir is not None:
        root = os.path.abspath(os.path.expanduser(games_dir))
        if not os.path.isdir(root):
            raise EnvError(f"ALFWorld games directory {root} does not exist: {GENERATE_HINT.format(dir=root)}")
        if os.path.isdir(os.path.join(root, OFFICIAL_SUBDIR)):  # an ALFWORLD_DATA folder
            return "official", os.path.join(root, OFFICIAL_SUBDIR)
        if os.path.basename(root) == OFFICIAL_SUBDIR:
            return "official", root
        return "generated", root
    official = official_games_dir()
    if official is not None:
        return "official", official
    return "generated", default_games_dir()


_collected: dict[tuple[str, str], tuple[str, ...]] = {}
_collected_lock = threading.Lock()


def _collect(root: str, split_dir: str) -> tuple[str, ...]:
    games = []
    for folder, _, files in os.walk(os.path.join(root, split_dir)):
        if "traj_data.json" not in files or "game.tw-pddl" not in files:
            continue
        if "movable" in folder or "Sliced" in folder:
            continue
        try:
            with open(os.path.join(folder, "traj_data.json")) as handle:
                task_type = json.load(handle).get("task_type")
            with open(os.path.join(folder, "game.tw-pddl")) as handle:
                solvable = json.load(handle).get("solvable")
        except (OSError, ValueError):
            continue  # a half-written or foreign file is not a game
        if task_type in TASK_TYPES and solvable:
            games.append(os.path.join(folder, "game.tw-pddl"))
    return tuple(sorted(games))


def collect_games(root: str, split: str) -> tuple[str, ...]:
    """The game files of ``split`` under ``root``; a non-empty list is read once per process (official
    data is 3,827 folders), an empty one again on every call (games may be generated meanwhile)."""
    check_split(split)
    key = (root, SPLIT_DIRS[split])
    with _collected_lock:
        cached = _collected.get(key)
    if cached is None:
        cached = _collect(*key)
        if cached:
            with _collected_lock:
                _collected[key] = cached
    return cached


def task_type_of(gamefile: str) -> str:
    with open(os.path.join(os.path.dirname(gamefile), "traj_data.json")) as handle:
        return json.load(handle)["task_type"]

"""TextWorldExpress expert paths as a pure function of the game: the engine's own gold agent, seeded.

TWX's ``generateNewGameJSON(seed, fold, True)`` builds the game from ``Random(seed)`` but runs its gold
agent (a random walk that explores until the task is done) on an *unseeded* ``scala.util.Random()``,
so the same game gets a different gold path on every reset, in every process (one twc task gave paths
of 14, 16, 16 and 14 actions on four resets). Anything trained on those paths (the SFT warm start, its
word tokenizer) then differs between two runs of the same command.

Here we replay what the engine does with one change: the agent's ``Random`` is seeded with the game
seed. For each attempt (the engine allows 50) a fresh copy of the game comes from the generator's
``mkGame(seed, fold)``, which is deterministic, and the game's gold agent plays it; the first
successful attempt's action list is the path. Same (game, parameters, fold, seed): same path, in any
process or thread. See docs/reproducibility.md.
"""

from __future__ import annotations

import threading
from typing import Any

GOLD_AGENTS = {  # game -> the engine's gold-agent class in textworldexpress.goldagent
    "twc": "TWCGoldAgent",
    "coin": "CoinGoldAgent",
    "cookingworld": "CookingWorldGoldAgent",
    "mapreader": "MapReaderGoldAgent",
}
MAX_ATTEMPTS = 50  # the engine's own limit in mkGameWithGoldPath

_cache: dict[tuple[str, str, str, int], tuple[str, ...]] = {}  # (game, params, fold, seed) -> path
_cache_lock = threading.Lock()


def _scala_value(tuple2: Any, name: str) -> Any:
    # py4j exposes a Scala Tuple2's _1/_2 as fields for primitives and as methods for objects.
    value = getattr(tuple2, name)
    return value() if callable(value) else value


def seeded_gold_path(jvm: Any, interface: Any, game: str, params_text: str, fold: str, game_seed: int) -> tuple[str, ...]:
    """The gold path of one game. ``interface`` is a loaded ``PythonInterface`` (its generator builds
    the game copies; the interface's own current game is left alone)."""
    key = (game, params_text, fold, int(game_seed))
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    generator = interface.gameGenerator()
    agent_class = getattr(jvm.textworldexpress.goldagent, GOLD_AGENTS[game])
    random = jvm.scala.util.Random(int(game_seed))
    for _ in range(MAX_ATTEMPTS):
        outcome = agent_class(generator.mkGame(int(game_seed), fold)).mkGoldPath(random)
        if _scala_value(outcome, "_1"):
            path = tuple(str(action) for action in _scala_value(outcome, "_2"))
            with _cache_lock:
                _cache[key] = path
            return path
    raise RuntimeError(f"TextWorldExpress {game} {fold} seed {game_seed}: no gold path in {MAX_ATTEMPTS} attempts")

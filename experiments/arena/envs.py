"""Which environment an arena plays and how: TextWorldExpress game presets, ALFWorld, WebShop.

TextWorldExpress presets are graded by how often the uniform policy wins (``python -m experiments.arena
uniform``, 64 train tasks x 4 episodes, 50 steps unless the preset caps them): ``coin`` 0.45 (6 rooms),
``coin8`` 0.35 (8 rooms), ``twc`` 0.27 (1 room, 2 items to put away); the harder ones ``coin11`` 0.09
(11 rooms, 15 steps), ``twc3`` 0.074 (1 room, 3 items), ``mapreader`` 0.059 (15 rooms, target at most
4 apart) and ``twc-2rooms`` 0.023 (2 rooms, 2 items). CookingWorld is listed too, but the uniform policy
never wins it, so a table that starts uniform learns nothing there from sparse rewards.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from envs_bridge.base import EnvError
from envs_bridge.registry import env_names, make_adapter
from experiments.arena.play import AdapterBackend, PoolBackend

# name -> (game, parameters, episode cap or None for the adapter's 50). The first four grade the easy end;
# the "hard" ones were chosen for a uniform success well under 10 % (docs/results/arena.md, "Study design").
TWX_PRESETS: dict[str, tuple[str, dict[str, int], int | None]] = {
    "coin": ("coin", {}, None),
    "coin8": ("coin", {"numLocations": 8}, None),
    "twc": ("twc", {"numLocations": 1, "numItemsToPutAway": 2}, None),
    "cookingworld": ("cookingworld", {"numLocations": 1, "numIngredients": 1, "numDistractorItems": 2, "includeDoors": 0}, None),
    "coin11": ("coin", {"numLocations": 11}, 15),
    "twc3": ("twc", {"numLocations": 1, "numItemsToPutAway": 3}, None),
    "twc-2rooms": ("twc", {"numLocations": 2, "numItemsToPutAway": 2}, None),
    "mapreader": ("mapreader", {"numLocations": 15, "maxDistanceApart": 4}, None),
}
BACKENDS = ("auto", "inprocess", "pool")
# credit recipe, reward scale and milestone flags: the env's EnvSpec (envs_bridge/specs.py)


@dataclasses.dataclass(frozen=True)
class ArenaEnv:
    """The environment one arena plays and how: adapter options, backend, servers (a dict key per process)."""

    env: str
    options: tuple[tuple[str, Any], ...]  # adapter keyword arguments
    backend: str  # inprocess | pool
    servers: int = 2

    @property
    def label(self) -> str:
        options = dict(self.options)
        if options.get("game"):
            return f"{self.env}:{self.preset}"
        return f"{self.env}:search={options['_search']}" if "_search" in options else self.env

    @property
    def preset(self) -> str:
        return dict(self.options).get("_preset", "")

    def adapter_options(self) -> dict[str, Any]:
        return {key: _decoded(value) for key, value in self.options if not key.startswith("_")}


def _decoded(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(("[", "{")):
        return json.loads(value)
    return value


def make_arena_env(env: str, game: str | None, max_steps: int | None, backend: str, servers: int, extra: dict[str, Any]) -> ArenaEnv:
    """Validates the names (EnvError with one line on a bad one)."""
    if env not in env_names():
        raise EnvError(f"unknown environment {env!r}: choose one of {', '.join(env_names())}")
    if backend not in BACKENDS:
        raise EnvError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    options: dict[str, Any] = {}
    if env == "textworld_express":
        preset = game or "coin"
        if preset not in TWX_PRESETS:
            raise EnvError(f"unknown TextWorldExpress game {preset!r}: choose one of {', '.join(TWX_PRESETS)}")
        name, params, cap = TWX_PRESETS[preset]
        options.update(game=name, game_params=",".join(f"{k}={v}" for k, v in params.items()), gold_path=False, _preset=preset)
        if cap is not None:
            options["max_steps"] = cap
    elif env == "webshop":
        search = game or "oracle"
        if search not in WEBSHOP_SEARCH:
            raise EnvError(f"unknown WebShop search {search!r} (--game): choose one of {', '.join(WEBSHOP_SEARCH)}")
        if search != "oracle":  # the default keeps the label and settings of earlier arenas
            options["_search"] = search
    elif game is not None:
        raise EnvError(f"--game applies to textworld_express and webshop only, not {env}")
    if max_steps is not None:
        options["max_steps"] = max_steps
    for key, value in extra.items():  # JSON values: hashable form for the spec
        options[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
    if backend == "auto":
        backend = "pool" if env == "alfworld" else "inprocess"
    return ArenaEnv(env, tuple(sorted(options.items())), backend, servers)


WEBSHOP_SEARCH = ("oracle", "instruction")  # --game for webshop: where the search step's queries come from


def instruction_queries(instruction: str) -> tuple[str, ...]:
    """Candidate search queries built from the instruction text the agent is shown (pure): the whole
    instruction, its part before the first comma (which drops the price clause and later options), and
    the first and second half of that part's words. Which one finds the product is for the policy to learn."""
    text = " ".join(instruction.split())
    head = text.split(",")[0].strip() or text
    words = head.split()
    half = max(1, len(words) // 2)
    candidates = (text, head, " ".join(words[:half]), " ".join(words[half:]) or head)
    return tuple(dict.fromkeys(candidates))


class WebShopQueryBackend(AdapterBackend):
    """WebShop's search template becomes concrete search actions: with ``search="oracle"`` one, the
    goal's own search query (what a perfect reader of the instruction types); with ``"instruction"``
    the candidates of ``instruction_queries`` from the instruction shown on the page, so the query is
    the policy's choice and the catalog's BM25 search decides what it finds."""

    TEMPLATE = "search[<your query>]"

    def __init__(self, make, num_slots: int, search: str = "oracle"):
        super().__init__(make, num_slots)
        self._search, self._queries = search, {}

    def reset(self, slots, split, task_ids):
        results = super().reset(slots, split, task_ids)
        for slot, task_id, result in zip(slots, task_ids, results):
            if self._search == "oracle":
                queries = (self._adapters[slot].goal(split, task_id).search_query,)
            else:
                queries = instruction_queries(result.task)
            self._queries[slot] = tuple(f"search[{query}]" for query in queries)
        return [self._rewrite(slot, result) for slot, result in zip(slots, results)]

    def step(self, slots, actions):
        return [self._rewrite(slot, result) for slot, result in zip(slots, super().step(slots, actions))]

    def _rewrite(self, slot, result):
        actions = tuple(a for action in result.admissible_actions for a in (self._queries[slot] if action == self.TEMPLATE else (action,)))
        return dataclasses.replace(result, admissible_actions=actions)


def make_backend(spec: ArenaEnv, num_slots: int):
    make = lambda: make_adapter(spec.env, **spec.adapter_options())  # noqa: E731
    if spec.backend == "inprocess":
        if spec.env == "webshop":
            return WebShopQueryBackend(make, num_slots, dict(spec.options).get("_search", "oracle"))
        return AdapterBackend(make, num_slots)
    if spec.env == "webshop":
        raise EnvError("webshop runs in-process only (its search step is rewritten in the arena's process)")
    from envs_bridge.client import EnvPool

    pool = EnvPool(spec.env, num_slots, num_servers=min(spec.servers, num_slots), env_options=spec.adapter_options())
    return PoolBackend(pool)

"""Which environment an arena plays and how: TextWorldExpress game presets, ALFWorld, WebShop.

TextWorldExpress presets are graded by how often the uniform policy wins (50 steps, measured on 48
train episodes): ``coin`` 0.40 (6 rooms), ``coin8`` 0.29 (8 rooms), ``twc`` 0.27 (1 room, 2 items to
put away). CookingWorld is listed too, but the uniform policy never wins it, so a table that starts
uniform learns nothing there from sparse rewards.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from envs_bridge.base import EnvError
from envs_bridge.registry import env_names, make_adapter
from experiments.arena.play import AdapterBackend, PoolBackend

TWX_PRESETS: dict[str, tuple[str, dict[str, int]]] = {
    "coin": ("coin", {}),
    "coin8": ("coin", {"numLocations": 8}),
    "twc": ("twc", {"numLocations": 1, "numItemsToPutAway": 2}),
    "cookingworld": ("cookingworld", {"numLocations": 1, "numIngredients": 1, "numDistractorItems": 2, "includeDoors": 0}),
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
        game = dict(self.options).get("game")
        return f"{self.env}:{self.preset}" if game else self.env

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
        name, params = TWX_PRESETS[preset]
        options.update(game=name, game_params=",".join(f"{k}={v}" for k, v in params.items()), gold_path=False, _preset=preset)
    elif game is not None:
        raise EnvError(f"--game applies to textworld_express only, not {env}")
    if max_steps is not None:
        options["max_steps"] = max_steps
    for key, value in extra.items():  # JSON values: hashable form for the spec
        options[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
    if backend == "auto":
        backend = "pool" if env == "alfworld" else "inprocess"
    return ArenaEnv(env, tuple(sorted(options.items())), backend, servers)


class WebShopQueryBackend(AdapterBackend):
    """WebShop's search template becomes one concrete action: the goal's own search query."""

    TEMPLATE = "search[<your query>]"

    def reset(self, slots, split, task_ids):
        self._queries = getattr(self, "_queries", {})
        results = super().reset(slots, split, task_ids)
        for slot, task_id in zip(slots, task_ids):
            self._queries[slot] = f"search[{self._adapters[slot].goal(split, task_id).search_query}]"
        return [self._rewrite(slot, result) for slot, result in zip(slots, results)]

    def step(self, slots, actions):
        return [self._rewrite(slot, result) for slot, result in zip(slots, super().step(slots, actions))]

    def _rewrite(self, slot, result):
        actions = tuple(self._queries[slot] if a == self.TEMPLATE else a for a in result.admissible_actions)
        return dataclasses.replace(result, admissible_actions=actions)


def make_backend(spec: ArenaEnv, num_slots: int):
    if spec.backend == "inprocess":
        backend_class = WebShopQueryBackend if spec.env == "webshop" else AdapterBackend
        return backend_class(lambda: make_adapter(spec.env, **spec.adapter_options()), num_slots)
    if spec.env == "webshop":
        raise EnvError("webshop runs in-process only (its search action needs the goal's query)")
    from envs_bridge.client import EnvPool

    pool = EnvPool(spec.env, num_slots, num_servers=min(spec.servers, num_slots), env_options=spec.adapter_options())
    return PoolBackend(pool)

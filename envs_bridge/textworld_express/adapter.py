"""TextWorldExpress adapter: twc, coin, cookingworld and mapreader through the real TWX engine.

Splits map to TWX's seed folds: ``train`` -> fold "train" (seeds 0-999), ``eval_id`` -> fold "dev"
(10000-10999), ``eval_ood`` -> fold "test" (20000-20999); ``task_id`` indexes the fold's valid seeds
as the engine lists them, so task ids run 0..999 in every split. For twc the folds also differ in their
object sets (dev and test objects never appear in train games), so there even ``eval_id`` is novel;
for coin, cookingworld and mapreader the folds differ only in seeds. A game is fully determined by
(game, parameters, fold, seed): ``reset``'s ``seed`` argument has nothing left to fix and is only
recorded in ``info``.

Reward: sparse by default, 1.0 on the step that reaches ``tasksuccess`` and 0 otherwise (ALFWorld-like;
the trainer scales it). ``shaped_reward=True`` gives TWX's own reward instead, the change in its
normalised score. ``score`` is TWX's normalised score (1.0 on success), ``won`` is ``tasksuccess``.
Episodes end on success, on ``taskfailure`` (e.g. eating a wrong ingredient in cookingworld) or after
``max_steps`` actions (``info["truncated"]``). Actions go to the engine verbatim; one it does not know
is a step like any other ("Unknown action: I'm not sure what you mean.").

State key (graph credit, docs/environments.md §3.2): the task description, TWX's ``look`` text (the current
room with its contents, doors and container states) and its ``inventory`` text, whitespace-collapsed,
as ``"task: … | location: … | inventory: …"``. It describes the game state rather than the last
message: "You take the beret." and a later "look around" in the same room with the same inventory
share a key, while two identical messages in different rooms do not. Admissible actions follow from
room and inventory, so they add nothing to the key. ``state_key_mode="observation"`` uses the raw
observation text instead (GiGPO's ALFWorld anchor), which merges far more steps: under a random
policy (16 groups x 8 rollouts, 50 steps) the share of steps in a state visited by >= 2 rollouts of
their group is 43 / 84 / 25 / 23 % (twc / coin / cookingworld / mapreader) with game-state keys and
78 / 94 / 79 / 82 % with observation text.

``info`` carries ``game``, ``fold``, ``game_seed``, ``task_id``, ``seed``, ``steps``, ``twx_score``,
``twx_score_raw``, ``failed``, ``truncated``; after ``reset`` also ``gold_actions`` (the engine's
expert action sequence, which wins the game when replayed; for tests and SFT warm starts). The engine
draws its expert's random walk from an unseeded generator, so we run that expert ourselves with the
game seed (``envs_bridge.textworld_express.gold``): the path is a pure function of the task.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from py4j.protocol import Py4JJavaError

from envs_bridge.base import EnvAdapter, EnvError, StepResult, check_split
from envs_bridge.textworld_express import jvm
from envs_bridge.textworld_express.gold import seeded_gold_path

DEFAULT_GAME_PARAMS: dict[str, dict[str, int]] = {  # docs/environments.md §3.1
    "twc": {"numLocations": 3, "numItemsToPutAway": 4},
    "coin": {"numLocations": 6, "numDistractorItems": 3, "includeDoors": 1},
    "cookingworld": {"numLocations": 5, "numIngredients": 3, "numDistractorItems": 5, "includeDoors": 1},
    "mapreader": {"numLocations": 15, "maxDistanceApart": 4},
}
SPLIT_TO_FOLD = {"train": "train", "eval_id": "dev", "eval_ood": "test"}
STATE_KEY_MODES = ("game_state", "observation")
DEFAULT_MAX_STEPS = 50

INT32_RANGE = (-(2**31), 2**31 - 1)  # the engine parses parameters as Java ints

_seed_cache: dict[tuple[str, str, str], tuple[int, ...]] = {}  # (game, params, fold) -> valid seeds
_seed_cache_lock = threading.Lock()


def parse_game_params(params: str | dict[str, Any] | None) -> dict[str, int]:
    """``"k=v,k2=v2"`` or ``{"k": v}`` -> ``{"k": int(v)}``; TWX parameters are all integers."""
    if params is None:
        return {}
    if isinstance(params, str):
        items = [item for item in params.split(",") if item.strip()]
        pairs = []
        for item in items:
            key, sep, value = item.partition("=")
            if not sep:
                raise EnvError(f"game_params entry {item!r} is not key=value")
            pairs.append((key.strip(), value.strip()))
    elif isinstance(params, dict):
        pairs = list(params.items())
    else:
        raise EnvError(f"game_params must be a 'k=v,...' string or an object, got {type(params).__name__}")
    parsed = {}
    for key, value in pairs:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise EnvError(f"game parameter {key}={value!r} must be an integer")
        try:
            number = int(value)
        except ValueError:
            raise EnvError(f"game parameter {key}={value!r} must be an integer") from None
        if not INT32_RANGE[0] <= number <= INT32_RANGE[1]:
            # Beyond 32 bits the engine's parser fails silently and every later call errors.
            raise EnvError(f"game parameter {key}={value!r} is outside the engine's 32-bit integer range")
        parsed[str(key)] = number
    return parsed


def state_key(task: str, look: str, inventory: str) -> str:
    def collapse(text: str) -> str:
        return " ".join(text.split())

    return f"task: {collapse(task)} | location: {collapse(look)} | inventory: {collapse(inventory)}"


class TextWorldExpressAdapter(EnvAdapter):
    name = "textworld_express"

    def __init__(
        self,
        game: str = "twc",
        game_params: str | dict[str, Any] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        shaped_reward: bool = False,
        gold_path: bool = True,
        state_key_mode: str = "game_state",
    ):
        if game not in DEFAULT_GAME_PARAMS:
            raise EnvError(f"unknown TextWorldExpress game {game!r}: choose one of {', '.join(DEFAULT_GAME_PARAMS)}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise EnvError(f"max_steps must be a positive integer, got {max_steps!r}")
        if not isinstance(shaped_reward, bool) or not isinstance(gold_path, bool):
            raise EnvError("shaped_reward and gold_path must be booleans")
        if state_key_mode not in STATE_KEY_MODES:
            raise EnvError(f"state_key_mode must be one of {', '.join(STATE_KEY_MODES)}, got {state_key_mode!r}")
        self.state_key_mode = state_key_mode
        self.game = game
        self.params = {**DEFAULT_GAME_PARAMS[game], **parse_game_params(game_params)}
        self.params_text = ",".join(f"{key}={value}" for key, value in self.params.items())
        self.max_steps = max_steps
        self.shaped_reward = shaped_reward
        self.gold_path = gold_path

        self._java = jvm.new_game_interface()
        message = self._java.load(game, self.params_text)
        if message:
            self.close()
            raise EnvError(f"TextWorldExpress rejected {game} parameters {self.params_text!r}: {message.strip()}")
        self._episode: dict[str, Any] | None = None
        self._done = True

    def num_tasks(self, split: str) -> int:
        return len(self._fold_seeds(split))

    def reset(self, split: str, task_id: int, seed: int) -> StepResult:
        seeds = self._fold_seeds(split)
        if not 0 <= task_id < len(seeds):
            raise EnvError(f"task id {task_id} is out of range for split {split!r}: 0..{len(seeds) - 1}")
        fold = SPLIT_TO_FOLD[split]
        self._episode, self._done = None, True  # a reset the engine refuses leaves no episode to step
        try:
            # No engine gold path here: it is drawn from an unseeded random walk (see gold.py).
            raw = json.loads(self._java.generateNewGameJSON(seeds[task_id], fold, False))
        except Py4JJavaError as error:  # e.g. twc with 4 items in one room: some game seeds have no room for them
            message = str(error.java_exception.getMessage()).strip()
            raise EnvError(f"TextWorldExpress cannot build {split} task {task_id} of {self.game} "
                           f"{self.params_text!r}: {message}") from error
        self._episode = {
            "game": self.game,
            "fold": fold,
            "game_seed": seeds[task_id],
            "task_id": task_id,
            "seed": seed,
            "steps": 0,
            "last_score": float(raw["score"]),
            "task": str(self._java.getTaskDescription()),  # constant within an episode
        }
        self._done = False
        info = {}
        if self.gold_path:
            gold = seeded_gold_path(jvm.gateway_jvm(), self._java, self.game, self.params_text, fold, seeds[task_id])
            info["gold_actions"] = list(gold)
        return self._result(raw, reward=0.0, truncated=False, extra_info=info)

    def step(self, action: str) -> StepResult:
        if self._episode is None or self._done:
            raise EnvError("the episode is over (or was never started): call reset first")
        raw = json.loads(self._java.stepJSON(action))
        episode = self._episode
        episode["steps"] += 1
        score = float(raw["score"])
        won = bool(raw["tasksuccess"])
        if self.shaped_reward:
            reward = score - episode["last_score"]
        else:
            reward = 1.0 if won else 0.0
        episode["last_score"] = score
        truncated = not won and not raw["taskfailure"] and episode["steps"] >= self.max_steps
        return self._result(raw, reward=reward, truncated=truncated, extra_info={})

    def close(self) -> None:
        java, self._java = getattr(self, "_java", None), None
        if java is not None:
            jvm.release(java)

    def _fold_seeds(self, split: str) -> tuple[int, ...]:
        check_split(split)
        fold = SPLIT_TO_FOLD[split]
        cache_key = (self.game, self.params_text, fold)
        with _seed_cache_lock:
            cached = _seed_cache.get(cache_key)
        if cached is None:
            getter = {"train": self._java.getSeedsTrain, "dev": self._java.getSeedsDev, "test": self._java.getSeedsTest}[fold]
            cached = tuple(int(seed) for seed in getter())
            with _seed_cache_lock:
                _seed_cache[cache_key] = cached
        return cached

    def _result(self, raw: dict[str, Any], *, reward: float, truncated: bool, extra_info: dict[str, Any]) -> StepResult:
        episode = self._episode
        assert episode is not None
        won = bool(raw["tasksuccess"])
        failed = bool(raw["taskfailure"])
        done = won or failed or truncated
        self._done = done
        task = episode["task"]
        info = {
            "game": episode["game"],
            "fold": episode["fold"],
            "game_seed": episode["game_seed"],
            "task_id": episode["task_id"],
            "seed": episode["seed"],
            "steps": episode["steps"],
            "twx_score": float(raw["score"]),
            "twx_score_raw": float(raw["scoreRaw"]),
            "failed": failed,
            "truncated": truncated,
            **extra_info,
        }
        return StepResult(
            observation=str(raw["observation"]),
            admissible_actions=tuple(sorted(str(action) for action in raw["validActions"])),
            reward=float(reward),
            done=done,
            won=won,
            score=min(1.0, max(0.0, float(raw["score"]))),
            task=task,
            state_key=(
                state_key(task, str(raw["look"]), str(raw["inventory"]))
                if self.state_key_mode == "game_state"
                else str(raw["observation"])
            ),
            info=info,
        )

"""ALFWorld adapter: ALFWorld's own text engine on official or generated games.

Games: with ``games_dir`` unset, ``$ALFWORLD_DATA/json_2.1.1`` when it exists (the official 3,553 train /
140 valid_seen / 134 valid_unseen games), else the generated-games cache ``games.default_games_dir()``
that ``python -m envs_bridge.alfworld.generate`` fills; ``games_dir`` points at either kind explicitly.
Splits: ``train`` -> ``train``, ``eval_id`` -> ``valid_seen``, ``eval_ood`` -> ``valid_unseen`` (held-out
rooms, docs/alfworld-games.md); ``task_id`` indexes the split's solvable games sorted by path. A game is fully
determined by (split, task_id); ``reset``'s ``seed`` only seeds the expert's tie-breaks (``expert=True``)
and is recorded in ``info``.

Engine (``engine.py``): TextWorld's ``PddlEnv`` with ALFWorld's ``AlfredDemangler`` and ``AlfredInfos``,
so observations, admissible commands and the win test are ALFWorld's (docs/environments.md §4.2). An
inadmissible action is a step like any other ("Nothing happens."). Reward: 10 on the step that wins
(verl-agent's ``10 * won``), else 0; ``score`` is 1.0 once won. Episodes end on a win or after
``max_steps`` actions (default 50, ``info["truncated"]``). ``admissible_actions`` are ALFWorld's sorted
list without ``help``. ``task`` is the sentence after "Your task is to: ".

State key: GraphGPO's augmented anchor (``state_key.py``, docs/environments.md §4.3).

``info``: ``task_type``, ``gamefile``, ``source`` ("official"/"generated"), ``split``, ``task_id``,
``seed``, ``steps``, ``truncated``; after ``reset`` also ``walkthrough`` (the game file's winning action
list, which replays to a win; None where a game has none) and ``gold_actions``, the same list under
the name every adapter gives its expert path (the SFT warm start's demonstrations; empty without a
walkthrough). With ``expert=True`` every result carries
``expert_action``, the next action of ALFWorld's hand-coded expert (it needs the game's facts on every
step, so it is off by default; None where the expert gives up). Every step's info has
``milestone_achieved``: BEACON's flag, true on the step that matches the next walkthrough action in
order (``milestones.py``; never true where a game has no walkthrough).
"""

from __future__ import annotations

import os
import random
import threading
from typing import Any

from envs_bridge.alfworld import engine, games
from envs_bridge.alfworld.milestones import WalkthroughMilestones
from envs_bridge.alfworld.state_key import AnchorTracker
from envs_bridge.base import EnvAdapter, EnvError, StepResult, check_split

DEFAULT_MAX_STEPS = 50  # verl-agent's env.max_steps for ALFWorld (docs/environments.md §6.3)
WIN_REWARD = 10.0
TASK_MARKER = "Your task is to: "
_HIDDEN_COMMANDS = frozenset({"help"})

_checked_roots: set[tuple[str, str]] = set()
_checked_roots_lock = threading.Lock()


def _check_has_games(source: str, root: str) -> None:
    """Raises a clear EnvError when no split under ``root`` holds a game (checked once per process)."""
    with _checked_roots_lock:
        if (source, root) in _checked_roots:
            return
    if not any(games.collect_games(root, split) for split in games.SPLIT_DIRS):
        if source == "official":
            raise EnvError(f"no solvable ALFWorld games under {root} (expected train/valid_seen/valid_unseen)")
        raise EnvError(f"no ALFWorld games in {root}: {games.GENERATE_HINT.format(dir=root)}")
    with _checked_roots_lock:
        _checked_roots.add((source, root))


class AlfWorldAdapter(EnvAdapter):
    name = "alfworld"

    def __init__(self, games_dir: str | None = None, max_steps: int = DEFAULT_MAX_STEPS, expert: bool = False):
        if games_dir is not None and not isinstance(games_dir, str):
            raise EnvError(f"games_dir must be a path string, got {type(games_dir).__name__}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise EnvError(f"max_steps must be a positive integer, got {max_steps!r}")
        if not isinstance(expert, bool):
            raise EnvError(f"expert must be a boolean, got {expert!r}")
        self.source, self.root = games.resolve_games_dir(games_dir)
        _check_has_games(self.source, self.root)
        self.max_steps = max_steps
        self.expert = expert
        self._env = engine.alfworld_env("handcoded" if expert else None)
        self._pddl_env = self._env.unwrapped
        self._loaded_gamefile: str | None = None
        self._episode: dict[str, Any] | None = None
        self._milestones = WalkthroughMilestones(None)
        self._tracker = AnchorTracker()
        self._expert_random = random.getstate()
        self._done = True

    def num_tasks(self, split: str) -> int:
        return len(games.collect_games(self.root, split))

    def reset(self, split: str, task_id: int, seed: int) -> StepResult:
        check_split(split)
        split_games = games.collect_games(self.root, split)
        if isinstance(task_id, bool) or not isinstance(task_id, int) or not 0 <= task_id < len(split_games):
            raise EnvError(f"task id {task_id!r} is out of range for split {split!r}: 0..{len(split_games) - 1}")
        gamefile = split_games[task_id]
        if self._env is None:
            raise EnvError("this ALFWorld env is closed")
        with engine.ENGINE_LOCK:
            if gamefile != self._loaded_gamefile:
                self._loaded_gamefile = None  # a failed load leaves no half-loaded game behind
                self._env.load(gamefile)
                self._loaded_gamefile = gamefile
            state = self._env.reset()
        # ALFWorld's expert breaks ties with the global `random`: each episode gets its own stream from
        # (game, seed), swapped in around the expert's steps, so equal resets give equal expert actions.
        self._expert_random = random.Random(f"{os.path.relpath(gamefile, self.root)}|{seed}").getstate()
        observation = str(state["feedback"])
        start = observation.find(TASK_MARKER)
        task = observation[start + len(TASK_MARKER):].strip() if start != -1 else ""
        self._episode = {
            "task_type": games.task_type_of(gamefile),
            "gamefile": gamefile,
            "source": self.source,
            "split": split,
            "task_id": task_id,
            "seed": seed,
            "steps": 0,
            "task": task,
        }
        self._tracker = AnchorTracker()
        self._done = False
        walkthrough = self._pddl_env.walkthrough
        self._milestones = WalkthroughMilestones(walkthrough)
        extra_info = {"walkthrough": list(walkthrough) if walkthrough else None, "gold_actions": list(walkthrough or ())}
        return self._result(state, reward=0.0, truncated=False, extra_info=extra_info)

    def step(self, action: str) -> StepResult:
        if self._episode is None or self._done:
            raise EnvError("the episode is over (or was never started): call reset first")
        if not isinstance(action, str):
            raise EnvError(f"an action is a string, got {type(action).__name__}")
        with engine.ENGINE_LOCK:
            if self.expert:
                state = self._expert_step(action)
            else:
                state, _, _ = self._env.step(action)
        self._episode["steps"] += 1
        observation = str(state["feedback"])
        self._tracker.observe(action, observation)
        won = bool(state["won"])
        truncated = not won and self._episode["steps"] >= self.max_steps
        milestone = {"milestone_achieved": self._milestones.observe(action)}  # BEACON (milestones.py)
        return self._result(state, reward=WIN_REWARD if won else 0.0, truncated=truncated, extra_info=milestone)

    def _expert_step(self, action: str) -> Any:
        outer_random = random.getstate()
        random.setstate(self._expert_random)
        try:
            state, _, _ = self._env.step(action)
        except Exception:  # noqa: BLE001 -- the expert gives up with Exception("Timeout") or HandCodedAgentFailed
            # raised after the engine stepped: the engine's own state is intact, the expert has no action
            state = self._pddl_env.state
            state["extra.expert_plan"] = []
        finally:
            self._expert_random = random.getstate()
            random.setstate(outer_random)
        return state

    def close(self) -> None:
        # Drops the engine. Its private copy of Fast Downward's library stays mapped (a few MB) until the
        # process ends: unloading it (fast_downward.close_lib) makes the interpreter segfault at exit.
        self._env = None
        self._pddl_env = None
        self._loaded_gamefile = None
        self._episode = None
        self._done = True

    def _result(self, state: Any, *, reward: float, truncated: bool, extra_info: dict[str, Any]) -> StepResult:
        episode = self._episode
        assert episode is not None
        observation = str(state["feedback"])
        won = bool(state["won"])
        done = won or truncated
        self._done = done
        admissible = tuple(command for command in state["admissible_commands"] if command not in _HIDDEN_COMMANDS)
        info = {key: episode[key] for key in ("task_type", "gamefile", "source", "split", "task_id", "seed", "steps")}
        info["truncated"] = truncated
        if self.expert:
            plan = state.get("extra.expert_plan") or []
            info["expert_action"] = str(plan[0]) if plan else None
        info.update(extra_info)
        return StepResult(
            observation=observation,
            admissible_actions=admissible,
            reward=float(reward),
            done=done,
            won=won,
            score=1.0 if won else 0.0,
            task=episode["task"],
            state_key=self._tracker.key(observation, admissible),
            info=info,
        )

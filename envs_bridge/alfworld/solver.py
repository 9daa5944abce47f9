"""Solvability checks for ALFWorld games with ALFWorld's own experts, as ``alfworld-generate`` does.

``ExpertSolver`` plays a game with the hand-coded expert (``AlfredExpert('handcoded')``, which reads the
game's ``traj_data.json``) and returns the winning action list. ``plan`` asks the Fast Downward planner
(``AlfredExpert('planner')``) for a plan in a child process, bounded in time and memory: planning a
pick-two task in a room full of objects can run for minutes and take gigabytes. A plan is kept only if
replaying it wins the game. ``replay_in_alfredtwenv`` is the check every kept game passes: its stored
walkthrough, played in ALFWorld's own ``AlfredTWEnv`` exactly as an ALFWorld user evaluates, wins.

    python -m envs_bridge.alfworld.solver plan GAMEFILE     # prints {"plan": [...] or null}
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import resource
import subprocess
import sys

from alfworld.agents.environment.alfred_tw_env import AlfredExpertType

from envs_bridge.alfworld.engine import alfworld_env

PLANNER_TIMEOUT_S = 60.0
PLANNER_MEMORY_BYTES = 3 * 1024**3


class ExpertSolver:
    """Reuses one engine (and its copy of Fast Downward's library) across games."""

    def __init__(self) -> None:
        self._env = alfworld_env(AlfredExpertType.HANDCODED)
        self._replay_env = alfworld_env()

    def solve(self, gamefile: str, max_steps: int, seed: int | str = 0) -> list[str] | None:
        """The hand-coded expert's winning actions within ``max_steps``, or None (loops, gives up).

        The expert breaks ties with the global ``random``: it is seeded with ``seed`` for this game (and
        restored after), so a game's walkthrough does not depend on what was played before it.
        """
        state = random.getstate()
        random.seed(seed)
        try:
            self._env.load(gamefile)
            game_state = self._env.reset()
            actions: list[str] = []
            for _ in range(max_steps):
                action = game_state["extra.expert_plan"][0]
                game_state, _, done = self._env.step(action)
                actions.append(action)
                if game_state["won"]:
                    return actions
                if done:
                    return None
            return None
        except Exception:  # noqa: BLE001 -- the expert gives up with Exception("Timeout") or HandCodedAgentFailed
            return None
        finally:
            random.setstate(state)

    def wins(self, gamefile: str, actions: list[str]) -> bool:
        """Whether replaying ``actions`` from the start wins (every action admissible on its turn)."""
        self._replay_env.load(gamefile)
        game_state = self._replay_env.reset()
        for action in actions:
            if action not in game_state["admissible_commands"]:
                return False
            game_state, _, _ = self._replay_env.step(action)
        return bool(game_state["won"])


UNMODIFIED_CHECK = (
    "walkthrough replayed in unmodified alfworld.agents.environment.AlfredTWEnv "
    "(eval_out_of_distribution over the game's folder, init_env(batch_size=1), ALFWorld's own wrappers)"
)


def alfworld_eval_config(data_path: str, max_steps: int) -> dict:
    """The smallest config ``AlfredTWEnv`` accepts, all six task types, ``data_path`` for every split."""
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    return {
        "general": {"training_method": "dagger"},
        "env": {"goal_desc_human_anns_prob": 0.0, "task_types": [1, 2, 3, 4, 5, 6], "domain_randomization": False,
                "expert_type": "handcoded"},
        "dataset": {"data_path": data_path, "eval_id_data_path": data_path, "eval_ood_data_path": data_path,
                    "num_train_games": -1, "num_eval_games": -1},
        "logic": {"domain": ALFRED_PDDL_PATH, "grammar": ALFRED_TWL2_PATH},
        "dagger": {"training": {"max_nb_steps_per_episode": max_steps}},
    }


def replay_in_alfredtwenv(gamefile: str, actions: list[str], max_steps: int) -> int | None:
    """The step at which ``actions`` win ``gamefile`` in ALFWorld's unmodified ``AlfredTWEnv``, or None.

    The env is built over the game's own folder (``AlfredTWEnv`` collects it like any game of a
    split: solvable flag, task type, no movable/sliced trial), so a game it would not load fails too.
    """
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):  # its prints and tqdm bar
        alfred = AlfredTWEnv(alfworld_eval_config(os.path.dirname(os.path.abspath(gamefile)), max_steps),
                             train_eval="eval_out_of_distribution")
        if alfred.num_games != 1:
            return None
        env = alfred.init_env(batch_size=1)
    try:
        _, infos = env.reset()
        for step, action in enumerate(actions[:max_steps], start=1):
            if action not in infos["admissible_commands"][0]:
                return None
            _, _, dones, infos = env.step([action])
            if infos["won"][0]:
                return step
            if dones[0]:
                return None
        return None
    finally:
        env.close()


def plan(gamefile: str, timeout_s: float = PLANNER_TIMEOUT_S, memory_bytes: int = PLANNER_MEMORY_BYTES) -> list[str] | None:
    """Fast Downward's plan for ``gamefile`` (from a bounded child process), or None if none in time."""

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    try:
        completed = subprocess.run(
            [sys.executable, "-m", "envs_bridge.alfworld.solver", "plan", gamefile],
            capture_output=True, text=True, timeout=timeout_s, preexec_fn=limit_memory, check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    if completed.returncode != 0:
        return None
    lines = completed.stdout.strip().splitlines()
    return json.loads(lines[-1])["plan"] if lines else None


def _plan_here(gamefile: str) -> list[str] | None:
    env = alfworld_env(AlfredExpertType.PLANNER)
    env.load(gamefile)
    actions = list(env.reset()["extra.expert_plan"])
    return actions if actions and ExpertSolver().wins(gamefile, actions) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Plan an ALFWorld game with Fast Downward (used by the generator).")
    parser.add_argument("command", choices=["plan"])
    parser.add_argument("gamefile")
    args = parser.parse_args(argv)
    print(json.dumps({"plan": _plan_here(args.gamefile)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Plays every game of a games folder in ALFWorld's own, unmodified ``AlfredTWEnv``.

Run under the alfworld interpreter (the tests do):

    .venv-alfworld/bin/python tests/envs/alfworld/unmodified_alfworld_check.py GAMES_DIR [--expert]

For each of ``train``, ``valid_seen`` and ``valid_unseen`` it builds ``AlfredTWEnv(config, "train")`` with
the folder as ``data_path`` (ALFWorld only attaches its expert to training envs), ``init_env(batch_size=1)``
(TextWorld's batched gym env with ALFWorld's wrappers and a 50-step cap), resets once per game and plays
the walkthrough stored in the game file, the generator's guarantee (docs/alfworld-games.md): it must
win. With ``--expert`` it also follows ``extra.expert_plan``, ALFWorld's hand-coded expert, which breaks
ties with the global ``random`` and can loop on pick-two games (reported, not required). ``random`` is
seeded and TextWorld's env worker is forked from this process, so a run is reproducible. The last
stdout line is JSON: one record per game.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv
from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

SPLIT_DIRS = ("train", "valid_seen", "valid_unseen")


def alfworld_config(data_path: str, expert_type: str, max_steps: int) -> dict:
    return {
        "general": {"training_method": "dagger"},
        "env": {
            "goal_desc_human_anns_prob": 0.0, "task_types": [1, 2, 3, 4, 5, 6], "domain_randomization": False,
            "expert_type": expert_type,
        },
        "dataset": {
            "data_path": data_path, "eval_id_data_path": data_path, "eval_ood_data_path": data_path,
            "num_train_games": -1, "num_eval_games": -1,
        },
        "logic": {"domain": ALFRED_PDDL_PATH, "grammar": ALFRED_TWL2_PATH},
        "dagger": {"training": {"max_nb_steps_per_episode": max_steps}},
    }


def play_all(data_path: str, max_steps: int, follow_walkthrough: bool) -> dict[str, tuple[bool, int]]:
    """gamefile -> (won, steps) for every game under ``data_path``, played in an unmodified AlfredTWEnv."""
    alfred = AlfredTWEnv(alfworld_config(data_path, "handcoded", max_steps), train_eval="train")
    if alfred.num_games == 0:
        return {}
    env = alfred.init_env(batch_size=1)
    outcomes = {}
    try:
        for _ in range(alfred.num_games):  # the batch env cycles through its (shuffled) game list
            _, infos = env.reset()
            gamefile = infos["extra.gamefile"][0]
            with open(gamefile) as handle:
                walkthrough = list(json.load(handle)["walkthrough"] or [])
            steps, won, done = 0, False, False
            while not done:
                if follow_walkthrough:
                    action = walkthrough.pop(0) if walkthrough else "look"
                else:
                    action = infos["extra.expert_plan"][0][0]
                _, _, dones, infos = env.step([action])
                steps += 1
                won, done = bool(infos["won"][0]), bool(dones[0])
            outcomes[gamefile] = (won, steps)
    finally:
        env.close()
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("games_dir")
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--expert", action="store_true", help="also play ALFWorld's live hand-coded expert")
    args = parser.parse_args()
    random.seed(0)
    records = []
    for split_dir in SPLIT_DIRS:
        data_path = os.path.join(args.games_dir, split_dir)
        walkthrough = play_all(data_path, args.max_steps, follow_walkthrough=True)
        expert = play_all(data_path, args.max_steps, follow_walkthrough=False) if args.expert else {}
        for gamefile, (won, steps) in sorted(walkthrough.items()):
            with open(os.path.join(os.path.dirname(gamefile), "traj_data.json")) as handle:
                traj_data = json.load(handle)
            records.append({
                "split": split_dir, "gamefile": gamefile, "task_type": traj_data["task_type"],
                "scene": traj_data["scene"]["scene_num"], "walkthrough_won": won, "walkthrough_steps": steps,
                "expert_won": expert[gamefile][0] if gamefile in expert else None,
            })
    print(json.dumps(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())

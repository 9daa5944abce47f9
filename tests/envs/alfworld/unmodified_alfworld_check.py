"""Plays every game of a games folder in ALFWorld's own, unmodified ``AlfredTWEnv`` with its expert.

Run under the alfworld interpreter (the tests do):

    .venv-alfworld/bin/python tests/envs/alfworld/unmodified_alfworld_check.py GAMES_DIR

For each of ``train``, ``valid_seen`` and ``valid_unseen`` it builds ``AlfredTWEnv(config, "train")`` with
the folder as ``data_path`` (ALFWorld only attaches its expert to training envs), ``init_env(batch_size=1)``
(TextWorld's batched gym env with ALFWorld's wrappers and a 50-step cap), resets once per game and follows
``extra.expert_plan``, ALFWorld's hand-coded expert, until the episode ends. The expert breaks ties with
the global ``random`` and can loop on pick-two tasks (docs/environments.md §4.4); a game it loses is then
replayed, in the same unmodified env, from the walkthrough the generator recorded (the expert's own
winning run, with the generator's seed). ``random`` is seeded, and TextWorld's env worker is forked from
this process, so a run is reproducible. The last stdout line is JSON: one record per game.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile

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
    args = parser.parse_args()
    random.seed(0)
    records = []
    for split_dir in SPLIT_DIRS:
        outcomes = play_all(os.path.join(args.games_dir, split_dir), args.max_steps, follow_walkthrough=False)
        for gamefile, (won, steps) in sorted(outcomes.items()):
            with open(os.path.join(os.path.dirname(gamefile), "traj_data.json")) as handle:
                traj_data = json.load(handle)
            records.append({
                "split": split_dir, "gamefile": gamefile, "task_type": traj_data["task_type"],
                "scene": traj_data["scene"]["scene_num"], "expert_won": won, "expert_steps": steps,
                "walkthrough_won": None,
            })
    lost = [record for record in records if not record["expert_won"]]
    if lost:
        with tempfile.TemporaryDirectory() as scratch:  # an AlfredTWEnv over just the lost games
            copies = {}
            for index, record in enumerate(lost):
                folder = os.path.join(scratch, f"game{index}", "trial")
                shutil.copytree(os.path.dirname(record["gamefile"]), folder)
                copies[os.path.join(folder, "game.tw-pddl")] = record
            for gamefile, (won, _) in play_all(scratch, args.max_steps, follow_walkthrough=True).items():
                copies[gamefile]["walkthrough_won"] = won
    print(json.dumps(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The long-horizon real-LLM recipe on TextWorld Commonsense: SmolLM2-135M-Instruct puts 3 items away.

    python -m experiments.demo --config experiments/configs/smollm2_twc3.py --seed 0 --workdir runs/twc3-s0

TWC (TextWorldExpress ``twc``, one room, 3 items to put away): each item lies somewhere in the room and
belongs on or in a piece of furniture the agent must infer from common sense (a clean shirt in the
wardrobe, a copybook in the desk; a closed one must be opened first); a win puts all three away. The
engine scores each item put away, so an episode that ends short of a win still shows how far it got.
Measured on 2026-12-05 (docs/results/llm-credit.md, "Choosing the game"): the gold agent needs 8.1
actions on average (7-9) on the held-out tasks, all within the 15-step cap; the uniform policy over
the admissible actions wins 0.4 % and 1.2 % of its episodes (seeds 0 and 1, 64 tasks x 4); prompts are
275 tokens on average with no history, since the admissible actions name what the agent holds.

It is ``smollm2_coin11.py`` (the model, the update, the warm start and the fixed held-out lists; each
value says why there) with the game changed and no history pair, and 4 task groups per iteration
instead of 2: an episode here ends as soon as the third item is placed, and more tasks per iteration
give the update more than two tasks' worth of signal (the coin recipe's calibration moved the policy
by a KL of 0.0003-0.002 per iteration and did not learn, docs/results/llm-credit.md).

Not a recipe that learns yet: its calibration with MileGPO (seed 0, 6 iterations) won no training
episode and lost its warm start's 3 of 32 held-out wins (docs/results/llm-credit.md, "Calibration 3").
"""

import ml_collections

from experiments.configs import smollm2_coin11


def get_config(arg=None):
    del arg  # no variants
    config = smollm2_coin11.get_config()

    env = config.env
    env.options = ml_collections.ConfigDict({"game": "twc", "game_params": "numLocations=1,numItemsToPutAway=3"})
    env.history_length = 0  # the admissible actions say what the agent holds ("put copybook in desk")
    env.groups_per_iteration = 4

    config.run.name = "smollm2-twx-twc3"
    return config

"""TextWorldExpress with the paper's training recipe; ``twx.py:GAME`` picks the game (default twc).

Games and their default parameters are the adapter's (``envs_bridge/textworld_express/adapter.py``):
twc and cookingworld have long gold paths (19 / 27 steps) and get 50 env steps; coin and mapreader
(7 steps) get 30. Reward is sparse (1 on success), like ALFWorld, so ALFWorld's credit recipe applies
(the env's, from its spec).
The dev fold (eval_id) and test fold (eval_ood) are evaluated on 200 tasks each per seed.

    python -m experiments.train --config experiments/configs/twx.py:coin --workdir runs/twx-coin \
        --config.model.hf_checkpoint=/path/to/Qwen2.5-1.5B-Instruct
"""

import ml_collections

from experiments.configs import base

MAX_ENV_STEPS = {"twc": 50, "cookingworld": 50, "coin": 30, "mapreader": 30}


def get_config(arg=None):
    game = arg or "twc"
    if game not in MAX_ENV_STEPS:
        raise ValueError(f"twx.py:{game}: unknown game; choose one of {', '.join(MAX_ENV_STEPS)}")
    config = base.get_config()
    config.env.options = ml_collections.ConfigDict({"game": game})
    config.env.max_env_steps = MAX_ENV_STEPS[game]
    config.env.eval_tasks_per_split = ml_collections.ConfigDict({"eval_id": 200, "eval_ood": 200})
    config.sampling.max_prompt_tokens = 1536  # observations stay under 1k characters
    config.run.name = f"twx-{game}-milegpo"
    return config

"""WebShop: MileGPO on Qwen2.5-1.5B-Instruct with the paper's WebShop settings (docs/credit.md §5.10, §7).

30 env steps per episode (MileGPO; verl-agent's baselines used 15), prompts up to 4096 tokens, PPO
mini-batch 64 / micro-batch 4 rows, WebShop's credit recipe (mean-only norm, eta 1, theta_m 0.5,
rho 0.5, kappa_bc 1: the env's, from its spec). Validation on 512 in-distribution instructions per seed (123/456/789).

    python -m experiments.train --config experiments/configs/webshop.py --workdir runs/webshop \
        --config.model.hf_checkpoint=/path/to/Qwen2.5-1.5B-Instruct
"""

import ml_collections

from experiments.configs import base


def get_config(arg=None):
    del arg  # no variants
    config = base.get_config()
    config.env.name = "webshop"
    config.env.options = ml_collections.ConfigDict()  # adapter defaults: generated 1000-product catalog
    config.env.max_env_steps = 30
    config.env.eval_tasks_per_split = ml_collections.ConfigDict({"eval_id": 512})
    config.sampling.max_prompt_tokens = 4096
    config.ppo.minibatch_rows = 64
    config.ppo.microbatch_rows = 4
    config.ppo.logits_chunk = 512  # 4096-token prompts x 152k vocabulary: chunk the LM head
    config.run.name = "webshop-milegpo"
    return config

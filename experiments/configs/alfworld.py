"""ALFWorld, the paper's main recipe: MileGPO on Qwen2.5-1.5B-Instruct (docs/credit.md §5.10, §7).

50 env steps per episode, prompts up to 2048 tokens, PPO mini-batch 256 / micro-batch 64 rows (the
defaults), ALFWorld's credit recipe (mean-std norm, eta 0.2, theta_m 1.1, rho 0, kappa_bc 0: the
env's, from its spec). Validation on the in-distribution (eval_id, 140 tasks) and
out-of-distribution (eval_ood, 134 tasks) splits, every task, seeds 123/456/789. The ALFWorld servers
run in their own interpreter (``envs_bridge/alfworld/bootstrap.sh``;
``--config.env.python=.venv-alfworld/bin/python`` or ``$MILEGPO_PYTHON_ALFWORLD``).

    python -m experiments.train --config experiments/configs/alfworld.py --workdir runs/alfworld \
        --config.model.hf_checkpoint=/path/to/Qwen2.5-1.5B-Instruct
"""

import ml_collections

from experiments.configs import base


def get_config(arg=None):
    del arg  # no variants
    config = base.get_config()
    config.env.name = "alfworld"
    config.env.options = ml_collections.ConfigDict()  # adapter defaults: the generated games, no expert
    # the train step on v5e:4x4 in 2.26 GiB of temporaries per chip (experiments.aot; docs/results/aot-summary.md): the layers'
    # inputs wait for the backward pass in host memory, and 256 LM-head positions per row at a time
    config.model.remat = "offload"
    config.ppo.logits_chunk = 256
    config.run.name = "alfworld-milegpo"
    return config

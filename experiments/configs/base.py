"""The paper's shared training recipe (docs/credit.md §5.10 and §7), on TextWorldExpress twc.

Only what differs from the schema's defaults is written here (every default lives once, in
``milegpo_jax/config/sections.py`` and ``credit.py``). The recipe: Qwen2.5-1.5B-Instruct from a local
checkpoint the user names (``--config.model.hf_checkpoint=DIR``; training refuses to start without
it), 16 groups x K = 8 rollouts per iteration, history length 2, actor lr 1e-6 (constant),
low-variance KL 0.01, PPO clip 0.2, entropy 0.001, grad clip 1.0, one PPO epoch, mini-batch 256 rows,
300 iterations, validation every 5 at T = 0.4 on test seeds 123/456/789, the best-validation
checkpoint kept. MileGPO (full) with the environment's recipe (its spec, ``envs_bridge/specs.py``).
Multi-host settings go on each host's command line (``--config.distributed.process_id=1``, README).

``alfworld.py``, ``webshop.py`` and ``twx.py`` start from this and set the environment.
"""

import ml_collections

from milegpo_jax.config import empty_config


def get_config(arg=None):
    del arg  # no variants
    config = empty_config()

    model = config.model
    model.name = "Qwen2.5-1.5B-Instruct"  # hf_checkpoint: required at training start
    model.compute_dtype = "bfloat16"  # fp32 master weights, bf16 matmuls (verl's FSDP mixed precision)
    model.remat = "full"
    model.scan_layers = True

    config.env.options = ml_collections.ConfigDict({"game": "twc"})

    config.sft.learning_rate = 1e-5  # used only if sft.episodes > 0: the paper starts RL from the instruct model
    return config

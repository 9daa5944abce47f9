"""The paper's shared training recipe (docs/credit.md §5.10 and §7), on TextWorldExpress twc.

Qwen2.5-1.5B-Instruct from a local checkpoint the user names (``--config.model.hf_checkpoint=DIR``;
training refuses to start without it), 16 groups x K = 8 rollouts per iteration, history length 2,
actor lr 1e-6 (constant), low-variance KL 0.01, PPO clip 0.2, entropy 0.001, grad clip 1.0, one PPO
epoch, mini-batch 256 rows, 300 iterations, validation every 5 at T = 0.4 on test seeds
123/456/789, the best-validation checkpoint kept. MileGPO (full) with the environment's recipe.

``alfworld.py``, ``webshop.py`` and ``twx.py`` start from this and set the environment.
"""

import ml_collections
from ml_collections import config_dict


def get_config(arg=None):
    del arg  # no variants
    config = ml_collections.ConfigDict()

    config.model = model = ml_collections.ConfigDict()
    model.name = "Qwen2.5-1.5B-Instruct"
    model.hf_checkpoint = config_dict.placeholder(str)  # required at training start
    model.preset = config_dict.placeholder(str)
    model.architecture = None
    model.init_seed = 0
    model.tokenizer_dir = config_dict.placeholder(str)  # None: the checkpoint's tokenizer files
    model.param_dtype = "float32"  # fp32 master weights, bf16 matmuls (verl's FSDP mixed precision)
    model.compute_dtype = "bfloat16"
    model.remat = "full"
    model.scan_layers = True

    config.env = env = ml_collections.ConfigDict()
    env.name = "textworld_express"
    env.options = ml_collections.ConfigDict({"game": "twc"})
    env.num_servers = 0
    env.python = config_dict.placeholder(str)
    env.train_split = "train"
    env.eval_tasks_per_split = ml_collections.ConfigDict({"eval_id": 0, "eval_ood": 0})
    env.eval_seeds = (123, 456, 789)
    env.groups_per_iteration = 16
    env.group_size = 8
    env.max_env_steps = 50
    env.history_length = 2
    env.step_timeout_s = 60.0
    env.reset_timeout_s = 300.0

    config.sampling = sampling = ml_collections.ConfigDict()
    sampling.temperature = 1.0
    sampling.top_p = 1.0
    sampling.top_k = 0
    sampling.max_new_tokens = 512
    sampling.max_prompt_tokens = 2048
    sampling.eval_temperature = 0.4

    config.credit = credit = ml_collections.ConfigDict()
    credit.estimator = "milegpo"
    credit.recipe = config_dict.placeholder(str)  # None: the environment's recipe
    credit.stage = config_dict.placeholder(str)  # None: full MileGPO
    credit.overrides = ml_collections.ConfigDict()

    config.optim = optim = ml_collections.ConfigDict()
    optim.learning_rate = 1e-6
    optim.weight_decay = 0.01
    optim.grad_clip_norm = 1.0
    optim.adam_b1 = 0.9
    optim.adam_b2 = 0.999
    optim.adam_eps = 1e-8
    optim.schedule = "constant"
    optim.warmup_steps = 0
    optim.decay_steps = 0
    optim.end_lr_ratio = 0.0

    config.ppo = ppo = ml_collections.ConfigDict()
    ppo.clip_low = 0.2
    ppo.clip_high = 0.2
    ppo.kl_coef = 0.01
    ppo.kl_estimator = "low_var_kl"
    ppo.entropy_coef = 0.001
    ppo.epochs = 1
    ppo.minibatch_rows = 256
    ppo.microbatch_rows = 64
    ppo.logits_chunk = 0  # all positions at once; the 152k-vocabulary recipes chunk
    ppo.loss_agg = "token-mean"

    config.sft = sft = ml_collections.ConfigDict()
    sft.episodes = 0  # the paper starts RL from the instruct model directly
    sft.epochs = 1
    sft.learning_rate = 1e-5
    sft.batch_rows = 32

    config.run = run = ml_collections.ConfigDict()
    run.name = ""
    run.iterations = 300
    run.eval_every = 5
    run.eval_before_training = False
    run.save_every = 5
    run.keep_checkpoints = 2
    run.seed = 0
    run.allow_config_change = False
    run.best_metric = "eval_id/success_rate"
    run.best_mode = "max"

    config.mesh = mesh = ml_collections.ConfigDict()
    mesh.data = 1
    mesh.fsdp = -1
    mesh.tensor = 1

    config.logging = logging = ml_collections.ConfigDict()
    logging.tensorboard = True
    logging.progress_bar = True

    # multi-host: set on each host's command line (README), e.g. --config.distributed.process_id=1
    config.distributed = distributed = ml_collections.ConfigDict()
    distributed.coordinator_address = config_dict.placeholder(str)
    distributed.num_processes = config_dict.placeholder(int)
    distributed.process_id = config_dict.placeholder(int)
    distributed.auto = False
    return config

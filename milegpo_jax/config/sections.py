"""The training config's sections: one frozen dataclass per top-level key (``TrainConfig`` is in
``schema.py``). Every default is written here, once; experiment configs set only what differs.

Each section checks its own fields in ``__post_init__``; what an environment accepts (its name,
adapter options, eval splits) comes from its spec (``envs_bridge.specs``), read without importing
the environment's engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from envs_bridge.specs import env_names, env_spec
from milegpo_jax.config.checks import ConfigError, check_seed, choice, frozen, non_negative, plain, positive, suggestion
# jax-free modules of the model package: the config imports without jax (docs/architecture.md §3)
from milegpo_jax.models.model_config import ATTENTION_IMPLS, DTYPES, PRESETS, REMAT_POLICIES, ModelConfig, ModelConfigError
from milegpo_jax.models.runtime import RuntimeOptions

LR_SCHEDULES = ("constant", "cosine", "linear")
# the loss aggregates by token mean (verl-agent's setting); other modes come with the loss that does them
LOSS_AGGREGATIONS = ("token-mean",)
# milegpo_jax.train.loss implements these (tests/test_config.py keeps the two lists equal)
KL_ESTIMATORS = ("low_var_kl", "kl", "mse")
BEST_MODES = ("max", "min")


@dataclasses.dataclass(frozen=True)
class ArchitectureConfig:
    """A Qwen2 architecture written inline (tests, the CPU demo); weights start random."""

    vocab_size: int = 0  # embedding rows; 0: the tokenizer's size (e.g. one built for the env's text)
    hidden_size: int = 64
    intermediate_size: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 0  # 0: hidden_size // num_heads
    tie_word_embeddings: bool = True
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 4096

    def __post_init__(self):
        if self.vocab_size < 0:
            raise ConfigError(f"model.architecture.vocab_size={self.vocab_size}: must be >= 0")
        try:
            self.model_config(vocab_size=self.vocab_size or 1)
        except ModelConfigError as error:
            raise ConfigError(f"model.architecture: {error}") from None

    def model_config(self, vocab_size: int | None = None, **token_ids: Any) -> ModelConfig:
        """The ``ModelConfig``. ``vocab_size`` (the tokenizer's size) is needed when the field is 0;
        ``token_ids`` sets bos/eos/pad_token_id."""
        fields = dataclasses.asdict(self)
        fields["vocab_size"] = vocab_size if vocab_size is not None else self.vocab_size
        if fields["vocab_size"] < 1:
            raise ConfigError("model.architecture.vocab_size is 0 (the tokenizer's size): pass vocab_size=len(tokenizer)")
        return ModelConfig(**fields, **token_ids)


@dataclasses.dataclass(frozen=True)
class ModelSection:
    """Where the policy comes from: exactly one of hf_checkpoint, preset, architecture.

    None of them may be set when the config is built (the paper recipes leave the local checkpoint
    path to the user); ``TrainConfig.check_runnable`` then fails at training start with a message
    saying what to pass.
    """

    name: str = ""  # what the recipe expects, for messages and logs ("Qwen2.5-1.5B-Instruct")
    hf_checkpoint: str | None = None  # local Hugging Face directory (config.json + *.safetensors)
    preset: str | None = None  # a public shape with random weights (benchmarks, sharding checks)
    architecture: ArchitectureConfig | None = None  # a small inline shape with random weights
    init_seed: int = 0  # random init of preset / architecture
    # None: the checkpoint's own tokenizer files (hf_checkpoint), the exact Qwen2.5 tokenizer
    # (preset), or one built for the environment's text (architecture; the demo builds it)
    tokenizer_dir: str | None = None
    # how the model runs: the fields of ``RuntimeOptions`` (whose defaults these are; ``from_config``
    # reads them, with ppo.logits_chunk): dtypes, remat, scanned layers, the block of block-causal
    # training forwards (0: dense; docs/models.md §7) and their form ("auto": a fused kernel on TPU and
    # GPU, the blocks on CPU; "xla": the dense mask; docs/models.md §7)
    param_dtype: str = RuntimeOptions.param_dtype
    compute_dtype: str = RuntimeOptions.compute_dtype
    remat: str = RuntimeOptions.remat
    scan_layers: bool = RuntimeOptions.scan_layers
    attention_block: int = RuntimeOptions.attention_block
    attention_impl: str = RuntimeOptions.attention_impl

    def __post_init__(self):
        sources = [name for name in ("hf_checkpoint", "preset", "architecture") if getattr(self, name) is not None]
        if len(sources) > 1:
            raise ConfigError(
                f"model: {' and '.join(sources)} are both set; the policy comes from exactly one of "
                "model.hf_checkpoint, model.preset, model.architecture (set the others to None)"
            )
        if self.hf_checkpoint == "":
            raise ConfigError("model.hf_checkpoint is an empty string; give a directory or None")
        if self.preset is not None:
            choice("model.preset", self.preset, sorted(PRESETS))
        choice("model.param_dtype", self.param_dtype, DTYPES)
        choice("model.compute_dtype", self.compute_dtype, DTYPES)
        choice("model.remat", self.remat, REMAT_POLICIES)
        non_negative("model.attention_block", self.attention_block)
        choice("model.attention_impl", self.attention_impl, ATTENTION_IMPLS)
        check_seed("model.init_seed", self.init_seed)

    @property
    def source(self) -> str | None:
        """"hf_checkpoint", "preset", "architecture", or None when nothing is set yet."""
        for name in ("hf_checkpoint", "preset", "architecture"):
            if getattr(self, name) is not None:
                return name
        return None


FORK_RULES = ("uniform", "first_visit")  # milegpo_jax/rollout/branching.py implements them


@dataclasses.dataclass(frozen=True)
class BranchingSection:
    """Tree rollouts (docs/training.md, tree rollouts): each group grows as a tree of env.group_size leaves.
    Off while ``roots`` is 0: the K rollouts of a group are independent episodes."""

    roots: int = 0  # episodes per group started from the task's start; the rest of the K leaves are forks
    branches: int = 1  # forks made at each fork point (the parent goes on as well)
    fork_at: str = "uniform"  # where to fork: "uniform" (depths drawn over steps) or "first_visit" (new states)

    @property
    def enabled(self) -> bool:
        return self.roots > 0


@dataclasses.dataclass(frozen=True)
class EnvSection:
    """The environment, its server pool, and the G x K group layout of one iteration."""

    name: str = "textworld_express"
    # adapter keyword arguments (the env spec's adapter_options), e.g. {"game": "coin", "game_params": "..."};
    # the episode step cap is max_env_steps below, not an option here
    options: Mapping[str, Any] = dataclasses.field(default_factory=frozen)
    num_servers: int = 0  # env-server processes; 0: one per CPU core (at most one per env)
    python: str | None = None  # server interpreter; None: $MILEGPO_PYTHON_<ENV>, else this one
    train_split: str = "train"
    # eval split -> tasks evaluated per eval seed (0: every task of the split); {} disables eval
    eval_tasks_per_split: Mapping[str, int] = dataclasses.field(
        default_factory=lambda: frozen({"eval_id": 0, "eval_ood": 0})
    )
    eval_seeds: tuple[int, ...] = (123, 456, 789)  # the paper's test seeds: one eval pass per seed
    groups_per_iteration: int = 16  # G tasks per iteration
    group_size: int = 8  # K rollouts of the same task
    max_env_steps: int = 50  # actions per episode; reaching it is a failure
    history_length: int = 2  # observation/action pairs shown in the prompt
    step_timeout_s: float = 60.0
    reset_timeout_s: float = 300.0
    branching: BranchingSection = dataclasses.field(default_factory=BranchingSection)  # off by default

    def __post_init__(self):
        choice("env.name", self.name, env_names())
        spec = env_spec(self.name)
        if self.train_split != "train":
            raise ConfigError(f"env.train_split={self.train_split!r}: training uses the 'train' split")
        for split, count in self.eval_tasks_per_split.items():
            if split not in spec.eval_splits:
                raise ConfigError(
                    f"env.eval_tasks_per_split: unknown split {split!r} (eval splits: {', '.join(spec.eval_splits)})"
                    + suggestion(split, spec.eval_splits)
                )
            non_negative(f"env.eval_tasks_per_split.{split}", count)
        if self.eval_tasks_per_split and not self.eval_seeds:
            raise ConfigError("env.eval_seeds is empty: evaluation needs at least one seed")
        for seed in self.eval_seeds:
            check_seed("env.eval_seeds", seed)
        for name in ("groups_per_iteration", "group_size", "max_env_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"env.{name}={getattr(self, name)}: must be >= 1")
        non_negative("env.num_servers", self.num_servers)
        non_negative("env.history_length", self.history_length)
        positive("env.step_timeout_s", self.step_timeout_s)
        positive("env.reset_timeout_s", self.reset_timeout_s)
        if "max_steps" in self.options:
            raise ConfigError("env.options.max_steps: set env.max_env_steps instead (the one step cap)")
        self._check_branching()
        known = spec.adapter_options
        for name in self.options:
            if name not in known:
                raise ConfigError(
                    f"env.options.{name}: not an option of the {self.name} adapter{suggestion(name, known)} "
                    f"(its options: {', '.join(known)})"
                )

    def _check_branching(self) -> None:
        """The budget is the leaf count: K leaves a tree, K independent rollouts otherwise."""
        tree = self.branching
        non_negative("env.branching.roots", tree.roots)
        if tree.branches < 1:
            raise ConfigError(f"env.branching.branches={tree.branches}: must be >= 1 (forks made at a fork point)")
        choice("env.branching.fork_at", tree.fork_at, FORK_RULES)
        if tree.enabled and tree.roots >= self.group_size:
            raise ConfigError(
                f"env.branching.roots={tree.roots}: must be < env.group_size={self.group_size}, the leaves of a "
                "tree group (its budget): a budget of K leaves holds the roots and at least one fork"
            )

    @property
    def num_envs(self) -> int:
        return self.groups_per_iteration * self.group_size

    def adapter_options(self) -> dict[str, Any]:
        """Keyword arguments for the env adapter (``EnvPool(env_options=...)``)."""
        return {**plain(self.options), "max_steps": self.max_env_steps}


@dataclasses.dataclass(frozen=True)
class SamplingSection:
    temperature: float = 1.0  # training rollouts
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    max_new_tokens: int = 512
    max_prompt_tokens: int = 2048
    eval_temperature: float = 0.4  # validation rollouts (paper: T = 0.4)
    eval_greedy: bool = False  # each evaluation also plays greedily (T = 0), logged as eval/greedy/*
    # prefill each group's shared first prompt and the batch's common prefix once (docs/training.md §10)
    prefix_sharing: bool = False

    def __post_init__(self):
        non_negative("sampling.temperature", self.temperature)
        non_negative("sampling.eval_temperature", self.eval_temperature)
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"sampling.top_p={self.top_p}: must lie in (0, 1]")
        non_negative("sampling.top_k", self.top_k)
        positive("sampling.max_new_tokens", self.max_new_tokens)
        positive("sampling.max_prompt_tokens", self.max_prompt_tokens)


@dataclasses.dataclass(frozen=True)
class OptimSection:
    """AdamW with global-norm clipping (``milegpo_jax.train.optim.make_optimizer``)."""

    learning_rate: float = 1e-6
    weight_decay: float = 0.01
    grad_clip_norm: float = 1.0  # 0: no clipping
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-8
    schedule: str = "constant"  # constant | cosine | linear (decay after warmup)
    warmup_steps: int = 0  # optimizer updates of linear warmup from 0
    decay_steps: int = 0  # cosine/linear: updates from the end of warmup to the end of decay
    end_lr_ratio: float = 0.0  # cosine/linear: final learning rate / learning_rate
    # RL updates train only the top N decoder layers and the final norm (embedding and a tied LM head
    # frozen; no backward pass below them: docs/training.md §2); 0: every weight
    trainable_layers: int = 0

    def __post_init__(self):
        positive("optim.learning_rate", self.learning_rate)
        non_negative("optim.trainable_layers", self.trainable_layers)
        non_negative("optim.weight_decay", self.weight_decay)
        non_negative("optim.grad_clip_norm", self.grad_clip_norm)
        for name in ("adam_b1", "adam_b2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"optim.{name}={getattr(self, name)}: must lie in [0, 1)")
        positive("optim.adam_eps", self.adam_eps)
        choice("optim.schedule", self.schedule, LR_SCHEDULES)
        non_negative("optim.warmup_steps", self.warmup_steps)
        non_negative("optim.decay_steps", self.decay_steps)
        if self.schedule != "constant" and self.decay_steps < 1:
            raise ConfigError(f"optim.schedule={self.schedule!r} needs optim.decay_steps >= 1")
        if not 0.0 <= self.end_lr_ratio <= 1.0:
            raise ConfigError(f"optim.end_lr_ratio={self.end_lr_ratio}: must lie in [0, 1]")


@dataclasses.dataclass(frozen=True)
class PPOSection:
    """Token-level PPO-clip with KL to the reference policy and an entropy bonus."""

    clip_low: float = 0.2  # ratio floor 1 - clip_low
    clip_high: float = 0.2  # ratio ceiling 1 + clip_high (> clip_low: "clip-higher")
    kl_coef: float = 0.01  # 0: no KL term (and no reference forward pass)
    kl_estimator: str = "low_var_kl"
    entropy_coef: float = 0.001
    epochs: int = 1  # passes over each iteration's rows
    minibatch_rows: int = 256  # step rows per optimizer update
    microbatch_rows: int = 64  # step rows per forward/backward (gradient accumulation)
    # LM-head positions per chunk in the loss (0: all at once). With a 152k vocabulary a micro-batch's
    # full fp32 logits take GiBs; chunks keep one [rows, chunk, vocab] block alive at a time.
    logits_chunk: int = 0
    loss_agg: str = "token-mean"
    # each shared prompt prefix computed once per packed sequence (tree-packed rows, docs/training.md
    # §3.1): the same update to float rounding, so off only to compare or bisect (outside the hash)
    share_prefixes: bool = True
    # the rows of each mini-batch: "shuffled" (a random permutation) or "prefix" (the rows' prefix-tree
    # order cut into mini-batches visited in random order: rows that share prompts share a mini-batch,
    # so tree packing computes fewer positions; a different update, so it is in the hash)
    row_order: str = "shuffled"

    def __post_init__(self):
        if not 0.0 < self.clip_low < 1.0:
            raise ConfigError(f"ppo.clip_low={self.clip_low}: must lie in (0, 1)")
        positive("ppo.clip_high", self.clip_high)
        non_negative("ppo.kl_coef", self.kl_coef)
        choice("ppo.kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        non_negative("ppo.entropy_coef", self.entropy_coef)
        non_negative("ppo.logits_chunk", self.logits_chunk)
        choice("ppo.row_order", self.row_order, ("shuffled", "prefix"))
        for name in ("epochs", "minibatch_rows", "microbatch_rows"):
            if getattr(self, name) < 1:
                raise ConfigError(f"ppo.{name}={getattr(self, name)}: must be >= 1")
        if self.minibatch_rows % self.microbatch_rows:
            raise ConfigError(
                f"ppo.minibatch_rows={self.minibatch_rows} is not a multiple of ppo.microbatch_rows={self.microbatch_rows}"
            )
        choice("ppo.loss_agg", self.loss_agg, LOSS_AGGREGATIONS)



@dataclasses.dataclass(frozen=True)
class SFTSection:
    """Supervised warm start on expert paths of training tasks (``experiments/sft.py``)."""

    episodes: int = 0  # expert episodes from training tasks; 0: no warm start
    epochs: int = 1
    learning_rate: float = 1e-3
    batch_rows: int = 32  # step rows per update

    def __post_init__(self):
        non_negative("sft.episodes", self.episodes)
        for name in ("epochs", "batch_rows"):
            if getattr(self, name) < 1:
                raise ConfigError(f"sft.{name}={getattr(self, name)}: must be >= 1")
        positive("sft.learning_rate", self.learning_rate)


@dataclasses.dataclass(frozen=True)
class RunSection:
    name: str = ""  # run label (plots, sweep work directories)
    iterations: int = 300
    eval_every: int = 5  # 0: never (except eval_before_training)
    eval_before_training: bool = False
    save_every: int = 5
    keep_checkpoints: int = 2  # latest kept; the best-validation one is kept in addition
    seed: int = 0
    allow_config_change: bool = False  # resume even though config_hash differs
    best_metric: str = "eval_id/success_rate"  # logged metric that picks the best checkpoint
    best_mode: str = "max"

    def __post_init__(self):
        if self.iterations < 0:
            raise ConfigError(f"run.iterations={self.iterations}: must be >= 0")
        non_negative("run.eval_every", self.eval_every)
        if self.save_every < 1:
            raise ConfigError(f"run.save_every={self.save_every}: must be >= 1")
        if self.keep_checkpoints < 1:
            raise ConfigError(f"run.keep_checkpoints={self.keep_checkpoints}: must be >= 1")
        choice("run.best_mode", self.best_mode, BEST_MODES)
        check_seed("run.seed", self.seed)


@dataclasses.dataclass(frozen=True)
class LoggingSection:
    tensorboard: bool = True  # event files next to metrics.jsonl (always written)
    progress_bar: bool = True


@dataclasses.dataclass(frozen=True)
class DistributedSection:
    """Multi-host JAX (``jax.distributed``): leave unset on a single host. Every host runs the same
    command with its own ``process_id``; see the README's multi-host recipe."""

    coordinator_address: str | None = None  # "host:port" of process 0 (else $JAX_COORDINATOR_ADDRESS)
    num_processes: int | None = None
    process_id: int | None = None
    auto: bool = False  # let JAX detect the cluster (Cloud TPU pod slices, SLURM, Open MPI, GKE)

    def __post_init__(self):
        explicit = (self.coordinator_address, self.num_processes, self.process_id)
        if any(v is not None for v in explicit) and self.auto:
            raise ConfigError("distributed: give coordinator_address/num_processes/process_id or auto=true, not both")
        if any(v is not None for v in explicit) and any(v is None for v in explicit):
            raise ConfigError(
                "distributed: coordinator_address, num_processes and process_id go together "
                f"(got {dict(zip(('coordinator_address', 'num_processes', 'process_id'), explicit))})"
            )
        if self.num_processes is not None and not 0 <= self.process_id < self.num_processes:
            raise ConfigError(f"distributed.process_id={self.process_id}: must be in [0, {self.num_processes})")

    @property
    def enabled(self) -> bool:
        return self.auto or self.coordinator_address is not None

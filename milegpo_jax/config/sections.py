"""The training config's sections: one frozen dataclass per top-level key (``TrainConfig`` is in
``schema.py``). Every default is written here or in the library option type a section takes its
fields from (``checks.option_fields``), once; experiment configs set only what differs.

Each section checks its own fields in ``__post_init__``; what an environment accepts (its name,
adapter options, eval splits) comes from its spec (``envs_bridge.specs``), read without importing
the environment's engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from envs_bridge.specs import env_names, env_spec
from milegpo_jax.config.checks import (
    ConfigError,
    check_seed,
    checked,
    choice,
    frozen,
    non_negative,
    option_fields,
    plain,
    positive,
    suggestion,
    values_of,
)
# The library's option types, from jax-free modules (docs/architecture.md §3): the sections below take
# their fields (names, types, defaults) and checks from them (docs/training.md §1).
from milegpo_jax.models.model_config import PRESETS, ArchitectureConfig
from milegpo_jax.models.runtime import RuntimeOptions
from milegpo_jax.rollout.tree_shape import TreeShape, check_forks
from milegpo_jax.sampling.config import SamplingConfig
from milegpo_jax.train.options import OptimizerConfig, PPOLossConfig

# the loss aggregates by token mean (verl-agent's setting); other modes come with the loss that does them
LOSS_AGGREGATIONS = ("token-mean",)
BEST_MODES = ("max", "min")


@dataclasses.dataclass(frozen=True)
class ModelSection(option_fields(RuntimeOptions, exclude=("logits_chunk",))):
    """Where the policy comes from: exactly one of hf_checkpoint, preset, architecture; and how it runs:
    the fields of ``RuntimeOptions`` but ``logits_chunk`` (``ppo.logits_chunk``): dtypes, remat,
    scanned layers, the block of block-causal training forwards and their form (docs/models.md §7).

    None of the sources may be set when the config is built (the paper recipes leave the local
    checkpoint path to the user); ``TrainConfig.check_runnable`` then fails at training start with a
    message saying what to pass.
    """

    name: str = ""  # what the recipe expects, for messages and logs ("Qwen2.5-1.5B-Instruct")
    hf_checkpoint: str | None = None  # local Hugging Face directory (config.json + *.safetensors)
    preset: str | None = None  # a public shape with random weights (benchmarks, sharding checks)
    architecture: ArchitectureConfig | None = None  # a small inline shape with random weights
    init_seed: int = 0  # random init of preset / architecture
    # None: the checkpoint's own tokenizer files (hf_checkpoint), the exact Qwen2.5 tokenizer
    # (preset), or one built for the environment's text (architecture; the demo builds it)
    tokenizer_dir: str | None = None

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
        checked(RuntimeOptions, "model.", **values_of(self, RuntimeOptions))
        check_seed("model.init_seed", self.init_seed)

    @property
    def source(self) -> str | None:
        """"hf_checkpoint", "preset", "architecture", or None when nothing is set yet."""
        for name in ("hf_checkpoint", "preset", "architecture"):
            if getattr(self, name) is not None:
                return name
        return None


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
        """The budget is the leaf count: K leaves a tree, K independent rollouts otherwise. The rules are
        ``TreeShape``'s (rollout/tree_shape.py); the fork options are checked while trees are off too."""
        tree = self.branching
        non_negative("env.branching.roots", tree.roots)
        if tree.enabled:
            checked(TreeShape, "env.branching.", roots=tree.roots, branches=tree.branches, fork_at=tree.fork_at,
                    leaves=self.group_size)
        else:
            checked(check_forks, "env.branching.", branches=tree.branches, fork_at=tree.fork_at)

    @property
    def num_envs(self) -> int:
        return self.groups_per_iteration * self.group_size

    def adapter_options(self) -> dict[str, Any]:
        """Keyword arguments for the env adapter (``EnvPool(env_options=...)``)."""
        return {**plain(self.options), "max_steps": self.max_env_steps}


@dataclasses.dataclass(frozen=True)
class SamplingSection(option_fields(SamplingConfig, "temperature", "top_p", "top_k", "max_new_tokens", "prefix_sharing",
                                    max_new_tokens=512)):
    """Rollout sampling: ``SamplingConfig``'s temperature (training rollouts), top_p, top_k (0: off),
    max_new_tokens and prefix_sharing (each group's shared first prompt and the batch's common prefix
    prefilled once, docs/training.md §10), and the rollouts' own fields."""

    max_prompt_tokens: int = 2048
    eval_temperature: float = 0.4  # validation rollouts (paper: T = 0.4)
    eval_greedy: bool = False  # each evaluation also plays greedily (T = 0), logged as eval/greedy/*

    def __post_init__(self):
        checked(SamplingConfig, "sampling.", **values_of(self, SamplingConfig))
        checked(SamplingConfig, "sampling.eval_", max_new_tokens=self.max_new_tokens, temperature=self.eval_temperature)
        positive("sampling.max_prompt_tokens", self.max_prompt_tokens)


@dataclasses.dataclass(frozen=True)
class OptimSection(option_fields(OptimizerConfig)):
    """The optimizer: ``OptimizerConfig``'s fields (``milegpo_jax.train.optim.make_optimizer``)."""

    def __post_init__(self):
        checked(OptimizerConfig, "optim.", **values_of(self, OptimizerConfig))


@dataclasses.dataclass(frozen=True)
class PPOSection(option_fields(PPOLossConfig), option_fields(RuntimeOptions, "logits_chunk")):
    """Token-level PPO-clip with KL to the reference policy and an entropy bonus: ``PPOLossConfig``'s
    fields, ``RuntimeOptions.logits_chunk`` (LM-head positions per chunk in the loss, 0: all at once;
    with a 152k vocabulary a micro-batch's full fp32 logits take GiBs), and the update's own fields."""

    epochs: int = 1  # passes over each iteration's rows
    minibatch_rows: int = 256  # step rows per optimizer update
    microbatch_rows: int = 64  # step rows per forward/backward (gradient accumulation)
    loss_agg: str = "token-mean"
    # each shared prompt prefix computed once per packed sequence (tree-packed rows, docs/training.md
    # §3.1): the same update to float rounding, so off only to compare or bisect (outside the hash)
    share_prefixes: bool = True
    # the rows of each mini-batch: "shuffled" (a random permutation) or "prefix" (the rows' prefix-tree
    # order cut into mini-batches visited in random order: rows that share prompts share a mini-batch,
    # so tree packing computes fewer positions; a different update, so it is in the hash)
    row_order: str = "shuffled"

    def __post_init__(self):
        checked(PPOLossConfig, "ppo.", **values_of(self, PPOLossConfig))
        checked(RuntimeOptions, "ppo.", logits_chunk=self.logits_chunk)
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
    # leave out expert steps after which the prompt repeats itself (a no-op such as TWX's opening
    # "look around" with no history): docs/training.md §5
    skip_repeated_prompts: bool = False

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
    eval_every: int = 5  # 0: only after the last iteration (and before training with eval_before_training)
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

"""Typed training configuration: frozen dataclasses built from an ``ml_collections.ConfigDict``.

Config files (``experiments/configs/*.py``) define ``get_config(arg=None)`` returning a ConfigDict;
the command line changes it with ``--config.a.b=value`` overrides; ``load_config`` then turns it into
a ``TrainConfig`` at the boundary. Everything after that boundary sees checked, immutable values::

    raw = load_config_file("experiments/configs/alfworld.py")          # ConfigDict
    raw = apply_overrides(raw, ["model.hf_checkpoint=/ckpt/Qwen2.5-1.5B-Instruct", "run.seed=1"])
    config = load_config(raw)                                           # TrainConfig
    config.check_runnable()                                             # at training start
    config_hash(config)                                                 # resume guard

Why both: ConfigDict gives the ``get_config`` + ``--config.x=y`` workflow researchers know, but its
locking misses typos in config files, checks no ranges and lets code mutate the config mid-run. The
dataclasses catch every unknown key (with close-match suggestions), check types and ranges, and are
frozen. The dataclass schema is also what overrides are parsed against, so ``--config.run.seed=1``
becomes an int and ``--config.credit.stage=None`` clears an optional field.

Fields a run may change without invalidating its checkpoints (iteration budget, logging, mesh,
server placement, checkpoint cadence) are left out of ``config_hash``; see ``HASH_EXCLUDED``.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
import hashlib
import importlib.util
import inspect
import json
import math
import os
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ml_collections

from milegpo_jax.credit.config import (
    ESTIMATORS,
    RECIPES,
    STAGES,
    CreditConfig,
    CreditConfigError,
    make_credit_config,
)
from milegpo_jax.models.qwen2 import (
    DTYPES,
    PRESETS,
    REMAT_POLICIES,
    ModelConfig,
    ModelConfigError,
)
from milegpo_jax.parallel import MeshConfig
from milegpo_jax.rollout.prompts import ENVS
from milegpo_jax.train.loss import KL_ESTIMATORS, PPOLossConfig

EVAL_SPLITS = ("eval_id", "eval_ood")
LR_SCHEDULES = ("constant", "cosine", "linear")
# the loss aggregates by token mean (verl-agent's setting); other modes come with the loss that does them
LOSS_AGGREGATIONS = ("token-mean",)
BEST_MODES = ("max", "min")

# Dotted paths (or whole sections) that do not enter config_hash: changing them on resume is safe.
HASH_EXCLUDED = (
    "run.name",
    "run.iterations",
    "run.eval_every",
    "run.eval_before_training",
    "run.save_every",
    "run.keep_checkpoints",
    "run.allow_config_change",
    "env.num_servers",
    "env.python",
    "env.step_timeout_s",
    "env.reset_timeout_s",
    "ppo.logits_chunk",  # memory layout only: the same log-probs either way
    "mesh",
    "logging",
    "distributed",
)


class ConfigError(ValueError):
    """A bad training configuration: unknown key, wrong type, value out of range, missing field."""


def _frozen(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(mapping or {}))


def _choice(path: str, value: Any, allowed: Sequence[Any]) -> None:
    if value not in allowed:
        hint = _suggestion(str(value), [str(a) for a in allowed])
        raise ConfigError(f"{path}={value!r}: must be one of {', '.join(map(str, allowed))}{hint}")


def _positive(path: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{path}={value}: must be > 0")


def _non_negative(path: str, value: float) -> None:
    if not value >= 0:
        raise ConfigError(f"{path}={value}: must be >= 0")


# ------------------------------------------------------------------------------------------ sections


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

    def model_config(self, vocab_size: int | None = None, **runtime: Any) -> ModelConfig:
        """The ``ModelConfig``. ``vocab_size`` (the tokenizer's size) is needed when the field is 0;
        ``runtime`` sets param_dtype / dtype / remat / scan_layers and token ids."""
        fields = dataclasses.asdict(self)
        fields["vocab_size"] = vocab_size if vocab_size is not None else self.vocab_size
        if fields["vocab_size"] < 1:
            raise ConfigError("model.architecture.vocab_size is 0 (the tokenizer's size): pass vocab_size=len(tokenizer)")
        return ModelConfig(**fields, **runtime)


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
    param_dtype: str = "float32"
    compute_dtype: str = "float32"
    remat: str = "none"
    scan_layers: bool = False

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
            _choice("model.preset", self.preset, sorted(PRESETS))
        _choice("model.param_dtype", self.param_dtype, DTYPES)
        _choice("model.compute_dtype", self.compute_dtype, DTYPES)
        _choice("model.remat", self.remat, REMAT_POLICIES)

    @property
    def source(self) -> str | None:
        """"hf_checkpoint", "preset", "architecture", or None when nothing is set yet."""
        for name in ("hf_checkpoint", "preset", "architecture"):
            if getattr(self, name) is not None:
                return name
        return None


@dataclasses.dataclass(frozen=True)
class EnvSection:
    """The environment, its server pool, and the G x K group layout of one iteration."""

    name: str = "textworld_express"
    # adapter keyword arguments (envs_bridge.registry), e.g. {"game": "coin", "game_params": "..."};
    # the episode step cap is max_env_steps below, not an option here
    options: Mapping[str, Any] = dataclasses.field(default_factory=_frozen)
    num_servers: int = 0  # env-server processes; 0: one per CPU core (at most one per env)
    python: str | None = None  # server interpreter; None: $MILEGPO_PYTHON_<ENV>, else this one
    train_split: str = "train"
    # eval split -> tasks evaluated per eval seed (0: every task of the split); {} disables eval
    eval_tasks_per_split: Mapping[str, int] = dataclasses.field(
        default_factory=lambda: _frozen({"eval_id": 0, "eval_ood": 0})
    )
    eval_seeds: tuple[int, ...] = (123, 456, 789)  # the paper's test seeds: one eval pass per seed
    groups_per_iteration: int = 16  # G tasks per iteration
    group_size: int = 8  # K rollouts of the same task
    max_env_steps: int = 50  # actions per episode; reaching it is a failure
    history_length: int = 2  # observation/action pairs shown in the prompt
    step_timeout_s: float = 60.0
    reset_timeout_s: float = 300.0

    def __post_init__(self):
        _choice("env.name", self.name, ENVS)
        if self.train_split != "train":
            raise ConfigError(f"env.train_split={self.train_split!r}: training uses the 'train' split")
        for split, count in self.eval_tasks_per_split.items():
            if split not in EVAL_SPLITS:
                raise ConfigError(
                    f"env.eval_tasks_per_split: unknown split {split!r} (eval splits: {', '.join(EVAL_SPLITS)})"
                    + _suggestion(split, EVAL_SPLITS)
                )
            _non_negative(f"env.eval_tasks_per_split.{split}", count)
        if self.eval_tasks_per_split and not self.eval_seeds:
            raise ConfigError("env.eval_seeds is empty: evaluation needs at least one seed")
        for name in ("groups_per_iteration", "group_size", "max_env_steps"):
            if getattr(self, name) < 1:
                raise ConfigError(f"env.{name}={getattr(self, name)}: must be >= 1")
        _non_negative("env.num_servers", self.num_servers)
        _non_negative("env.history_length", self.history_length)
        _positive("env.step_timeout_s", self.step_timeout_s)
        _positive("env.reset_timeout_s", self.reset_timeout_s)
        if "max_steps" in self.options:
            raise ConfigError("env.options.max_steps: set env.max_env_steps instead (the one step cap)")
        _check_adapter_options(self.name, self.options)

    @property
    def num_envs(self) -> int:
        return self.groups_per_iteration * self.group_size

    def adapter_options(self) -> dict[str, Any]:
        """Keyword arguments for the env adapter (``EnvPool(env_options=...)``)."""
        return {**_thaw(self.options), "max_steps": self.max_env_steps}


def _check_adapter_options(env: str, options: Mapping[str, Any]) -> None:
    """Option names must be keyword arguments of the env's adapter. An adapter that cannot be
    imported here (ALFWorld runs in its own interpreter) is checked by its server instead."""
    from envs_bridge.registry import EnvUnavailableError, adapter_class

    try:
        cls = adapter_class(env)
    except EnvUnavailableError:
        return
    known = [name for name in inspect.signature(cls).parameters if name != "max_steps"]
    for name in options:
        if name not in known:
            raise ConfigError(
                f"env.options.{name}: not an option of the {env} adapter{_suggestion(name, known)} "
                f"(its options: {', '.join(known)})"
            )


@dataclasses.dataclass(frozen=True)
class SamplingSection:
    temperature: float = 1.0  # training rollouts
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    max_new_tokens: int = 512
    max_prompt_tokens: int = 2048
    eval_temperature: float = 0.4  # validation rollouts (paper: T = 0.4)

    def __post_init__(self):
        _non_negative("sampling.temperature", self.temperature)
        _non_negative("sampling.eval_temperature", self.eval_temperature)
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"sampling.top_p={self.top_p}: must lie in (0, 1]")
        _non_negative("sampling.top_k", self.top_k)
        _positive("sampling.max_new_tokens", self.max_new_tokens)
        _positive("sampling.max_prompt_tokens", self.max_prompt_tokens)


_CREDIT_OPTION_TYPES = {
    f.name: typing.get_type_hints(CreditConfig)[f.name]
    for f in dataclasses.fields(CreditConfig)
    if f.name not in ("estimator", "stage")  # set by credit.estimator / credit.stage
}


@dataclasses.dataclass(frozen=True)
class CreditSection:
    """Advantage estimator; checked by building ``make_credit_config`` from it."""

    estimator: str = "milegpo"
    recipe: str | None = None  # None: "webshop" for WebShop, else "alfworld" (the env's recipe)
    stage: str | None = None  # MileGPO only: full (None), rcs (w/o PCC), md (w/o PCC and RCS)
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=_frozen)  # CreditConfig fields

    # free keys of these mappings have known value types (used to parse --config overrides)
    _MAPPING_VALUE_TYPES: typing.ClassVar[dict[str, dict[str, Any]]] = {"overrides": _CREDIT_OPTION_TYPES}

    def __post_init__(self):
        _choice("credit.estimator", self.estimator, ESTIMATORS)
        if self.recipe is not None:
            _choice("credit.recipe", self.recipe, RECIPES)
        if self.stage is not None:
            _choice("credit.stage", self.stage, STAGES)
            if self.estimator != "milegpo":
                raise ConfigError(
                    f"credit.stage={self.stage!r} applies to milegpo only; set credit.stage=None for {self.estimator}"
                )
        for name in self.overrides:
            if name not in _CREDIT_OPTION_TYPES:
                where = "credit.estimator / credit.stage" if name in ("estimator", "stage") else None
                raise ConfigError(
                    f"credit.overrides.{name}: "
                    + (f"set {where} instead" if where else f"not a credit option{_suggestion(name, _CREDIT_OPTION_TYPES)}")
                )
        self.build()

    def build(self, default_recipe: str = "alfworld") -> CreditConfig:
        """The estimator's ``CreditConfig`` (recipe defaults, stage, then overrides)."""
        try:
            return make_credit_config(
                self.estimator, self.recipe or default_recipe, self.stage, dict(self.overrides)
            )
        except CreditConfigError as error:
            raise ConfigError(f"credit: {error}") from None


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

    def __post_init__(self):
        _positive("optim.learning_rate", self.learning_rate)
        _non_negative("optim.weight_decay", self.weight_decay)
        _non_negative("optim.grad_clip_norm", self.grad_clip_norm)
        for name in ("adam_b1", "adam_b2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"optim.{name}={getattr(self, name)}: must lie in [0, 1)")
        _positive("optim.adam_eps", self.adam_eps)
        _choice("optim.schedule", self.schedule, LR_SCHEDULES)
        _non_negative("optim.warmup_steps", self.warmup_steps)
        _non_negative("optim.decay_steps", self.decay_steps)
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

    def __post_init__(self):
        if not 0.0 < self.clip_low < 1.0:
            raise ConfigError(f"ppo.clip_low={self.clip_low}: must lie in (0, 1)")
        _positive("ppo.clip_high", self.clip_high)
        _non_negative("ppo.kl_coef", self.kl_coef)
        _choice("ppo.kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        _non_negative("ppo.entropy_coef", self.entropy_coef)
        _non_negative("ppo.logits_chunk", self.logits_chunk)
        for name in ("epochs", "minibatch_rows", "microbatch_rows"):
            if getattr(self, name) < 1:
                raise ConfigError(f"ppo.{name}={getattr(self, name)}: must be >= 1")
        if self.minibatch_rows % self.microbatch_rows:
            raise ConfigError(
                f"ppo.minibatch_rows={self.minibatch_rows} is not a multiple of ppo.microbatch_rows={self.microbatch_rows}"
            )
        _choice("ppo.loss_agg", self.loss_agg, LOSS_AGGREGATIONS)

    def loss_config(self) -> PPOLossConfig:
        """The loss's own config from this section."""
        return PPOLossConfig(clip_low=self.clip_low, clip_high=self.clip_high, kl_coef=self.kl_coef,
                             kl_estimator=self.kl_estimator, entropy_coef=self.entropy_coef)


@dataclasses.dataclass(frozen=True)
class SFTSection:
    """Supervised warm start on expert paths of training tasks (``experiments/sft.py``)."""

    episodes: int = 0  # expert episodes from training tasks; 0: no warm start
    epochs: int = 1
    learning_rate: float = 1e-3
    batch_rows: int = 32  # step rows per update

    def __post_init__(self):
        _non_negative("sft.episodes", self.episodes)
        for name in ("epochs", "batch_rows"):
            if getattr(self, name) < 1:
                raise ConfigError(f"sft.{name}={getattr(self, name)}: must be >= 1")
        _positive("sft.learning_rate", self.learning_rate)


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
        _non_negative("run.eval_every", self.eval_every)
        if self.save_every < 1:
            raise ConfigError(f"run.save_every={self.save_every}: must be >= 1")
        if self.keep_checkpoints < 1:
            raise ConfigError(f"run.keep_checkpoints={self.keep_checkpoints}: must be >= 1")
        _choice("run.best_mode", self.best_mode, BEST_MODES)


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


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    model: ModelSection = dataclasses.field(default_factory=ModelSection)
    env: EnvSection = dataclasses.field(default_factory=EnvSection)
    sampling: SamplingSection = dataclasses.field(default_factory=SamplingSection)
    credit: CreditSection = dataclasses.field(default_factory=CreditSection)
    optim: OptimSection = dataclasses.field(default_factory=OptimSection)
    ppo: PPOSection = dataclasses.field(default_factory=PPOSection)
    sft: SFTSection = dataclasses.field(default_factory=SFTSection)
    run: RunSection = dataclasses.field(default_factory=RunSection)
    mesh: MeshConfig = dataclasses.field(default_factory=MeshConfig)
    logging: LoggingSection = dataclasses.field(default_factory=LoggingSection)
    distributed: DistributedSection = dataclasses.field(default_factory=DistributedSection)

    def __post_init__(self):
        if self.credit.recipe is None:  # the env decides: WebShop's recipe for WebShop, else ALFWorld's
            recipe = "webshop" if self.env.name == "webshop" else "alfworld"
            object.__setattr__(self, "credit", dataclasses.replace(self.credit, recipe=recipe))
        _check_mesh(self.mesh)
        arch = self.model.architecture
        context = self.sampling.max_prompt_tokens + self.sampling.max_new_tokens
        if arch is not None and context > arch.max_position_embeddings:
            raise ConfigError(
                f"sampling.max_prompt_tokens + sampling.max_new_tokens = {context} exceeds "
                f"model.architecture.max_position_embeddings = {arch.max_position_embeddings}"
            )
        splits = tuple(self.env.eval_tasks_per_split)
        needs_eval = self.run.eval_every > 0 or self.run.eval_before_training
        if needs_eval and self.run.best_metric:
            split = self.run.best_metric.split("/", 1)[0]
            if split in EVAL_SPLITS and split not in splits:
                raise ConfigError(
                    f"run.best_metric={self.run.best_metric!r} needs split {split!r} in env.eval_tasks_per_split "
                    f"(evaluated: {', '.join(splits) or 'none'})"
                )

    def credit_config(self) -> CreditConfig:
        return self.credit.build()

    def check_runnable(self) -> None:
        """Start-of-training checks the config alone cannot make: the policy's source must be set
        and exist on this machine. Raises ConfigError with what to pass."""
        model = self.model
        if model.source is None:
            wanted = f" ({model.name})" if model.name else ""
            raise ConfigError(
                f"model.hf_checkpoint is not set: this recipe trains a local Hugging Face checkpoint{wanted}; "
                "pass --config.model.hf_checkpoint=/path/to/checkpoint (a directory with config.json and "
                "*.safetensors), or use model.preset / model.architecture for a randomly initialised policy"
            )
        if model.hf_checkpoint is not None:
            directory = Path(model.hf_checkpoint).expanduser()
            if not (directory / "config.json").is_file():
                raise ConfigError(
                    f"model.hf_checkpoint={model.hf_checkpoint!r}: no config.json there; "
                    "it must be a local Hugging Face checkpoint directory"
                )
        if model.tokenizer_dir is not None and not Path(model.tokenizer_dir).expanduser().is_dir():
            raise ConfigError(f"model.tokenizer_dir={model.tokenizer_dir!r} is not a directory")


def _check_mesh(mesh: MeshConfig) -> None:
    sizes = dataclasses.asdict(mesh)
    if any(not isinstance(v, int) or v == 0 or v < -1 for v in sizes.values()) or list(sizes.values()).count(-1) > 1:
        raise ConfigError(f"mesh {sizes}: sizes must be positive, with at most one -1 (all remaining devices)")


# ------------------------------------------------------------------------------------------ building


def _suggestion(key: str, candidates: Sequence[str] | Mapping[str, Any], prefix: str = "") -> str:
    close = difflib.get_close_matches(key, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(prefix + c) for c in close) + "?"


def _leaf_paths(cls: type, prefix: str = "") -> list[str]:
    paths = []
    for name, hint in typing.get_type_hints(cls).items():
        if name.startswith("_"):
            continue
        inner = _strip_optional(hint)
        if dataclasses.is_dataclass(inner):
            paths += _leaf_paths(inner, f"{prefix}{name}.")
        else:
            paths.append(prefix + name)
    return paths


def _unknown_key(path: str, key: str, known: Sequence[str]) -> ConfigError:
    """An unknown key, with close matches at the same level or, failing that, anywhere."""
    prefix = path + "." if path else ""
    hint = _suggestion(key, known, prefix)
    if not hint:  # e.g. `learning_rate` given at the top level: look across all sections
        by_leaf: dict[str, list[str]] = {}
        for leaf_path in _leaf_paths(TrainConfig):
            by_leaf.setdefault(leaf_path.rsplit(".", 1)[-1], []).append(leaf_path)
        close = difflib.get_close_matches(key, list(by_leaf), n=3, cutoff=0.75)
        if close:
            hint = "; did you mean " + " or ".join(repr(p) for c in close for p in by_leaf[c]) + "?"
        else:
            hint = f"; known keys here: {', '.join(prefix + k for k in known)}"
    return ConfigError(f"unknown config key {prefix + key!r}{hint}")


def _strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _is_optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _json_like(path: str, value: Any) -> Any:
    """Free-form values (adapter options) must be JSON data: they travel to env servers and hashes."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"{path}={value}: must be finite")
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_json_like(f"{path}[{i}]", v) for i, v in enumerate(value))
    if isinstance(value, Mapping):
        return _frozen({str(k): _json_like(f"{path}.{k}", v) for k, v in value.items()})
    raise ConfigError(f"{path}={value!r}: expected JSON-like data (number, string, bool, list, dict)")


def _convert(hint: Any, value: Any, path: str, owner: type | None = None, field: str = "") -> Any:
    """Checks ``value`` against the field's type hint; converts int -> float, list -> tuple,
    dict -> read-only mapping, nested mapping -> section dataclass."""
    if value is None:
        if _is_optional(hint) or hint is Any:
            return None
        raise ConfigError(f"{path} is None but must be {_type_name(hint)}")
    inner = _strip_optional(hint)
    if dataclasses.is_dataclass(inner):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a section (mapping of fields), got {value!r}")
        return _build_section(inner, value, path)
    if inner is Any:
        return _json_like(path, value)
    if inner is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}={value!r}: expected true/false")
        return value
    if inner is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}={value!r}: expected an integer")
        return value
    if inner is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}={value!r}: expected a number")
        return float(value)
    if inner is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}={value!r}: expected a string")
        return value
    origin = typing.get_origin(inner)
    if origin is tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise ConfigError(f"{path}={value!r}: expected a list")
        item_hint = typing.get_args(inner)[0]
        return tuple(_convert(item_hint, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin in (Mapping, dict, typing.Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
        value_types = getattr(owner, "_MAPPING_VALUE_TYPES", {}).get(field)
        value_hint = typing.get_args(inner)[1]
        converted = {}
        for key, item in value.items():
            item_hint = value_types.get(key, value_hint) if value_types else value_hint
            converted[str(key)] = _convert(item_hint, item, f"{path}.{key}")
        return _frozen(converted)
    raise TypeError(f"{path}: unsupported field type {inner!r}")  # a schema bug, not a user error


def _build_section(cls: type, data: Mapping[str, Any], path: str) -> Any:
    hints = {k: v for k, v in typing.get_type_hints(cls).items() if not k.startswith("_")}
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            raise _unknown_key(path, str(key), names)
        kwargs[key] = _convert(hints[key], value, f"{path}.{key}" if path else key, cls, key)
    try:
        return cls(**kwargs)
    except ModelConfigError as error:  # sections that build library configs
        raise ConfigError(f"{path}: {error}") from None


def load_config(config: ml_collections.ConfigDict | Mapping[str, Any]) -> TrainConfig:
    """The typed, validated ``TrainConfig`` of a ConfigDict (or plain nested mapping).

    Missing keys take the dataclass defaults; unknown keys, wrong types and out-of-range values raise
    ``ConfigError`` naming the dotted path (with close matches for unknown keys)."""
    data = config.to_dict() if isinstance(config, ml_collections.ConfigDict) else config
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config must be a ConfigDict or mapping, got {type(config).__name__}")
    return _build_section(TrainConfig, data, "")


# ------------------------------------------------------------------------------------------ hashing


def _thaw(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _thaw(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def to_dict(config: TrainConfig) -> dict[str, Any]:
    """Plain nested dict (JSON-serialisable) of a TrainConfig; ``load_config`` reads it back."""
    return _thaw(config)


def config_identity(config: TrainConfig) -> dict[str, Any]:
    """What ``config_hash`` covers: ``to_dict`` less ``HASH_EXCLUDED``."""
    data = to_dict(config)
    for path in HASH_EXCLUDED:
        *parents, leaf = path.split(".")
        node = data
        for part in parents:
            node = node[part]
        node.pop(leaf)
    return data


def config_hash(config: TrainConfig) -> str:
    """Stable 16-hex digest of the fields that define a run's trajectory (not iterations, logging,
    mesh, server placement or checkpoint cadence): a resumed run must match it."""
    text = json.dumps(config_identity(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_changes(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``["ppo.kl_coef: 0.01 -> 0.02", ...]`` between two ``config_identity`` dicts."""
    changes = []
    for key in sorted(set(old) | set(new)):
        path = prefix + key
        a, b = old.get(key, "<absent>"), new.get(key, "<absent>")
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            changes += describe_changes(a, b, path + ".")
        elif a != b:
            changes.append(f"{path}: {a!r} -> {b!r}")
    return changes


# ------------------------------------------------------------------------------------------ overrides


def _field_hint(parts: Sequence[str], config_dict: ml_collections.ConfigDict) -> Any:
    """The schema type of a dotted key, or ConfigError naming close matches."""
    cls: Any = TrainConfig
    for depth, part in enumerate(parts):
        path = ".".join(parts[:depth])
        hints = {k: v for k, v in typing.get_type_hints(cls).items() if not k.startswith("_")}
        if part not in hints:
            raise _unknown_key(path, part, list(hints))
        hint = hints[part]
        inner = _strip_optional(hint)
        rest = parts[depth + 1 :]
        if not rest:
            return hint
        if dataclasses.is_dataclass(inner):
            cls = inner
            continue
        if typing.get_origin(inner) in (Mapping, dict, typing.Mapping):
            value_types = getattr(cls, "_MAPPING_VALUE_TYPES", {}).get(part)
            key = rest[0]
            if value_types is not None:
                if key not in value_types:
                    raise ConfigError(
                        f"unknown config key {'.'.join(parts[: depth + 2])!r}"
                        f"{_suggestion(key, list(value_types), '.'.join(parts[: depth + 1]) + '.')}"
                    )
                return value_types[key] if len(rest) == 1 else Any
            value_hint = typing.get_args(inner)[1]
            if value_hint is Any and len(rest) == 1:  # free-form: keep the type of a value already there
                existing = _get_path(config_dict, parts)
                if existing is not None and not isinstance(existing, ml_collections.ConfigDict):
                    return type(existing) | None
            return value_hint if len(rest) == 1 else Any
        raise ConfigError(f"config key {'.'.join(parts[: depth + 1])!r} is a {_type_name(hint)}, it has no sub-keys")
    raise AssertionError("unreachable")


def _get_path(config_dict: ml_collections.ConfigDict, parts: Sequence[str]) -> Any:
    node: Any = config_dict
    for part in parts:
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            return None
        node = node[part]
    return node


_NONE_TEXTS = ("None", "none", "null")


def _parse_literal(text: str) -> Any:
    """Free-form values: JSON or Python literals where they parse, else the text itself."""
    if text in _NONE_TEXTS:
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            continue
    return text


def _parse_text(hint: Any, text: str, key: str) -> Any:
    """Parses an override's text as the field's type."""
    if _is_optional(hint) and text in _NONE_TEXTS:
        return None
    inner = _strip_optional(hint)
    if dataclasses.is_dataclass(inner):
        clear = f", or {key}=None to clear it" if _is_optional(hint) else ""
        raise ConfigError(f"{key} is a section: set its fields one by one ({key}.FIELD=value){clear}")
    try:
        if inner is Any:
            return _parse_literal(text)
        if inner is bool:
            lowered = text.strip().lower()
            if lowered in ("true", "1", "yes"):
                return True
            if lowered in ("false", "0", "no"):
                return False
            raise ValueError
        if inner is int:
            return int(text)
        if inner is float:
            return float(text)
        if inner is str:
            return text
        origin = typing.get_origin(inner)
        if origin is tuple:
            stripped = text.strip()
            if stripped and stripped[0] in "([":
                items = ast.literal_eval(stripped)
                return tuple(items)
            item_hint = typing.get_args(inner)[0]
            return tuple(_parse_text(item_hint, item.strip(), key) for item in stripped.split(",") if item.strip())
        if origin in (Mapping, dict, typing.Mapping):
            value = _parse_literal(text)
            if not isinstance(value, Mapping):
                raise ValueError
            return value
    except (ValueError, SyntaxError):
        raise ConfigError(f"{key}={text!r}: expected {_type_name(inner)}") from None
    raise TypeError(f"{key}: unsupported field type {inner!r}")


def _set_path(config_dict: ml_collections.ConfigDict, parts: Sequence[str], value: Any) -> None:
    node = config_dict
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, ml_collections.ConfigDict):
            with node.unlocked(), node.ignore_type():
                node[part] = ml_collections.ConfigDict()
            child = node[part]
        node = child
    with node.unlocked():
        try:
            node[parts[-1]] = value
        except TypeError:  # ConfigDict's own type lock (e.g. int -> float); the schema decides instead
            with node.ignore_type():
                node[parts[-1]] = value


def apply_overrides(
    config_dict: ml_collections.ConfigDict, overrides: Sequence[str] | Mapping[str, Any]
) -> ml_collections.ConfigDict:
    """A copy of ``config_dict`` with ``["a.b=value", ...]`` (text, parsed as the field's type) or
    ``{"a.b": value}`` (Python values) applied in order. Unknown keys raise ConfigError with close
    matches; the result still goes through ``load_config`` for range checks."""
    result = copy.deepcopy(config_dict)  # FieldReferences stay linked inside the copy
    items: list[tuple[str, Any, bool]]
    if isinstance(overrides, Mapping):
        items = [(key, value, False) for key, value in overrides.items()]
    else:
        items = []
        for assignment in overrides:
            key, sep, text = assignment.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"override {assignment!r}: expected key=value")
            items.append((key.strip(), text, True))
    for key, value, is_text in items:
        parts = key.split(".")
        hint = _field_hint(parts, result)
        if is_text:
            value = _parse_text(hint, value, key)
        _set_path(result, parts, value)
    return result


def format_override(key: str, value: Any) -> str:
    """``key=text`` that ``apply_overrides`` parses back to ``value`` (for sweep command lines)."""
    if value is None:
        text = "None"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (tuple, list)):
        text = "(" + ",".join(json.dumps(v) if isinstance(v, str) else repr(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    elif isinstance(value, Mapping):
        text = json.dumps(_thaw(value), sort_keys=True)
    else:
        text = str(value)
    return f"{key}={text}"


def split_config_flags(argv: Sequence[str], flag: str = "--config") -> tuple[list[str], list[str]]:
    """Separates ``--config.a.b=value`` / ``--config.a.b value`` flags from the rest of ``argv``;
    returns ``(["a.b=value", ...], rest)``."""
    overrides, rest = [], []
    prefix = flag + "."
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith(prefix):
            body = arg[len(prefix) :]
            if "=" not in body:
                if i + 1 >= len(args):
                    raise ConfigError(f"{arg}: missing value")
                body = f"{body}={args[i + 1]}"
                i += 1
            overrides.append(body)
        else:
            rest.append(arg)
        i += 1
    return overrides, rest


def load_config_file(spec: str | os.PathLike) -> ml_collections.ConfigDict:
    """Imports ``path/to/config.py`` (optionally ``path.py:arg``) and returns ``get_config(arg)``."""
    spec = os.fspath(spec)
    path, arg = spec, None
    head, sep, tail = spec.rpartition(":")
    if sep and head.endswith(".py"):
        path, arg = head, tail
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file {path} does not exist")
    module_spec = importlib.util.spec_from_file_location(f"_milegpo_config_{file.stem}", file)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    get_config = getattr(module, "get_config", None)
    if not callable(get_config):
        raise ConfigError(f"{path} defines no get_config()")
    result = get_config(arg) if arg is not None else get_config()
    if not isinstance(result, ml_collections.ConfigDict):
        raise ConfigError(f"{path}: get_config() returned {type(result).__name__}, not an ml_collections.ConfigDict")
    return result


__all__ = [
    "EVAL_SPLITS",
    "HASH_EXCLUDED",
    "ArchitectureConfig",
    "ConfigError",
    "CreditSection",
    "EnvSection",
    "LoggingSection",
    "MeshConfig",
    "ModelSection",
    "OptimSection",
    "PPOSection",
    "RunSection",
    "SFTSection",
    "SamplingSection",
    "TrainConfig",
    "apply_overrides",
    "config_hash",
    "config_identity",
    "describe_changes",
    "format_override",
    "load_config",
    "load_config_file",
    "split_config_flags",
    "to_dict",
]

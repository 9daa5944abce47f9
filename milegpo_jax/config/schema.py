"""``TrainConfig``: the sections together, and the checks that span sections.

Built from a ConfigDict or mapping by ``milegpo_jax.config.builder.load_config``; every field's
default is its section's (``sections.py``, ``credit.py``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from envs_bridge.specs import env_spec
from milegpo_jax.config.checks import ConfigError, values_of
from milegpo_jax.config.credit import CreditSection
from milegpo_jax.config.sections import (
    DistributedSection,
    EnvSection,
    LoggingSection,
    ModelSection,
    OptimSection,
    PPOSection,
    RunSection,
    SamplingSection,
    SFTSection,
)
from milegpo_jax.credit.config import ON_TREES, CreditConfig
from milegpo_jax.mesh_shape import MeshConfig
from milegpo_jax.models.runtime import RuntimeOptions
from milegpo_jax.sampling.config import SamplingConfig
from milegpo_jax.train.options import OptimizerConfig, PPOLossConfig


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
        _check_mesh(self.mesh)
        self.credit_config()  # the options under this env's recipe
        arch = self.model.architecture
        context = self.sampling.max_prompt_tokens + self.sampling.max_new_tokens
        if arch is not None and context > arch.max_position_embeddings:
            raise ConfigError(
                f"sampling.max_prompt_tokens + sampling.max_new_tokens = {context} exceeds "
                f"model.architecture.max_position_embeddings = {arch.max_position_embeddings}"
            )
        splits = tuple(self.env.eval_tasks_per_split)
        needs_eval = self.run.iterations > 0 or self.run.eval_before_training  # the last iteration always evaluates
        if needs_eval and self.run.best_metric:
            split = self.run.best_metric.split("/", 1)[0]
            if split in env_spec(self.env.name).eval_splits and split not in splits:
                raise ConfigError(
                    f"run.best_metric={self.run.best_metric!r} needs split {split!r} in env.eval_tasks_per_split "
                    f"(evaluated: {', '.join(splits) or 'none'})"
                )

    @property
    def credit_recipe(self) -> str:
        """``credit.recipe``, or the environment's (its spec's) when that is None."""
        return self.credit.recipe or env_spec(self.env.name).credit_recipe

    def credit_config(self) -> CreditConfig:
        return self.credit.build(self.credit_recipe)

    # The library's option objects (docs/training.md §1): the trainer builds them once and passes them
    # down; nothing below it reads the config.

    def runtime_options(self) -> RuntimeOptions:
        """How the models run: ``model``'s runtime fields and ``ppo.logits_chunk``."""
        return RuntimeOptions(**values_of(self.model, RuntimeOptions), logits_chunk=self.ppo.logits_chunk)

    def ppo_loss_config(self) -> PPOLossConfig:
        return PPOLossConfig(**values_of(self.ppo, PPOLossConfig))

    def optimizer_config(self) -> OptimizerConfig:
        return OptimizerConfig(**values_of(self.optim, OptimizerConfig))

    def sampling_config(self) -> SamplingConfig:
        """Training rollouts' sampling (evaluation changes the temperature); the KV cache holds a
        prompt of ``max_prompt_tokens`` and the answer."""
        sampling = self.sampling
        return SamplingConfig(**values_of(sampling, SamplingConfig),
                              max_cache_len=sampling.max_prompt_tokens + sampling.max_new_tokens)

    def check_runnable(self) -> None:
        """Start-of-training checks the config alone cannot make: the policy's source must be set
        and exist on this machine, and tree rollouts need an estimator defined on trees. Raises
        ConfigError with what to pass."""
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
        estimator = self.credit.estimator
        if self.env.branching.enabled and estimator not in ON_TREES:  # docs/credit-implementation.md §5
            raise ConfigError(
                f"env.branching.roots={self.env.branching.roots}: credit.estimator={estimator!r} is not defined on "
                f"tree groups (those that are: {', '.join(ON_TREES)}); set env.branching.roots=0"
            )


def _check_mesh(mesh: MeshConfig) -> None:
    sizes = dataclasses.asdict(mesh)
    if any(not isinstance(v, int) or v == 0 or v < -1 for v in sizes.values()) or list(sizes.values()).count(-1) > 1:
        raise ConfigError(f"mesh {sizes}: sizes must be positive, with at most one -1 (all remaining devices)")

"""Typed training configuration: frozen dataclasses built from an ``ml_collections.ConfigDict``.

Config files (``experiments/configs/*.py``) define ``get_config(arg=None)`` returning a ConfigDict
that holds only what differs from the schema's defaults; the command line changes it with
``--config.a.b=value`` overrides; ``load_config`` then turns it into a ``TrainConfig`` at the
boundary. Everything after that boundary sees checked, immutable values::

    raw = load_config_file("experiments/configs/alfworld.py")          # ConfigDict
    raw = apply_overrides(raw, ["model.hf_checkpoint=/ckpt/Qwen2.5-1.5B-Instruct", "run.seed=1"])
    config = load_config(raw)                                           # TrainConfig
    config.check_runnable()                                             # at training start
    config_hash(config)                                                 # resume guard

Why both: ConfigDict gives the ``get_config`` + ``--config.x=y`` workflow researchers know, but its
locking misses typos in config files, checks no ranges and lets code mutate the config mid-run. The
dataclasses catch every unknown key (with close-match suggestions), check types and ranges, and are
frozen. The schema is also what overrides are parsed against, so ``--config.run.seed=1`` becomes an
int and ``--config.credit.stage=None`` clears an optional field.

Modules (docs/training.md §1): ``sections.py``/``credit.py``/``schema.py`` the schema (every default,
once); ``builder.py`` mapping -> dataclasses; ``text.py`` the one text parser (also the credit CLIs'
``--set``); ``overrides.py`` ``--config`` flags; ``identity.py`` hash and changes; ``files.py``
config and sweep files. Nothing here imports ``train/``, ``rollout/`` or an environment's adapter,
nor jax or flax: the model is read through its jax-free modules (``models.model_config``,
``models.runtime``) and the mesh through ``mesh_shape`` (docs/architecture.md §3).
"""

from milegpo_jax.changes import describe_changes
from milegpo_jax.config.builder import load_config
from milegpo_jax.config.checks import ConfigError
from milegpo_jax.config.credit import CreditOptionError, CreditSection, parse_credit_options
from milegpo_jax.config.files import empty_config, load_config_file, load_file_function
from milegpo_jax.config.identity import (
    HASH_EXCLUDED,
    config_hash,
    config_identity,
    to_dict,
    warm_start_inputs,
)
from milegpo_jax.config.overrides import apply_overrides, format_override, split_config_flags
from milegpo_jax.config.schema import TrainConfig
from milegpo_jax.config.sections import (
    BranchingSection,
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
from milegpo_jax.mesh_shape import MeshConfig

__all__ = [
    "HASH_EXCLUDED",
    "BranchingSection",
    "ConfigError",
    "CreditOptionError",
    "CreditSection",
    "DistributedSection",
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
    "empty_config",
    "format_override",
    "load_config",
    "load_config_file",
    "load_file_function",
    "parse_credit_options",
    "split_config_flags",
    "to_dict",
    "warm_start_inputs",
]

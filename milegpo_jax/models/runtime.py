"""How a model runs, as opposed to what it is: dtypes, rematerialisation, layer scanning, attention
blocks and form, LM-head chunking.

A checkpoint's ``config.json`` fixes the architecture (``ModelConfig``); these options are chosen per
run (the training config's ``model`` and ``ppo`` sections are derived from its fields, and the trainer
builds it with ``TrainConfig.runtime_options``) and must reach every model the trainer
builds: the policy, the frozen reference, the warm start, the host-local sampling copy, and the
program ``experiments.aot`` compiles. ``RuntimeOptions`` is that one object: the only runtime
argument of ``load_pretrained``, ``init_model`` and ``abstract_model``, and ``model.runtime`` of every
model (docs/models.md §1, docs/training.md §4). jax-free, like ``model_config``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from milegpo_jax.models.model_config import ATTENTION_IMPLS, DTYPES, REMAT_POLICIES, ModelConfig, ModelConfigError


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
    param_dtype: str = "float32"  # stored weights
    compute_dtype: str = "float32"  # activations
    remat: str = "none"  # per decoder layer: "none", "full" or "dots"
    scan_layers: bool = False  # one scanned layer body instead of an unrolled stack
    # cache-free forwards (training, reference log-probs) of a whole number of at least two blocks of
    # this many positions attend block-causally: about half the attention work of the dense mask, the
    # same log-probs up to float rounding (0: always dense; models/attention.py, docs/models.md §7)
    attention_block: int = 128
    logits_chunk: int = 0  # LM-head positions per chunk in the losses and reference pass (0: all at once)
    attention_impl: str = "auto"  # cache-free forwards: auto | xla | blocks | splash | gpu_flash (models/attention.py)

    def __post_init__(self):
        for name in ("param_dtype", "compute_dtype"):
            if getattr(self, name) not in DTYPES:
                raise ModelConfigError(f"{name}={getattr(self, name)!r}: choose one of {', '.join(DTYPES)}")
        if self.attention_impl not in ATTENTION_IMPLS:
            raise ModelConfigError(f"attention_impl={self.attention_impl!r}: choose one of {', '.join(ATTENTION_IMPLS)}")
        if self.remat not in REMAT_POLICIES:
            raise ModelConfigError(f"remat={self.remat!r}: choose one of {', '.join(REMAT_POLICIES)}")
        for name in ("attention_block", "logits_chunk"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ModelConfigError(f"{name}={value!r}: must be an int >= 0")

    @property
    def chunk_size(self) -> int | None:
        """``logits_chunk`` as the model functions take it (None: no chunking)."""
        return self.logits_chunk or None

    def replace(self, **changes) -> RuntimeOptions:
        return dataclasses.replace(self, **changes)

    def apply(self, config: ModelConfig) -> ModelSpec:
        """``config`` together with these options: what ``abstract_model`` / ``init_model`` build."""
        if isinstance(config, ModelSpec):  # re-applying replaces the options
            config = config.config
        return ModelSpec(config, self)


# the runtime fields a ModelSpec reads through to (``ModelSpec.__getattr__``)
_RUNTIME_FIELDS = frozenset(field.name for field in dataclasses.fields(RuntimeOptions))
_ARCHITECTURE_FIELDS = frozenset(field.name for field in dataclasses.fields(ModelConfig))


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """An architecture and the options it runs with (``RuntimeOptions.apply``): everything that
    decides a model's program. Reads the fields of either through (``spec.num_layers``,
    ``spec.remat``), so code that describes a compiled model needs one object."""

    config: ModelConfig
    runtime: RuntimeOptions

    def __getattr__(self, name: str) -> Any:
        if name in _ARCHITECTURE_FIELDS:
            return getattr(self.config, name)
        if name in _RUNTIME_FIELDS:
            return getattr(self.runtime, name)
        raise AttributeError(f"ModelSpec has no field {name!r}")


__all__ = ["ModelSpec", "RuntimeOptions"]

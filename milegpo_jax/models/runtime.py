"""How a model runs, as opposed to what it is: dtypes, rematerialisation, layer scanning, attention
blocks, LM-head chunking.

A checkpoint's ``config.json`` fixes the architecture; these options are chosen per run (the
``model`` and ``ppo`` sections of a training config) and must reach every model the trainer builds:
the policy, the frozen reference, the warm start, the host-local sampling copy, and the program
``experiments/aot.py`` compiles. ``RuntimeOptions`` is that one object (see docs/training.md §4).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from milegpo_jax.models.attention import ATTENTION_IMPLS
from milegpo_jax.models.qwen2 import DTYPES, REMAT_POLICIES, ModelConfig, ModelConfigError


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
    param_dtype: str = "float32"  # stored weights
    compute_dtype: str = "float32"  # activations
    remat: str = "none"  # per decoder layer: "none", "full" or "dots"
    scan_layers: bool = False  # one scanned layer body instead of an unrolled stack
    attention_block: int = 0  # block-causal attention in cache-free forwards (0: dense; models/attention.py)
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

    @classmethod
    def from_config(cls, config: Any) -> RuntimeOptions:
        """From a ``TrainConfig``: ``model.{param_dtype, compute_dtype, remat, scan_layers,
        attention_block, attention_impl}`` and ``ppo.logits_chunk``."""
        model = config.model
        return cls(param_dtype=model.param_dtype, compute_dtype=model.compute_dtype, remat=model.remat,
                   scan_layers=bool(model.scan_layers), attention_block=int(model.attention_block),
                   attention_impl=model.attention_impl, logits_chunk=int(config.ppo.logits_chunk))

    @property
    def chunk_size(self) -> int | None:
        """``logits_chunk`` as the model functions take it (None: no chunking)."""
        return self.logits_chunk or None

    def apply(self, config: ModelConfig) -> ModelConfig:
        """``config`` with these options in place of its own runtime fields."""
        return config.replace(param_dtype=self.param_dtype, dtype=self.compute_dtype, remat=self.remat,
                              scan_layers=self.scan_layers, attention_block=self.attention_block,
                              attention_impl=self.attention_impl)

    def load_kwargs(self) -> dict[str, Any]:
        """The keywords ``load_pretrained`` has always taken for these options."""
        return {"dtype": self.param_dtype, "compute_dtype": self.compute_dtype, "scan_layers": self.scan_layers,
                "remat": self.remat, "attention_block": self.attention_block, "attention_impl": self.attention_impl}


__all__ = ["RuntimeOptions"]

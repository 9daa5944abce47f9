"""What a model is, without jax: ``ModelConfig`` (the architecture a checkpoint's ``config.json``
describes), the public shapes (``PRESETS``) and the names the runtime options choose from (dtypes,
remat policies, attention forms).

Apart from the Flax model (``decoder.py``) so that the training config (``milegpo_jax.config``) can check
a model section without importing jax (docs/models.md §1).
"""

from __future__ import annotations

import dataclasses
import typing

from milegpo_jax.models.families import FAMILIES, family

DTYPES = ("float32", "bfloat16", "float16")
# per decoder layer: "none", "full" (keep only the layer's inputs), "dots" (keep matmul outputs),
# "offload" (keep only the layer's inputs, in host memory)
REMAT_POLICIES = ("none", "full", "dots", "offload")
# the forms of cache-free forwards (models/attention.py; its KERNEL_PLATFORMS names the kernels:
# tests/models/test_attention_kernels.py keeps the two in step)
ATTENTION_IMPLS = ("auto", "xla", "blocks", "splash", "gpu_flash")


class ModelConfigError(ValueError):
    """An invalid model configuration or runtime option."""


@dataclasses.dataclass(frozen=True)
class Llama3RopeScaling:
    """``rope_scaling`` of type ``llama3``: long wavelengths slowed by ``factor``, short ones kept,
    a smooth blend in between (as transformers' ``_compute_llama3_parameters``)."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int

    def __post_init__(self):
        if not (self.factor > 0 and 0 < self.low_freq_factor < self.high_freq_factor):
            raise ModelConfigError(
                f"llama3 rope_scaling needs factor > 0 and 0 < low_freq_factor < high_freq_factor, got {self}"
            )
        if self.original_max_position_embeddings <= 0:
            raise ModelConfigError(f"llama3 rope_scaling: original_max_position_embeddings must be positive, got {self}")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The architecture: the fields of a Hugging Face ``config.json``. How the model runs (dtypes,
    remat, scanned layers, attention form) is ``RuntimeOptions``, chosen per run."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int = 0  # 0: hidden_size // num_heads (as transformers when config.json has none)
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 32768
    initializer_range: float = 0.02
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None
    pad_token_id: int | None = None
    model_type: str = "qwen2"  # the family (families.FAMILIES): what config.json names on save
    attention_bias: bool = True  # q/k/v projection biases (Qwen2 always; a switch in Llama and Qwen3)
    rope_scaling: Llama3RopeScaling | None = None

    def __post_init__(self):
        sizes = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads")
        for name in sizes:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ModelConfigError(f"{name} must be a positive int, got {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise ModelConfigError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
        if not self.head_dim:
            if self.hidden_size % self.num_heads:
                raise ModelConfigError(
                    f"hidden_size ({self.hidden_size}) is not divisible by num_heads ({self.num_heads}); "
                    "give head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.head_dim % 2:
            raise ModelConfigError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        if not (self.rope_theta > 0 and self.rms_norm_eps > 0):
            raise ModelConfigError("rope_theta and rms_norm_eps must be positive")
        if self.model_type not in FAMILIES:
            raise ModelConfigError(f"model_type must be one of {tuple(FAMILIES)}, got {self.model_type!r}")
        if isinstance(self.rope_scaling, dict):  # e.g. from dataclasses.asdict / a config file
            object.__setattr__(self, "rope_scaling", Llama3RopeScaling(**self.rope_scaling))
        if isinstance(self.eos_token_id, list):
            object.__setattr__(self, "eos_token_id", tuple(self.eos_token_id))  # stay hashable

    @property
    def qk_norm(self) -> bool:
        """Per-head RMSNorm of q and k before RoPE: the family's (Qwen3)."""
        return family(self.model_type).qk_norm

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)


# A small shape written inline (tests, the CPU demo; the config's model.architecture): these fields of
# ModelConfig, with these defaults; vocab_size 0 stands for the tokenizer's size, given when built.
SMALL_SHAPE = {
    "vocab_size": 0, "hidden_size": 64, "intermediate_size": 256, "num_layers": 2, "num_heads": 4,
    "num_kv_heads": 2, "head_dim": 0, "tie_word_embeddings": True, "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
}


def _check_architecture(self) -> None:
    if self.vocab_size < 0:
        raise ModelConfigError(f"vocab_size={self.vocab_size}: must be >= 0")
    self.model_config(vocab_size=self.vocab_size or 1)  # ModelConfig's checks


def _architecture_model_config(self, vocab_size: int | None = None, **token_ids) -> ModelConfig:
    """The ``ModelConfig``. ``vocab_size`` (the tokenizer's size) is needed when the field is 0;
    ``token_ids`` sets bos/eos/pad_token_id."""
    fields = dataclasses.asdict(self)
    fields["vocab_size"] = vocab_size if vocab_size is not None else self.vocab_size
    if fields["vocab_size"] < 1:
        raise ModelConfigError("vocab_size is 0 (the tokenizer's size): pass vocab_size=len(tokenizer)")
    return ModelConfig(**fields, **token_ids)


_HINTS = typing.get_type_hints(ModelConfig)
ArchitectureConfig = dataclasses.make_dataclass(
    "ArchitectureConfig",
    [(name, _HINTS[name], dataclasses.field(default=default)) for name, default in SMALL_SHAPE.items()],
    frozen=True,
    namespace={"__post_init__": _check_architecture, "model_config": _architecture_model_config,
               "__doc__": "A ModelConfig written inline with random weights: SMALL_SHAPE's fields and defaults."},
)
ArchitectureConfig.__module__ = __name__


# Public Qwen2.5 shapes (the hub config.json files; tunix/transformers agree).
PRESETS: dict[str, ModelConfig] = {
    "qwen2.5-0.5b": ModelConfig(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_layers=24, num_heads=14,
        num_kv_heads=2, tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151643,
    ),
    "qwen2.5-1.5b": ModelConfig(
        vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_layers=28, num_heads=12,
        num_kv_heads=2, tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151643,
    ),
    "qwen2.5-3b": ModelConfig(
        vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_layers=36, num_heads=16,
        num_kv_heads=2, tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151643,
    ),
    "qwen2.5-7b": ModelConfig(
        vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_layers=28, num_heads=28,
        num_kv_heads=4, tie_word_embeddings=False, bos_token_id=151643, eos_token_id=151643,
    ),
}


def preset(name: str, **overrides) -> ModelConfig:
    """A named public shape, e.g. ``preset("qwen2.5-1.5b", num_layers=2)`` (overrides change the architecture)."""
    if name not in PRESETS:
        raise ModelConfigError(f"unknown preset {name!r}; available: {sorted(PRESETS)}")
    return PRESETS[name].replace(**overrides)

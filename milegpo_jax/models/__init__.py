"""The policy model: Qwen2/Qwen2.5, Llama and Qwen3 checkpoints in one Flax NNX decoder, Hugging
Face checkpoint I/O, GGUF import, tokenizers (docs/models.md).

Model API (docs/architecture.md §5)::

    from milegpo_jax.models import load_pretrained, save_pretrained
    model, config = load_pretrained(path, mesh=None, dtype="float32")
    logits = model(input_ids)              # int32 [B, T] -> float [B, T, vocab]
    save_pretrained(model, config, path)

KV cache and masks: see ``milegpo_jax.models.qwen2``; chunked log-probabilities: ``milegpo_jax.models.logprobs``.
"""

from milegpo_jax.models.hf_io import (
    CheckpointError,
    UnsupportedConfigError,
    config_from_hf,
    config_to_hf,
    load_pretrained,
    save_pretrained,
)
from milegpo_jax.models.logprobs import token_logprobs
from milegpo_jax.models.qwen2 import (
    PRESETS,
    MODEL_TYPES,
    KVCache,
    Llama3RopeScaling,
    ModelConfig,
    ModelConfigError,
    Qwen2,
    abstract_model,
    init_model,
    num_params,
    preset,
)
from milegpo_jax.models.tokenizer import build_qwen25_tokenizer, load_tokenizer

__all__ = [
    "PRESETS",
    "CheckpointError",
    "KVCache",
    "Llama3RopeScaling",
    "MODEL_TYPES",
    "ModelConfig",
    "ModelConfigError",
    "Qwen2",
    "UnsupportedConfigError",
    "abstract_model",
    "build_qwen25_tokenizer",
    "config_from_hf",
    "config_to_hf",
    "init_model",
    "load_pretrained",
    "load_tokenizer",
    "num_params",
    "preset",
    "save_pretrained",
    "token_logprobs",
]

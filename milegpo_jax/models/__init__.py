"""The policy model: Qwen2/Qwen2.5, Llama and Qwen3 checkpoints in one Flax NNX decoder, Hugging
Face checkpoint I/O, GGUF import, tokenizers (docs/models.md).

Model API (docs/architecture.md §5)::

    from milegpo_jax.models import RuntimeOptions, load_pretrained, save_pretrained
    model, config = load_pretrained(path, mesh=None, runtime=RuntimeOptions(compute_dtype="bfloat16"))
    logits = model(input_ids)              # int32 [B, T] -> float [B, T, vocab]
    save_pretrained(model, config, path)

``ModelConfig`` is the architecture, ``RuntimeOptions`` how it runs (``model.config``,
``model.runtime``). KV cache and masks: see ``milegpo_jax.models.decoder``; chunked
log-probabilities: ``milegpo_jax.models.logprobs``.

The names below load on first use (PEP 562), so that ``milegpo_jax.models.model_config`` and
``milegpo_jax.models.runtime`` (and ``families``) import without jax: the training config checks its model section with
them (docs/architecture.md §3).
"""

from milegpo_jax.lazy import lazy_names

# public name -> the module that defines it
_HOMES = {
    "CheckpointError": "hf_format",
    "UnsupportedConfigError": "hf_format",
    "config_from_hf": "hf_format",
    "config_to_hf": "hf_format",
    "load_pretrained": "hf_io",
    "save_pretrained": "hf_io",
    "token_logprobs": "logprobs",
    "FAMILIES": "families",
    "FamilySpec": "families",
    "PRESETS": "model_config",
    "Llama3RopeScaling": "model_config",
    "ModelConfig": "model_config",
    "ModelConfigError": "model_config",
    "preset": "model_config",
    "Decoder": "decoder",
    "KVCache": "decoder",
    "abstract_model": "decoder",
    "init_model": "decoder",
    "num_params": "decoder",
    "ModelSpec": "runtime",
    "RuntimeOptions": "runtime",
    "build_qwen25_tokenizer": "tokenizer",
    "load_tokenizer": "tokenizer",
}

__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names(__name__, _HOMES)

"""Rollout generation with the JAX policy: batched prefill + KV-cache decode in one jitted loop.

Token level: ``generate(model, prompt_ids, SamplingConfig(...), key=...) -> GenerationBatch``
(``milegpo_jax.sampling.sampler``). Text level: ``generate_text(model, tokenizer, prompts, config,
key=..., stop_strings=(...)) -> list[TextCompletion]`` (``milegpo_jax.sampling.text``).
"""

from milegpo_jax.lazy import lazy_names

# public name -> the module that defines it; loaded on first use (PEP 562), so that
# ``milegpo_jax.sampling.config`` imports without jax: the training config's sampling section is
# derived from ``SamplingConfig`` (docs/architecture.md §3)
_HOMES = {
    "GeneratedSequence": "sampler", "GenerationBatch": "sampler", "generate": "sampler",
    "SamplingConfig": "config", "SamplingError": "config",
    "TextCompletion": "text", "generate_text": "text", "render_prompt": "text", "stop_token_sequences": "text",
    "tokens_through_first_stop": "text",
}

__all__ = sorted(_HOMES)
__getattr__, __dir__ = lazy_names(__name__, _HOMES)

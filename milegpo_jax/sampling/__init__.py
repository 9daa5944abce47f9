"""Rollout generation with the JAX policy: batched prefill + KV-cache decode in one jitted loop.

Token level: ``generate(model, prompt_ids, SamplingConfig(...), key=...) -> GenerationBatch``
(``milegpo_jax.sampling.sampler``). Text level: ``generate_text(model, tokenizer, prompts, config,
key=..., stop_strings=(...)) -> list[TextCompletion]`` (``milegpo_jax.sampling.text``).
"""

from milegpo_jax.sampling.config import SamplingConfig, SamplingError
from milegpo_jax.sampling.sampler import GeneratedSequence, GenerationBatch, generate
from milegpo_jax.sampling.text import (
    TextCompletion,
    generate_text,
    render_prompt,
    stop_token_sequences,
    tokens_through_first_stop,
)

__all__ = [
    "GeneratedSequence",
    "GenerationBatch",
    "SamplingConfig",
    "SamplingError",
    "TextCompletion",
    "generate",
    "generate_text",
    "render_prompt",
    "stop_token_sequences",
    "tokens_through_first_stop",
]

"""The policy the collector talks to: chat-templated prompts -> the JAX sampler -> token ids, behaviour
log-probs and text."""

from __future__ import annotations

from collections.abc import Sequence

from milegpo_jax.models.qwen2 import Qwen2
from milegpo_jax.rollout.collector import PolicyResponse
from milegpo_jax.sampling import SamplingConfig, generate_text

STOP_STRINGS = ("</action>",)  # nothing after the action matters to the environment


class SamplerPolicy:
    """Wraps ``generate_text`` for the collector; prompts are single user messages (docs/environments.md §6.1)."""

    def __init__(self, model: Qwen2, tokenizer, *, max_new_tokens: int, top_p: float = 1.0, top_k: int = 0,
                 max_cache_len: int | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.top_p = top_p
        self.top_k = top_k
        self.max_cache_len = max_cache_len

    def generate(self, prompts: Sequence[str], *, temperature: float, seed: int) -> list[PolicyResponse]:
        config = SamplingConfig(
            max_new_tokens=self.max_new_tokens, temperature=temperature, top_p=self.top_p, top_k=self.top_k,
            max_cache_len=self.max_cache_len,
        )
        messages = [[{"role": "user", "content": prompt}] for prompt in prompts]
        completions = generate_text(self.model, self.tokenizer, messages, config, key=seed, stop_strings=STOP_STRINGS)
        return [
            PolicyResponse(
                prompt_ids=tuple(int(i) for i in completion.prompt_ids),
                response_ids=tuple(int(i) for i in completion.token_ids),
                logprobs=tuple(float(x) for x in completion.policy_logprobs),
                text=completion.text,
            )
            for completion in completions
        ]

"""The policy the collector talks to: chat-templated prompts -> the JAX sampler -> token ids, behaviour
log-probs and text."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from milegpo_jax.models.decoder import Decoder
from milegpo_jax.rollout.collector import PolicyResponse
from milegpo_jax.sampling import SamplingConfig, generate_text

STOP_STRINGS = ("</action>",)  # nothing after the action matters to the environment


@dataclasses.dataclass
class SamplerUsage:
    """What the sampler spent since the last ``reset`` (the trainer logs it per iteration as time/*)."""

    calls: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    prompt_tokens: int = 0  # real prompt tokens of every row
    prefill_positions: int = 0  # positions the prefill ran (padding included, shared prefixes once)
    generated_tokens: int = 0

    def add(self, generation, completions) -> None:
        self.calls += 1
        self.prefill_s += generation.prefill_s
        self.decode_s += generation.decode_s
        self.prefill_positions += generation.prefill_positions
        self.prompt_tokens += sum(len(c.prompt_ids) for c in completions)
        self.generated_tokens += int(np.sum(generation.lengths))

    def reset(self) -> SamplerUsage:
        """The usage so far, and start counting anew."""
        usage = dataclasses.replace(self)
        for field in dataclasses.fields(self):
            setattr(self, field.name, field.default)
        return usage


class SamplerPolicy:
    """Wraps ``generate_text`` for the collector; prompts are single user messages (docs/environments.md §6.1)."""

    def __init__(self, model: Decoder, tokenizer, sampling: SamplingConfig):
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling  # every call's, but the temperature (training or evaluation)
        self.usage = SamplerUsage()

    def generate(self, prompts: Sequence[str], *, temperature: float, seed: int) -> list[PolicyResponse]:
        config = self.sampling.replace(temperature=temperature)
        messages = [[{"role": "user", "content": prompt}] for prompt in prompts]
        completions, generation = generate_text(self.model, self.tokenizer, messages, config, key=seed,
                                                stop_strings=STOP_STRINGS, with_generation=True)
        self.usage.add(generation, completions)
        return [
            PolicyResponse(
                prompt_ids=tuple(int(i) for i in completion.prompt_ids),
                response_ids=tuple(int(i) for i in completion.token_ids),
                logprobs=tuple(float(x) for x in completion.policy_logprobs),
                text=completion.text,
            )
            for completion in completions
        ]

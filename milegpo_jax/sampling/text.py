"""Text in, text out: chat messages or templated strings -> token ids -> ``generate`` -> decoded text.

Prompts are either a list of chat messages (``[{"role": "user", "content": ...}]``), rendered with the
tokenizer's chat template plus the assistant header, or a string that is already the full prompt
text (a collector that builds its own template passes those); a batch may mix both.

Stop strings are matched twice:

1. in the decode loop, as token-id sequences: each stop string tokenized alone, after a space and
   followed by a newline (``"</action>"`` is ``</ action >`` but ``" </ action >"`` after a space and
   ``</ action >\\n`` before a newline, in Qwen's BPE);
2. on the decoded text afterwards, which catches any other tokenization (``".</"`` fused with the
   punctuation before it, say): a row whose text contains a stop string is cut after the token that
   completes its first occurrence, and its finish reason becomes ``"stop"``.

So the text of a row that stopped always contains the stop string, and nothing is kept after the token
that completed it (the text may run past the stop string inside that token, e.g. ``">\\n"``). Ids and
log-probabilities are cut with it. The text is ``tokenizer.decode(ids, skip_special_tokens=True)`` of
the kept ids, less the final EOS token of a row that ended on one (an EOS need not be special).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np

from milegpo_jax.models.decoder import Decoder
from milegpo_jax.sampling.config import SamplingConfig, SamplingError
from milegpo_jax.sampling.sampler import GenerationBatch, generate

Messages = Sequence[Mapping[str, str]]

# Contexts a stop string is tokenized in for the in-loop match (before it, after it).
_STOP_CONTEXTS = (("", ""), (" ", ""), ("", "\n"))


@dataclasses.dataclass(frozen=True)
class TextCompletion:
    """One prompt's continuation: the tokens the RL update needs and the text the environment gets."""

    prompt_text: str
    prompt_ids: np.ndarray  # [P] int32
    token_ids: np.ndarray  # [n] int32, generated
    policy_logprobs: np.ndarray  # [n] float32, temperature 1
    sampling_logprobs: np.ndarray  # [n] float32, under the sampling distribution
    finish_reason: str  # "eos", "stop" or "length"
    text: str  # decoded token_ids without the EOS that ended the row; special tokens skipped


def _encode(tokenizer, text: str) -> list[int]:
    # The template already holds every special token; nothing may be added around it.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def render_prompt(tokenizer, prompt: str | Messages) -> str:
    """A templated prompt string as is; chat messages through the chat template + assistant header."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, Sequence) or not all(isinstance(m, Mapping) for m in prompt):
        raise SamplingError(f"a prompt must be a string or a list of chat messages (dicts), got {prompt!r:.80}")
    if not prompt:
        raise SamplingError("a prompt is an empty list of chat messages")
    return tokenizer.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)


def stop_token_sequences(tokenizer, stop_strings: Sequence[str]) -> tuple[tuple[int, ...], ...]:
    """The token-id sequences the decode loop stops on: each stop string in the usual contexts."""
    sequences = []
    for stop in stop_strings:
        if not isinstance(stop, str) or not stop:
            raise SamplingError(f"stop strings must be non-empty strings, got {stop!r}")
        for before, after in _STOP_CONTEXTS:
            sequences.append(tuple(_encode(tokenizer, before + stop + after)))
    return tuple(dict.fromkeys(sequences))


def tokens_through_first_stop(
    token_ids: Sequence[int], stop_strings: Sequence[str], decode: Callable[[Sequence[int]], str]
) -> int | None:
    """How many tokens to keep so the text ends with the token completing the first stop string;
    ``None`` when the decoded text holds none. ``decode`` maps ids to text."""
    if not stop_strings or not any(s in decode(token_ids) for s in stop_strings):
        return None
    # "some prefix's text holds a stop string" is monotone in the prefix length: binary search.
    low, high = 1, len(token_ids)
    while low < high:
        middle = (low + high) // 2
        if any(s in decode(token_ids[:middle]) for s in stop_strings):
            high = middle
        else:
            low = middle + 1
    return low


def _default_eos_ids(tokenizer, model: Decoder) -> tuple[int, ...]:
    """The tokenizer's EOS (``<|im_end|>`` for the Qwen2.5 chat template) and the model config's."""
    ids = [tokenizer.eos_token_id]
    model_eos = model.config.eos_token_id
    ids.extend(model_eos if isinstance(model_eos, tuple) else [model_eos])
    return tuple(dict.fromkeys(i for i in ids if i is not None))


def generate_text(
    model: Decoder,
    tokenizer,
    prompts: Sequence[str | Messages],
    config: SamplingConfig,
    *,
    key: jax.Array | int | None = None,
    stop_strings: Sequence[str] = (),
    max_new_tokens: Sequence[int] | None = None,
    with_generation: bool = False,
) -> list[TextCompletion] | tuple[list[TextCompletion], GenerationBatch]:
    """Complete each prompt (chat messages or a templated string) and decode; see the module docstring.

    ``with_generation``: also return ``generate``'s ``GenerationBatch`` (its prefill/decode figures).

    ``config.eos_ids`` empty means: stop on the tokenizer's and the model config's EOS ids. Stop strings
    are added to ``config.stop_sequences`` as token sequences and checked on the text afterwards.
    ``key`` and ``max_new_tokens`` are passed to ``generate``.
    """
    if isinstance(prompts, str) or not isinstance(prompts, Sequence):
        raise SamplingError("prompts must be a list of prompts (strings or chat-message lists)")
    if isinstance(stop_strings, str):
        raise SamplingError(f"stop_strings must be a list of strings, got the string {stop_strings!r}")
    prompt_texts = [render_prompt(tokenizer, prompt) for prompt in prompts]
    prompt_ids = [_encode(tokenizer, text) for text in prompt_texts]
    config = config.replace(
        eos_ids=config.eos_ids or _default_eos_ids(tokenizer, model),
        stop_sequences=config.stop_sequences + stop_token_sequences(tokenizer, stop_strings),
    )
    generation = generate(model, prompt_ids, config, key=key, max_new_tokens=max_new_tokens)

    def decode(ids) -> str:
        return tokenizer.decode(list(ids), skip_special_tokens=True)

    completions = []
    for text, ids, row in zip(prompt_texts, prompt_ids, generation.rows(), strict=True):
        keep = tokens_through_first_stop(row.token_ids, stop_strings, decode)
        finish_reason = row.finish_reason if keep is None else "stop"
        keep = len(row.token_ids) if keep is None else keep
        completions.append(
            TextCompletion(
                prompt_text=text,
                prompt_ids=np.asarray(ids, np.int32),
                token_ids=row.token_ids[:keep],
                policy_logprobs=row.policy_logprobs[:keep],
                sampling_logprobs=row.sampling_logprobs[:keep],
                finish_reason=finish_reason,
                text=decode(row.token_ids[: keep - 1] if finish_reason == "eos" else row.token_ids[:keep]),
            )
        )
    return (completions, generation) if with_generation else completions

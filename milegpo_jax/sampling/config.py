"""The sampling configuration: how many tokens, how to choose them, when to stop.

Everything here is checked when the config is made, so a bad value fails before anything compiles.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterable


class SamplingError(ValueError):
    """A bad sampling request (config, prompts, per-row limits); raised before anything compiles."""


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _token_tuple(ids: Iterable[int], what: str) -> tuple[int, ...]:
    ids = tuple(ids)
    for token in ids:
        if not _is_int(token):
            raise SamplingError(f"{what} must hold int token ids, got {token!r}")
        if token < 0:
            raise SamplingError(f"{what} must hold non-negative token ids, got {int(token)}")
    return tuple(int(token) for token in ids)


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """How to sample continuations.

    * ``max_new_tokens``: the budget, new tokens per row at most (``generate`` can lower it per row).
    * ``temperature``: 0 is greedy (argmax); otherwise logits are divided by it before truncation.
    * ``top_k``: keep the ``k`` most likely tokens (0: off). Tokens tied with the k-th are kept too.
    * ``top_p``: nucleus; keep token ``i`` when the probability of the tokens strictly more likely
      than ``i`` is below ``top_p`` (1: off). Applied after temperature and top-k, as transformers.
    * ``eos_ids``: tokens that end a row (finish reason ``"eos"``); the EOS token is part of the output.
    * ``stop_sequences``: token-id sequences that end a row when its newest generated tokens equal
      one of them (finish reason ``"stop"``); the sequence is part of the output. Matched in token
      space only, inside the decode loop, and never across the prompt/continuation boundary. A stop
      *string* can be tokenized differently in context: ``generate_text`` registers the usual variants
      and checks the decoded text afterwards.
    * ``max_cache_len``: most KV-cache slots a call may use (prompt bucket + budget); ``None``: the
      model's ``max_position_embeddings``. A prompt that cannot fit with the budget is refused.
    * ``prefill_chunk_tokens``: the prompt is prefilled in chunks of about this many tokens over the
      whole batch (a chunk's attention scores are ``[batch, heads, chunk, cache]``, which bounds
      memory; on CPU small chunks are also faster). A speed/memory knob: results do not depend on it.
    * ``prefix_sharing``: prefill the batch's common prefix and each repeated prompt once
      (``milegpo_jax.sampling.prefix``); the same tokens and log-probabilities up to float rounding.

    Temperature and top-p are runtime values (changing them does not recompile); greedy vs sampling,
    top-k and whether top-p is on are compile-time switches.
    """

    max_new_tokens: int
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    eos_ids: tuple[int, ...] = ()
    stop_sequences: tuple[tuple[int, ...], ...] = ()
    max_cache_len: int | None = None
    prefill_chunk_tokens: int = 2048
    prefix_sharing: bool = False

    def __post_init__(self):
        if not _is_int(self.max_new_tokens) or self.max_new_tokens <= 0:
            raise SamplingError(f"max_new_tokens must be a positive int, got {self.max_new_tokens!r}")
        temperature = float(self.temperature)
        if not math.isfinite(temperature) or temperature < 0:
            raise SamplingError(f"temperature must be >= 0 (0 = greedy), got {self.temperature!r}")
        if not _is_int(self.top_k) or self.top_k < 0:
            raise SamplingError(f"top_k must be an int >= 0 (0 = off), got {self.top_k!r}")
        top_p = float(self.top_p)
        if not 0.0 < top_p <= 1.0:  # also refuses NaN
            raise SamplingError(f"top_p must be in (0, 1] (1 = off), got {self.top_p!r}")
        if self.max_cache_len is not None and (not _is_int(self.max_cache_len) or self.max_cache_len <= 0):
            raise SamplingError(f"max_cache_len must be a positive int or None, got {self.max_cache_len!r}")
        if not _is_int(self.prefill_chunk_tokens) or self.prefill_chunk_tokens <= 0:
            raise SamplingError(f"prefill_chunk_tokens must be a positive int, got {self.prefill_chunk_tokens!r}")
        if not isinstance(self.prefix_sharing, bool):
            raise SamplingError(f"prefix_sharing must be a bool, got {self.prefix_sharing!r}")
        if isinstance(self.eos_ids, int):
            raise SamplingError(f"eos_ids must be a sequence of token ids, got the int {self.eos_ids}")
        stops = tuple(_token_tuple(seq, "a stop sequence") for seq in self.stop_sequences)
        if any(len(seq) == 0 for seq in stops):
            raise SamplingError("stop sequences must not be empty")
        # Normalised to plain Python values and hashable tuples, duplicates dropped (order kept).
        object.__setattr__(self, "max_new_tokens", int(self.max_new_tokens))
        object.__setattr__(self, "top_k", int(self.top_k))
        object.__setattr__(self, "prefill_chunk_tokens", int(self.prefill_chunk_tokens))
        if self.max_cache_len is not None:
            object.__setattr__(self, "max_cache_len", int(self.max_cache_len))
        object.__setattr__(self, "temperature", temperature)
        object.__setattr__(self, "top_p", top_p)
        object.__setattr__(self, "eos_ids", tuple(dict.fromkeys(_token_tuple(self.eos_ids, "eos_ids"))))
        object.__setattr__(self, "stop_sequences", tuple(dict.fromkeys(stops)))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def replace(self, **changes) -> SamplingConfig:
        return dataclasses.replace(self, **changes)

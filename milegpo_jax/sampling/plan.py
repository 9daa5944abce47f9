"""Shape planning for ``generate``: the padded batch, prompt bucket, prefill chunk and compile-time
switches of a call, decided on the host before anything is compiled.

``plan_generation`` is the one planner: ``generate`` calls it for every batch, and
``experiments.aot`` calls it with the config's largest batch and prompt to compile the very
programs the trainer will run (docs/training.md §8).
"""

from __future__ import annotations

import dataclasses

from milegpo_jax.sampling.config import SamplingConfig
from milegpo_jax.shapes import bucket_size

MIN_PROMPT_BUCKET = 16  # short prompts share one compiled shape
BUCKETS_PER_OCTAVE = 8  # prompt lengths between two powers of two fall into 8 steps


def length_bucket(n: int, block: int = MIN_PROMPT_BUCKET) -> int:
    """A prompt length padded up to the next of 8 evenly spaced steps between two powers of two, each
    step whole ``block``s (a fused prefill kernel's block where one serves the model): with blocks of
    16, 531 -> 576, 630 -> 640, 300 -> 320; with 128, 300 -> 384, 531 -> 640. Lengths up to one block
    take powers of two. Power-of-two buckets padded prompts by up to 2x, and prefill time follows the
    padded positions (docs/results/real-llm.md, "Decode profile"); this pads by at most an eighth (or
    a block), for 8 compiled shapes per doubling of the length."""
    n = max(n, MIN_PROMPT_BUCKET)
    if n <= block:
        return bucket_size(n)
    below = 1 << ((n - 1).bit_length() - 1)  # the largest power of two under n
    step = max(below // BUCKETS_PER_OCTAVE, block)  # both powers of two: a whole number of blocks
    return -(-n // step) * step


def prefill_chunk_length(batch: int, bucket: int, chunk_tokens: int) -> int:
    """Prompt tokens per row in one prefill step: ``chunk_tokens`` over the batch, as a power of two,
    at most the bucket."""
    per_row = max(1, chunk_tokens // batch)
    return min(1 << (per_row.bit_length() - 1), bucket)


def prompt_bucket(longest_prompt: int, budget: int, max_cache_len: int, block: int = MIN_PROMPT_BUCKET) -> int:
    """Padded prompt length: ``length_bucket`` of the longest prompt, but never so long that
    ``bucket + budget`` exceeds ``max_cache_len`` (callers check the prompt itself fits)."""
    return min(length_bucket(longest_prompt, block), max_cache_len - budget)


@dataclasses.dataclass(frozen=True)
class Switches:
    """Compile-time choices of the prefill and decode programs (a change recompiles)."""

    greedy: bool
    top_k: int
    use_top_p: bool
    budget: int
    prefill_chunk: int  # prompt tokens per row in one prefill step


@dataclasses.dataclass(frozen=True)
class GenerationPlan:
    batch: int  # rows after padding to a power of two
    bucket: int  # padded prompt length
    switches: Switches

    @property
    def cache_len(self) -> int:
        return self.bucket + self.switches.budget


def plan_generation(rows: int, longest_prompt: int, config: SamplingConfig, cache_limit: int,
                    block: int = MIN_PROMPT_BUCKET) -> GenerationPlan:
    """The plan of a call with ``rows`` prompts, the longest ``longest_prompt`` tokens, under
    ``config``; ``cache_limit`` is ``config.max_cache_len`` or the model's position limit; ``block``
    the prompt buckets' granularity (``length_bucket``)."""
    batch = bucket_size(rows)
    bucket = prompt_bucket(longest_prompt, config.max_new_tokens, cache_limit, block)
    switches = Switches(
        greedy=config.greedy,
        top_k=config.top_k,
        use_top_p=config.top_p < 1.0,
        budget=config.max_new_tokens,
        prefill_chunk=prefill_chunk_length(batch, bucket, config.prefill_chunk_tokens),
    )
    return GenerationPlan(batch, bucket, switches)


__all__ = ["MIN_PROMPT_BUCKET", "GenerationPlan", "Switches", "length_bucket", "plan_generation",
           "prefill_chunk_length", "prompt_bucket"]

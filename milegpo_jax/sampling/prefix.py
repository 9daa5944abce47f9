"""Group prefix sharing: prefill what a batch's prompts have in common once (docs/training.md §10).

A rollout batch repeats itself: the K rollouts of a group send the very same first prompt, and every
prompt of a batch opens with the same chat header, system prompt and instruction. ``share_prefixes``
plans a prefill that computes each of these once:

1. the batch's longest common prefix (every row keeps at least its last token to itself, whose
   hidden state chooses the first token), prefilled as one row;
2. the distinct remainders ("suffixes"; identical prompts have one), prefilled on top of a copy of
   the prefix's cache, one row each;
3. each row then takes the cache and first-token logits of its suffix, and decoding runs on every
   row as usual (each row samples its own tokens).

Cache layout per row: ``[prefix, left-padded | suffix, left-padded | generated]``. The model skips
padding slots (segment id 0) and counts positions over real slots only, so every row sees exactly its
prompt at positions 0..P-1, as a full prefill would. Outputs equal a full prefill's up to float
rounding (other matmul shapes): greedy tokens are the same, log-probabilities agree to fp32 tolerance.

Pure host-side numpy: the plan is a few arrays and shapes; ``sampler.prefill_shared`` runs it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from milegpo_jax.sampling.plan import MIN_PROMPT_BUCKET, length_bucket, prefill_chunk_length
from milegpo_jax.shapes import bucket_size


@dataclasses.dataclass(frozen=True)
class SharedPrefill:
    """The arrays of a shared prefill; ``B`` padded rows, ``U`` padded distinct suffixes."""

    prefix_ids: np.ndarray  # [1, Pb] int32, the common prefix left-padded
    prefix_mask: np.ndarray  # [1, Pb] int32
    suffix_ids: np.ndarray  # [U, Sb] int32, each distinct suffix left-padded
    suffix_mask: np.ndarray  # [U, Sb] int32
    row_suffix: np.ndarray  # [B] int32, the suffix row each batch row continues
    prefix_chunk: int  # prefill chunk lengths (tokens per row per step) of the two stages
    suffix_chunk: int

    @property
    def cache_prompt_slots(self) -> int:
        return self.prefix_ids.shape[1] + self.suffix_ids.shape[1]

    @property
    def positions_computed(self) -> int:
        """Token positions run through the model (padding included): the prefill's cost."""
        return self.prefix_ids.size + self.suffix_ids.size


def common_prefix_length(prompts: list[np.ndarray]) -> int:
    """Tokens every prompt starts with, leaving each prompt at least one token of its own."""
    shortest = min(p.size for p in prompts)
    first = prompts[0][: shortest - 1]
    length = first.size
    for prompt in prompts[1:]:
        differs = np.flatnonzero(prompt[:length] != first[:length])
        if differs.size:
            length = int(differs[0])
    return length


def left_padded(rows: list[np.ndarray], count: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` right-aligned in ``[count, length]`` (ids, 0/1 mask); rows past ``len(rows)`` are batch padding."""
    ids = np.zeros((count, length), np.int32)
    mask = np.zeros((count, length), np.int32)
    for index, row in enumerate(rows):
        if row.size:
            ids[index, length - row.size :] = row
            mask[index, length - row.size :] = 1
    if len(rows) < count:  # padding rows get one real token so their attention is defined
        mask[len(rows) :, -1] = 1  # (guarded: an empty prefix is [1, 0] and has no last slot)
    return ids, mask


def share_prefixes(
    prompts: list[np.ndarray], batch: int, full_bucket: int, budget: int, cache_limit: int, chunk_tokens: int,
    block: int = MIN_PROMPT_BUCKET,
) -> SharedPrefill | None:
    """The shared prefill of ``prompts`` (``batch`` rows after padding), or None when it would not
    compute fewer padded positions than the plain prefill of ``batch x full_bucket`` or would not fit
    ``cache_limit`` slots with the ``budget``."""
    shared = common_prefix_length(prompts)
    suffixes: dict[bytes, int] = {}
    row_suffix = np.zeros(batch, np.int32)
    distinct: list[np.ndarray] = []
    for row, prompt in enumerate(prompts):
        tail = prompt[shared:]
        index = suffixes.setdefault(tail.tobytes(), len(distinct))
        if index == len(distinct):
            distinct.append(tail)
        row_suffix[row] = index
    prefix_bucket = length_bucket(shared, block) if shared else 0
    suffix_bucket = length_bucket(max(s.size for s in distinct), block)
    suffix_rows = bucket_size(len(distinct))
    positions = prefix_bucket + suffix_rows * suffix_bucket
    if positions >= batch * full_bucket or prefix_bucket + suffix_bucket + budget > cache_limit:
        return None
    # nothing in common: a [1, 0] prefix, and the program skips that stage
    prefix_ids, prefix_mask = left_padded([prompts[0][:shared]], 1, prefix_bucket)
    suffix_ids, suffix_mask = left_padded(distinct, suffix_rows, suffix_bucket)
    return SharedPrefill(
        prefix_ids=prefix_ids,
        prefix_mask=prefix_mask,
        suffix_ids=suffix_ids,
        suffix_mask=suffix_mask,
        row_suffix=row_suffix,
        prefix_chunk=prefill_chunk_length(1, prefix_bucket, chunk_tokens) if shared else 0,
        suffix_chunk=prefill_chunk_length(suffix_rows, suffix_bucket, chunk_tokens),
    )


__all__ = ["SharedPrefill", "common_prefix_length", "left_padded", "share_prefixes"]

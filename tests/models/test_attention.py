"""Block-causal attention over packed segments (``milegpo_jax.models.attention``): the same values
and gradients as the dense masked form, and through the model the same logits as transformers run
on each segment alone."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from milegpo_jax.models import load_pretrained, token_logprobs
from milegpo_jax.models.attention import blocked_causal_attention, dense_attention, uses_blocks
from milegpo_jax.models.model_config import ModelConfigError
from milegpo_jax.models.runtime import RuntimeOptions
from tests.models.helpers import forward, random_ids, torch_logits


def _packed_segments(rng, rows: int, length: int, longest: int) -> np.ndarray:
    """Segment ids 1, 2, ... of random lengths, then padding (0); the last row is all padding."""
    segments = np.zeros((rows, length), np.int32)
    for row in range(rows - 1):
        start, segment = 0, 1
        while True:
            n = int(rng.integers(1, longest + 1))
            if start + n > length - int(rng.integers(0, 3)):
                break
            segments[row, start : start + n] = segment
            start, segment = start + n, segment + 1
    return segments


def _dense_mask(segments: jax.Array) -> jax.Array:
    t = segments.shape[1]
    same = segments[:, :, None] == segments[:, None, :]
    return same & (segments[:, None, :] != 0) & jnp.tril(jnp.ones((t, t), bool))[None]


@pytest.mark.parametrize("block, longest", [(4, 3), (4, 13), (8, 31)])
def test_blocked_equals_dense_values_and_gradients(block, longest):
    rng = np.random.default_rng(block + longest)
    rows, t, kv_heads, groups, h = 4, 32, 2, 2, 8
    q = jnp.asarray(rng.normal(size=(rows, t, kv_heads, groups, h)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(rows, t, kv_heads, h)), jnp.float32)
    v = jnp.asarray(rng.normal(size=(rows, t, kv_heads, h)), jnp.float32)
    segments = _packed_segments(rng, rows, t, longest)
    real = jnp.asarray(segments != 0)[:, :, None, None, None]
    weights = jnp.asarray(rng.normal(size=q.shape), jnp.float32) * real  # padding queries never count

    # jitted with the segments as an argument: as a constant XLA would spend minutes folding the masks
    dense = jax.jit(lambda q, k, v, s: dense_attention(q, k, v, _dense_mask(s)))
    blocked = jax.jit(lambda q, k, v, s: blocked_causal_attention(q, k, v, s, block))

    def gradients(attend):
        return jax.jit(jax.grad(lambda q, k, v, s: jnp.sum(attend(q, k, v, s) * weights), argnums=(0, 1, 2)))

    s = jnp.asarray(segments)
    np.testing.assert_allclose(np.where(real, blocked(q, k, v, s), 0), np.where(real, dense(q, k, v, s), 0),
                               atol=1e-5)
    for a, b in zip(gradients(blocked)(q, k, v, s), gradients(dense)(q, k, v, s)):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert np.all(np.isfinite(blocked(q, k, v, s)))  # the all-padding row included


def test_which_lengths_run_blocked():
    assert uses_blocks(256, 128) and uses_blocks(384, 128) and uses_blocks(32, 16)
    assert not uses_blocks(128, 128)  # one block: the dense form is as cheap
    assert not uses_blocks(200, 128) and not uses_blocks(256, 0)
    with pytest.raises(ValueError, match="multiple of block"):
        blocked_causal_attention(jnp.zeros((1, 12, 1, 1, 2)), jnp.zeros((1, 12, 1, 2)), jnp.zeros((1, 12, 1, 2)),
                                 jnp.ones((1, 12), jnp.int32), 8)
    with pytest.raises(ModelConfigError, match="attention_block"):
        RuntimeOptions(attention_block=-1)


def test_packed_model_with_blocks_matches_transformers_per_segment(hf_checkpoint):
    """Three rows packed into 64 positions (blocks of 16, the last 7 padding): each segment's logits
    equal transformers' on that row alone, and token log-probs equal the dense model's."""
    torch_model, path = hf_checkpoint
    blocked, config = load_pretrained(path, runtime=RuntimeOptions(attention_block=16))
    dense, _ = load_pretrained(path, runtime=RuntimeOptions(attention_block=0))
    assert blocked.runtime.attention_block == 16
    lengths = (23, 9, 25)
    seqs = [random_ids(1, n, seed=40 + i)[0] for i, n in enumerate(lengths)]
    ids = np.zeros((1, 64), np.int32)
    segments = np.zeros((1, 64), np.int32)
    start = 0
    for index, seq in enumerate(seqs, start=1):
        ids[0, start : start + len(seq)] = seq
        segments[0, start : start + len(seq)] = index
        start += len(seq)
    logits = forward(blocked, ids, segments)
    start = 0
    for seq in seqs:
        np.testing.assert_allclose(logits[0, start : start + len(seq)], torch_logits(torch_model, seq[None])[0],
                                   atol=1e-4)
        start += len(seq)
    targets = np.roll(ids, -1, axis=1)
    real = segments != 0
    a = token_logprobs(blocked, jnp.asarray(ids), jnp.asarray(targets), attention_mask=jnp.asarray(segments))
    b = token_logprobs(dense, jnp.asarray(ids), jnp.asarray(targets), attention_mask=jnp.asarray(segments))
    np.testing.assert_allclose(np.asarray(a)[real], np.asarray(b)[real], atol=1e-5)

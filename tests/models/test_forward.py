"""Forward semantics: padding, packed segments, the KV cache, layer options, chunked log-probs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from milegpo_jax.models import RuntimeOptions, load_pretrained, token_logprobs
from milegpo_jax.models.decoder import positions_within_segments
from tests.models.helpers import forward, random_ids, torch_logits

LENGTHS = (9, 4, 6)  # a ragged batch; the longest sets the padded length


def _left_padded(seqs, length):
    ids = np.zeros((len(seqs), length), np.int32)
    mask = np.zeros((len(seqs), length), np.int32)
    for row, seq in enumerate(seqs):
        ids[row, length - len(seq) :] = seq
        mask[row, length - len(seq) :] = 1
    return ids, mask


@pytest.fixture(scope="module")
def ragged(hf_checkpoint):
    torch_model, path = hf_checkpoint
    model, config = load_pretrained(path)
    seqs = [random_ids(1, n, seed=10 + i)[0] for i, n in enumerate(LENGTHS)]
    singles = [forward(model, seq[None])[0] for seq in seqs]
    for seq, single in zip(seqs, singles):  # the unpadded runs are themselves right
        np.testing.assert_allclose(single, torch_logits(torch_model, seq[None])[0], atol=1e-4)
    return model, config, seqs, singles


def test_left_padding_gives_unpadded_logits(ragged):
    model, _, seqs, singles = ragged
    ids, mask = _left_padded(seqs, max(LENGTHS))
    logits = forward(model, ids, mask)
    assert np.isfinite(logits).all()  # padding rows too
    for row, (seq, single) in enumerate(zip(seqs, singles)):
        np.testing.assert_allclose(logits[row, -len(seq) :], single, atol=1e-5)


def test_right_padding_and_bool_mask(ragged):
    model, _, seqs, singles = ragged
    length = max(LENGTHS) + 2
    ids = np.zeros((len(seqs), length), np.int32)
    mask = np.zeros((len(seqs), length), bool)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)], mask[row, : len(seq)] = seq, True
    logits = forward(model, ids, mask)
    for row, (seq, single) in enumerate(zip(seqs, singles)):
        np.testing.assert_allclose(logits[row, : len(seq)], single, atol=1e-5)


def test_packed_segments_equal_separate_sequences(ragged):
    model, _, seqs, singles = ragged
    packed = np.concatenate(seqs)[None]
    segments = np.concatenate([np.full(len(s), i + 1, np.int32) for i, s in enumerate(seqs)])[None]
    logits = forward(model, packed, segments)
    start = 0
    for seq, single in zip(seqs, singles):
        np.testing.assert_allclose(logits[0, start : start + len(seq)], single, atol=1e-5)
        start += len(seq)


def test_explicit_positions_match_defaults(ragged):
    model, _, seqs, _ = ragged
    ids, mask = _left_padded(seqs, max(LENGTHS))
    positions = np.asarray(positions_within_segments(jnp.asarray(mask)))
    assert positions[1].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3]  # 5 pads, then the real tokens from 0
    np.testing.assert_array_equal(forward(model, ids, mask, positions), forward(model, ids, mask))


@nnx.jit
def _cached_step(model, ids, mask, cache):
    return model(ids, attention_mask=mask, cache=cache)


def test_kv_cache_decode_equals_full_forward(hf_checkpoint):
    """Left-padded prefill, a multi-token chunk, then one token at a time == one full forward.

    The untied checkpoint runs with scanned layers, so the two runs cover both cache code paths."""
    torch_model, path = hf_checkpoint
    model, _ = load_pretrained(path, runtime=RuntimeOptions(scan_layers=not torch_model.config.tie_word_embeddings))
    prompt_lengths, prompt_pad, extra = (5, 2, 4), 5, 6
    total = prompt_pad + extra
    seqs = [random_ids(1, n + extra, seed=20 + i)[0] for i, n in enumerate(prompt_lengths)]
    # Full forward over [left padding | prompt | continuation].
    ids = np.zeros((3, total), np.int32)
    mask = np.zeros((3, total), np.int32)
    for row, (seq, n) in enumerate(zip(seqs, prompt_lengths)):
        ids[row, prompt_pad - n :] = seq
        mask[row, prompt_pad - n :] = 1
    full = forward(model, ids, mask)

    cache = model.init_cache(3, total + 3)  # spare slots stay empty and must not matter
    steps = [(0, prompt_pad), (prompt_pad, prompt_pad + 2)] + [(t, t + 1) for t in range(prompt_pad + 2, total)]
    for start, stop in steps:
        chunk_mask = None if start >= prompt_pad else jnp.asarray(mask[:, start:stop])
        logits, cache = _cached_step(model, jnp.asarray(ids[:, start:stop]), chunk_mask, cache)
        assert int(cache.index) == stop
        real = mask[:, start:stop].astype(bool)
        np.testing.assert_allclose(np.asarray(logits)[real], full[:, start:stop][real], atol=2e-5)
    assert np.asarray(cache.segment_ids)[:, total:].sum() == 0


def test_cache_shapes_and_overflow(tied_checkpoint):
    _, path = tied_checkpoint
    model, config = load_pretrained(path)
    cache = model.init_cache(2, 4)
    assert cache.keys.shape == (config.num_layers, 2, 4, config.num_kv_heads, config.head_dim)
    assert cache.keys.dtype == jnp.float32 and cache.max_len == 4
    assert model.init_cache(2, 4, dtype="bfloat16").values.dtype == jnp.bfloat16
    _, cache = _cached_step(model, jnp.zeros((2, 3), jnp.int32), None, cache)
    # Checked eagerly, before any computation (inside jit the caller sizes the cache).
    with pytest.raises(ValueError, match="cache overflow"):
        model(jnp.zeros((2, 2), jnp.int32), cache=cache)
    with pytest.raises(ValueError, match="rows"):
        model(jnp.zeros((3, 1), jnp.int32), cache=cache)


def test_bfloat16_cache_decodes_close(tied_checkpoint):
    """Compute dtype plumbing through the cache path (bf16 is slow on CPU: one small check)."""
    _, path = tied_checkpoint
    model, _ = load_pretrained(path, runtime=RuntimeOptions(compute_dtype="bfloat16"))
    ids = jnp.asarray(random_ids(2, 6))
    full = forward(model, ids)
    cache = model.init_cache(2, 6)
    assert cache.keys.dtype == jnp.bfloat16
    logits, cache = _cached_step(model, ids[:, :5], None, cache)
    last, _ = _cached_step(model, ids[:, 5:], None, cache)
    assert last.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(last[:, 0], np.float32), np.asarray(full[:, 5], np.float32), atol=0.1)


@nnx.jit
@nnx.grad
def _mean_logprob_grad(model, ids):
    return jnp.mean(token_logprobs(model, ids[:, :-1], ids[:, 1:]))


@pytest.fixture(scope="module")
def plain_model_and_grads(tied_checkpoint):
    _, path = tied_checkpoint
    plain, config = load_pretrained(path)
    ids = jnp.asarray(random_ids(2, 7, vocab=config.vocab_size))
    return path, ids, forward(plain, ids), _flat_grads(_mean_logprob_grad(plain, ids), config.num_layers)


# Scanning alone is covered (forward, cache, loading) elsewhere; gradients matter with remat.
@pytest.mark.parametrize("options", [dict(remat="full"), dict(scan_layers=True, remat="dots"),
                                     dict(scan_layers=True, remat="offload")])
def test_layer_options_do_not_change_the_function(plain_model_and_grads, options):
    """Scanned layers and rematerialisation: same logits and same gradients as the plain stack."""
    path, ids, plain_logits, flat_plain = plain_model_and_grads
    other, config = load_pretrained(path, runtime=RuntimeOptions(**options))
    np.testing.assert_allclose(forward(other, ids), plain_logits, atol=1e-5)
    flat_other = _flat_grads(_mean_logprob_grad(other, ids), config.num_layers)
    assert flat_plain.keys() == flat_other.keys()
    for key in flat_plain:
        np.testing.assert_allclose(flat_other[key], flat_plain[key], atol=1e-6, err_msg=str(key))


@pytest.mark.parametrize("remat", ["full", "offload"])
def test_offload_keeps_the_layer_inputs_in_host_memory(plain_model_and_grads, remat):
    """remat="offload": the gradient's only saved residual is the stack of the layers' inputs, placed in
    host memory ([layers, B, T, hidden]); "full" keeps everything on the device."""
    path, ids, _, _ = plain_model_and_grads
    model, config = load_pretrained(path, runtime=RuntimeOptions(scan_layers=True, remat=remat))
    graphdef, state = nnx.split(model)

    def loss(state):
        return jnp.mean(token_logprobs(nnx.merge(graphdef, state), ids[:, :-1], ids[:, 1:]))

    outputs = [var for eqn in _all_eqns(jax.make_jaxpr(jax.grad(loss))(state).jaxpr) for var in eqn.outvars]
    host_shapes = {tuple(var.aval.shape) for var in outputs
                   if "host" in str(getattr(var.aval, "memory_space", "")).lower()}
    stacked = (config.num_layers, ids.shape[0], ids.shape[1] - 1, config.hidden_size)
    assert (stacked in host_shapes) == (remat == "offload"), host_shapes


def _all_eqns(jaxpr):
    """Every equation of a jaxpr, those of its sub-jaxprs (scan, remat, ...) included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for sub in param if isinstance(param, (tuple, list)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _all_eqns(inner)


def _flat_grads(grads, num_layers):
    out = {}
    for path, var in nnx.to_flat_state(grads):
        value = np.asarray(var[...])
        if path[0] == "layers" and not isinstance(path[1], int):  # stacked: split per layer
            for i in range(num_layers):
                out[("layers", i, *path[1:])] = value[i]
        else:
            out[path] = value
    return out


# ------------------------------------------------------------------------------- chunked log-probs


def _float_intermediates(jaxpr):
    """Shapes of every float array a (closed) jaxpr creates, sub-jaxprs (scan, remat, ...) included."""
    return [tuple(var.aval.shape) for eqn in _all_eqns(jaxpr) for var in eqn.outvars
            if hasattr(var.aval, "shape") and jnp.issubdtype(var.aval.dtype, jnp.floating)]


def test_chunked_logprobs_match_and_never_hold_full_logits(hf_checkpoint):
    _, path = hf_checkpoint
    model, config = load_pretrained(path)
    tied = config.tie_word_embeddings
    b, t, v = 2, 12, config.vocab_size
    ids = jnp.asarray(random_ids(b, t + 1, vocab=v, seed=5))
    mask = jnp.asarray(np.array([[0, 0] + [1] * (t - 2), [1] * t]))
    inputs, targets = ids[:, :-1], ids[:, 1:]

    full_logits = forward(model, inputs, mask).astype(np.float64)
    want = np.take_along_axis(jax.nn.log_softmax(full_logits, -1), np.asarray(targets)[..., None], -1)[..., 0]

    def logprobs(model, chunk):
        return token_logprobs(model, inputs, targets, attention_mask=mask, chunk_size=chunk)

    def loss(model, chunk):
        return jnp.sum(logprobs(model, chunk) * mask)

    for chunk in (None, 5):  # 5 does not divide 12: the tail chunk is padded
        got = nnx.jit(logprobs, static_argnums=1)(model, chunk)
        assert got.dtype == jnp.float32 and got.shape == (b, t)
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)

    if tied:  # the harder gradient (embedding gather + head); compiling grads is the slow part
        grads = {c: nnx.jit(nnx.grad(loss), static_argnums=1)(model, c) for c in (None, 4)}
        for a, g in zip(jax.tree.leaves(grads[None]), jax.tree.leaves(grads[4])):
            np.testing.assert_allclose(np.asarray(g), np.asarray(a), atol=1e-5)

    graphdef, state = nnx.split(model)

    def pure(fn, chunk):
        return lambda s: fn(nnx.merge(graphdef, s), chunk)

    def biggest_vocab_tensor(fn, chunk):
        shapes = _float_intermediates(jax.make_jaxpr(pure(fn, chunk))(state).jaxpr)
        return max((int(np.prod(s)) for s in shapes if v in s), default=0)

    # Unchunked the full [B, T, V] logits exist (so the probe sees them); chunked, forward and
    # backward only ever hold one chunk's [B, 4, V].
    assert biggest_vocab_tensor(logprobs, None) >= b * t * v
    assert biggest_vocab_tensor(logprobs, 4) == b * 4 * v
    grad_fn = lambda m, c: nnx.grad(loss)(m, c)  # noqa: E731
    assert biggest_vocab_tensor(grad_fn, None) >= b * t * v
    # (the embedding/head matrix itself, [V, D], is smaller than one chunk here)
    assert biggest_vocab_tensor(grad_fn, 4) <= max(b * 4 * v, v * config.hidden_size)


def test_bad_forward_arguments(tied_checkpoint):
    _, path = tied_checkpoint
    model, _ = load_pretrained(path)
    ids = jnp.zeros((2, 3), jnp.int32)
    with pytest.raises(ValueError, match="attention_mask"):
        model(ids, attention_mask=jnp.ones((2, 4)))
    with pytest.raises(ValueError, match="positions"):
        model(ids, positions=jnp.zeros((2,), jnp.int32))
    with pytest.raises(ValueError, match=r"\[batch, time\]"):
        model(jnp.zeros((3,), jnp.int32))
    with pytest.raises(ValueError, match="chunk_size"):
        token_logprobs(model, ids, ids, chunk_size=0)

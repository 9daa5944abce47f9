"""The fused attention kernels (``milegpo_jax.models.attention_kernels``) in Pallas's interpreter on
CPU: the same values and gradients as the dense masked form on random packings, through the model the
same log-probs and parameter gradients, and the platform choice (``choose_attention``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from milegpo_jax.models import load_pretrained, token_logprobs
from milegpo_jax.models.attention import KERNEL_PLATFORMS, check_attention_impl, choose_attention, dense_attention
from milegpo_jax.models.attention_kernels import fused_causal_attention
from milegpo_jax.models.model_config import ATTENTION_IMPLS, ModelConfigError
from milegpo_jax.models.runtime import RuntimeOptions
from tests.models.test_attention import _dense_mask, _packed_segments


@pytest.mark.parametrize("impl", ["splash", "gpu_flash"])
def test_kernel_equals_dense_values_and_gradients(impl):
    rng = np.random.default_rng(7)
    rows, t, kv_heads, groups, h = 3, 256, 2, 2, 32
    q = jnp.asarray(rng.normal(size=(rows, t, kv_heads, groups, h)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(rows, t, kv_heads, h)), jnp.float32)
    v = jnp.asarray(rng.normal(size=(rows, t, kv_heads, h)), jnp.float32)
    segments = jnp.asarray(_packed_segments(rng, rows, t, 90))
    real = (segments != 0)[:, :, None, None, None]
    weights = jnp.asarray(rng.normal(size=q.shape), jnp.float32) * real  # padding queries never count

    dense = jax.jit(lambda q, k, v, s: dense_attention(q, k, v, _dense_mask(s)))
    fused = jax.jit(lambda q, k, v, s: fused_causal_attention(q, k, v, s, impl, interpret=True))

    def gradients(attend):
        return jax.jit(jax.grad(lambda q, k, v, s: jnp.sum(attend(q, k, v, s) * weights), argnums=(0, 1, 2)))

    np.testing.assert_allclose(np.where(real, fused(q, k, v, segments), 0),
                               np.where(real, dense(q, k, v, segments), 0), atol=2e-5)
    for a, b in zip(gradients(fused)(q, k, v, segments), gradients(dense)(q, k, v, segments)):
        np.testing.assert_allclose(a, b, atol=5e-5)


def test_the_platform_picks_the_form():
    assert choose_attention("auto", "cpu", 256, 128) == "blocks"
    assert choose_attention("auto", "cpu", 128, 128) == "xla"  # one block: the dense form is as cheap
    assert choose_attention("auto", "tpu", 2560, 128) == "splash"
    assert choose_attention("auto", "gpu", 2560, 128) == "gpu_flash"
    assert choose_attention("auto", "tpu", 200, 0) == "xla"  # not a whole number of kernel blocks
    assert choose_attention("splash", "cpu", 256, 128) == "splash"  # the interpreter, as these tests run it
    assert choose_attention("xla", "tpu", 2560, 128) == "xla"
    assert choose_attention("blocks", "tpu", 2560, 128) == "blocks"
    assert jax.default_backend() == "cpu"
    check_attention_impl("auto", "cpu")
    with pytest.raises(ValueError, match="model.attention_impl='splash' runs on TPU only"):
        check_attention_impl("splash", "cpu")
    with pytest.raises(ValueError, match="model.attention_impl='gpu_flash' runs on GPU only"):
        check_attention_impl("gpu_flash", "tpu")
    with pytest.raises(ModelConfigError, match="attention_impl"):  # the one check of the name
        RuntimeOptions(attention_impl="flash")
    assert set(ATTENTION_IMPLS) == {"auto", "xla", "blocks", *KERNEL_PLATFORMS}  # the names and the kernels agree


@pytest.mark.parametrize("impl", ["splash"])  # gpu_flash through the model: the sharded check
def test_packed_model_with_a_kernel_equals_the_dense_model(tied_checkpoint, impl):
    """Four rows of packed segments over 256 positions: token log-probs and every parameter's gradient
    of a log-prob loss equal the dense model's."""
    _, path = tied_checkpoint
    fused, config = load_pretrained(path, runtime=RuntimeOptions(attention_impl=impl))
    dense, _ = load_pretrained(path, runtime=RuntimeOptions(attention_impl="xla"))
    assert fused.runtime.attention_impl == impl
    rng = np.random.default_rng(3)
    segments = jnp.asarray(_packed_segments(rng, 4, 256, 120))
    ids = jnp.asarray(rng.integers(0, config.vocab_size, (4, 256)), jnp.int32) * (segments != 0)
    targets = jnp.roll(ids, -1, axis=1)
    real = np.asarray(segments != 0)

    def loss(model):
        logprobs = token_logprobs(model, ids, targets, attention_mask=segments)
        return jnp.sum(jnp.where(segments != 0, logprobs, 0.0)), logprobs

    (_, a), grads_a = nnx.value_and_grad(loss, has_aux=True)(fused)
    (_, b), grads_b = nnx.value_and_grad(loss, has_aux=True)(dense)
    np.testing.assert_allclose(np.asarray(a)[real], np.asarray(b)[real], atol=2e-5)
    for (path_a, x), (path_b, y) in zip(nnx.to_flat_state(grads_a), nnx.to_flat_state(grads_b)):
        assert path_a == path_b
        np.testing.assert_allclose(np.asarray(x[...]), np.asarray(y[...]), atol=2e-4, err_msg=str(path_a))

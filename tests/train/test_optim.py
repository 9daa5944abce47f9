"""make_optimizer / learning_rate_schedule follow the optim section."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from milegpo_jax.train.options import OptimizerConfig
from milegpo_jax.train.optim import learning_rate_schedule, make_optimizer


@pytest.mark.parametrize("section, expected", [
    (OptimizerConfig(learning_rate=1e-6), {0: 1e-6, 10_000: 1e-6}),  # the paper: constant
    (OptimizerConfig(learning_rate=1e-3, warmup_steps=10), {0: 0.0, 5: 5e-4, 10: 1e-3, 50: 1e-3}),
    (OptimizerConfig(learning_rate=1e-3, warmup_steps=10, schedule="cosine", decay_steps=100, end_lr_ratio=0.1),
     {10: 1e-3, 60: 1e-3 * (0.1 + 0.9 * 0.5), 110: 1e-4, 500: 1e-4}),
    (OptimizerConfig(learning_rate=1e-3, schedule="linear", decay_steps=100), {0: 1e-3, 50: 5e-4, 100: 0.0}),
])
def test_schedule(section, expected):
    schedule = learning_rate_schedule(section)
    for step, value in expected.items():
        assert float(schedule(step)) == pytest.approx(value, rel=1e-5, abs=1e-12), step


def test_clipping_then_adamw():
    section = OptimizerConfig(learning_rate=0.1, grad_clip_norm=1.0, weight_decay=0.0)
    params = {"w": jnp.zeros(4)}
    grads = {"w": jnp.full(4, 100.0)}  # norm 200 -> clipped to 1
    tx = make_optimizer(section)
    updates, _ = tx.update(grads, tx.init(params), params)
    reference = optax.adam(0.1)
    expected, _ = reference.update({"w": grads["w"] / 200.0}, reference.init(params), params)
    np.testing.assert_allclose(updates["w"], expected["w"], rtol=1e-6)
    assert len(make_optimizer(OptimizerConfig(grad_clip_norm=0.0)).init(params)) == 1  # no clipping stage

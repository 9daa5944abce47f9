"""A functional PPO train step: ``(params, opt_state, batch) -> (params, opt_state, metrics)``.

The same maths as ``milegpo_jax.train.ppo.ppo_update`` for one mini-batch (``ppo._loss`` for the
loss, ``milegpo_jax.train.optim.make_optimizer`` for clipping + AdamW), written as one pure function
over an NNX state so that it can be jitted with explicit shardings, donated buffers and lowered ahead
of time (``experiments/aot.py``):

* ``batch`` holds one mini-batch of packed rows (``ppo.pack_rows`` keys plus ``ref_logprobs``);
* micro-batches of ``microbatch_rows`` rows run forward/backward one after another inside a
  ``lax.scan`` and their gradients are summed; each micro-batch's loss is divided by the mini-batch's
  response-token count, so the sum is the mini-batch token-mean gradient (as ``ppo_update``);
* one optimizer update follows; ``params`` and ``opt_state`` are donated (updated in place).

``train_step_shardings`` gives the in/out shardings for a mesh: parameters (and the Adam moments that
mirror them) by the ``train`` rules, batch rows over the ``data`` x ``fsdp`` axes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from milegpo_jax.parallel import LogicalSharding, constrain, state_shardings
from milegpo_jax.train.loss import PPOLossConfig
from milegpo_jax.train.ppo import _loss

# [rows, T] arrays of a packed mini-batch (ppo.pack_rows) plus the reference log-probs; advantages are [rows]
TOKEN_KEYS = ("inputs", "targets", "attention_mask", "response_mask", "old_logprobs", "ref_logprobs")
TOKEN_DTYPES = {
    "inputs": jnp.int32,
    "targets": jnp.int32,
    "attention_mask": jnp.int32,
    "response_mask": jnp.float32,
    "old_logprobs": jnp.float32,
    "ref_logprobs": jnp.float32,
    "advantages": jnp.float32,
}
METRIC_KEYS = ("loss", "policy_loss", "kl", "entropy", "clip_fraction", "approx_kl_behaviour", "logprob_gap")


@dataclasses.dataclass(frozen=True)
class TrainStep:
    """A jittable train step for one model structure, optimizer and loss (all static).

    ``step(params, opt_state, batch)``: ``params`` is the model's ``nnx.State`` (``nnx.split``),
    ``opt_state`` is ``tx.init(params)``, ``batch`` a dict of ``TOKEN_KEYS`` ``[rows, T]`` arrays and
    ``advantages [rows]``, with ``rows`` a multiple of ``microbatch_rows``.
    """

    graphdef: Any
    tx: optax.GradientTransformation
    loss_config: PPOLossConfig
    microbatch_rows: int
    chunk_size: int | None = None  # LM-head positions per chunk in the loss (None: all at once)

    def __call__(self, params, opt_state, batch):
        rows = batch["advantages"].shape[0]
        if rows % self.microbatch_rows:
            raise ValueError(f"{rows} rows are not a multiple of microbatch_rows={self.microbatch_rows}")
        sharding = nnx.merge(self.graphdef, params).sharding
        token_count = jnp.sum(batch["response_mask"])
        micro = rows // self.microbatch_rows

        def split(x):  # [rows, ...] -> [micro-batches, microbatch_rows, ...], rows still over the batch axes
            x = x.reshape(micro, self.microbatch_rows, *x.shape[1:])
            return constrain(x, (None, "batch") + (None,) * (x.ndim - 2), sharding)

        def gradients(batch):
            def loss_fn(params):
                model = nnx.merge(self.graphdef, params)
                return _loss(model, batch, batch["ref_logprobs"], token_count, self.loss_config, self.chunk_size)

            (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            return grads, {"loss": loss, **metrics}

        if micro == 1:
            grads, metrics = gradients(batch)
        else:
            def accumulate(total, batch):
                grads, metrics = gradients(batch)
                return jax.tree.map(jnp.add, total, grads), metrics

            zeros = jax.tree.map(jnp.zeros_like, params)
            grads, per_micro = jax.lax.scan(accumulate, zeros, jax.tree.map(split, batch))
            metrics = {key: jnp.sum(per_micro[key]) for key in METRIC_KEYS}
            metrics["ratio_min"] = jnp.min(per_micro["ratio_min"])
            metrics["ratio_max"] = jnp.max(per_micro["ratio_max"])
        updates, opt_state = self.tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, {**metrics, "grad_norm": optax.tree.norm(grads)}


def batch_shapes(rows: int, length: int, sharding: LogicalSharding | None = None) -> dict[str, jax.ShapeDtypeStruct]:
    """``ShapeDtypeStruct``s of a mini-batch of ``rows`` rows of ``length`` tokens (rows over the batch axes)."""
    def struct(key, shape):
        axes = ("batch",) + (None,) * (len(shape) - 1)
        placed = None if sharding is None else sharding.named(axes, shape)
        return jax.ShapeDtypeStruct(shape, TOKEN_DTYPES[key], sharding=placed)

    shapes = {key: struct(key, (rows, length)) for key in TOKEN_KEYS}
    shapes["advantages"] = struct("advantages", (rows,))
    return shapes


def opt_state_shardings(tx: optax.GradientTransformation, opt_state: Any, param_shardings: Any, mesh) -> Any:
    """Shardings of ``opt_state``: leaves that mirror a parameter (Adam moments) take its sharding, the
    rest (step counts) are replicated."""
    replicated = NamedSharding(mesh, PartitionSpec())
    return optax.tree_map_params(
        tx, lambda _, sharding: sharding, opt_state, param_shardings, transform_non_params=lambda _: replicated
    )


def train_step_shardings(step: TrainStep, abstract_params: Any, sharding: LogicalSharding):
    """``(param_shardings, opt_state_shardings, abstract_opt_state)`` of ``step`` under ``sharding``."""
    param_shardings = state_shardings(abstract_params, sharding)
    abstract_opt = jax.eval_shape(step.tx.init, abstract_params)
    return param_shardings, opt_state_shardings(step.tx, abstract_opt, param_shardings, sharding.mesh), abstract_opt


def jit_train_step(step: TrainStep, param_shardings: Any = None, opt_shardings: Any = None):
    """``jax.jit`` of ``step`` with params and optimizer state donated; with shardings given they are
    kept from input to output (so the donated buffers are reused in place)."""
    if param_shardings is None:
        return jax.jit(step, donate_argnums=(0, 1))
    return jax.jit(
        step,
        donate_argnums=(0, 1),
        out_shardings=(param_shardings, opt_shardings, None),
    )


__all__ = ["METRIC_KEYS", "TOKEN_KEYS", "TrainStep", "batch_shapes", "jit_train_step", "opt_state_shardings",
           "train_step_shardings"]

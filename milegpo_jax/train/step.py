"""The one train step of the project: ``(params, opt_state, batch) -> (params, opt_state, metrics)``.

Every gradient update runs through ``TrainStep`` (docs/training.md §2): the PPO
mini-batches of the trainer, the supervised warm start (``milegpo_jax.train.sft``,
``experiments/sft.py``), the program ``experiments.aot`` compiles and the one
``experiments/bench/device.py`` times.

* ``batch`` holds one mini-batch as ``[micro_batches, rows, T]`` arrays (rows may be packed
  sequences: ``attention_mask`` then carries segment ids); micro-batches run forward/backward one
  after another inside a ``lax.scan`` and their gradients are summed;
* the loss is a parameter (``PPOLoss`` or ``SFTLoss``); each micro-batch's loss is divided by the
  mini-batch's count of ``loss.weight_key`` tokens, so the sum is the mini-batch token mean;
* the LM head runs only at the positions the loss weighs: ``head_index`` ``[micro_batches, rows, K]``
  lists them and every key but the layout's (``packing.LAYOUT_KEYS``) is given at them
  (``milegpo_jax.train.packing``, ``pack(..., head=Head(loss.weight_key, K))``);
* tree-packed rows (shared prompt prefixes, docs/training.md §3.1) add ``positions`` and
  ``segment_ancestors`` (and on a fused kernel its ``expand_*`` / ``collect_index``): ``TREE_KEYS``,
  read when the batch has them;
* with ``optim.trainable_layers`` the frozen layers' output may come precomputed as ``TRUNK_KEY``
  (``milegpo_jax.train.trunk``, docs/training.md §3.2): the step then runs only the trained layers;
* one optimizer update (always ``make_optimizer``'s clipping + AdamW) follows; ``params`` and
  ``opt_state`` are donated, so they are updated in place.

``build_train_step(graphdef, runtime, loss, optim)`` (option objects the trainer builds from its config) is
how both the trainer and ``experiments.aot`` make the PPO step, so the two compile the same function.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from milegpo_jax.models.attention import KERNEL_BLOCK, KERNEL_PLATFORMS, TreeExpansion, choose_attention
from milegpo_jax.models.logprobs import logprobs_from_hidden
from milegpo_jax.models.runtime import RuntimeOptions
from milegpo_jax.parallel import LogicalSharding, constrain, state_shardings
from milegpo_jax.train.loss import PPOLossConfig, ppo_loss
from milegpo_jax.train.optim import make_optimizer
from milegpo_jax.train.options import OptimizerConfig
from milegpo_jax.train.packing import LAYOUT_KEYS, NO_SHARING, Sharing

# dtypes of the batch keys the losses read: inputs and attention_mask are [micro_batches, rows, T], the
# rest [micro_batches, rows, K] at the head positions
TOKEN_DTYPES = {
    "inputs": jnp.int32,
    "attention_mask": jnp.int32,
    "head_index": jnp.int32,
    "targets": jnp.int32,
    "response_mask": jnp.float32,
    "old_logprobs": jnp.float32,
    "ref_logprobs": jnp.float32,
    "advantages": jnp.float32,
    "loss_mask": jnp.float32,
    "positions": jnp.int32,
    "segment_ancestors": jnp.int32,
    "expand_index": jnp.int32,
    "expand_segments": jnp.int32,
    "collect_index": jnp.int32,
}
# a tree-packed batch's layout (packing.Sharing); absent without sharing, which leaves the program as before trees
TREE_KEYS = ("positions", "segment_ancestors", "expand_index", "expand_segments", "collect_index")
# the frozen layers' output at every position ``[micro_batches, rows, T, hidden]``, computed once per update
# (``milegpo_jax.train.trunk``); absent, the step computes them itself
TRUNK_KEY = "trunk"
METRIC_KEYS = ("loss", "policy_loss", "kl", "entropy", "clip_fraction", "approx_kl_behaviour", "logprob_gap")


def head_logprobs(model, batch, chunk_size: int | None, trainable_layers: int = 0, with_entropy: bool = False):
    """Log-probs of ``batch["targets"]`` (and the entropies) at the ``head_index`` positions, ``[rows, K]``;
    ``trainable_layers`` > 0: no gradient below the top layers nor into the LM head (optim.trainable_layers)."""
    frozen = model.config.num_layers - trainable_layers if trainable_layers else 0
    hidden, _ = model.hidden_states(batch["inputs"], frozen_layers=frozen, trunk=batch.get(TRUNK_KEY),
                                    **layout_arguments(batch))
    hidden = jnp.take_along_axis(hidden, batch["head_index"][..., None], axis=1)
    weight, tied = model.output_projection()
    if trainable_layers:  # the LM head (a tied embedding) is frozen with the lower layers
        weight = jax.lax.stop_gradient(weight)
    return logprobs_from_hidden(hidden, weight, batch["targets"], tied=tied, chunk_size=chunk_size,
                                sharding=model.sharding, with_entropy=with_entropy)


def layout_arguments(batch) -> dict[str, Any]:
    """The ``hidden_states`` keywords of a packed batch: segment ids, and a tree's layout if it has one."""
    tree = None
    if "expand_index" in batch:
        tree = TreeExpansion(batch["expand_index"], batch["expand_segments"], batch["collect_index"])
    return {"attention_mask": batch["attention_mask"], "positions": batch.get("positions"),
            "segment_ancestors": batch.get("segment_ancestors"), "tree": tree}


def update_sharing(model, capacity: int, enabled: bool = True) -> Sharing:
    """How an update of ``model`` over rows of ``capacity`` positions shares prompt prefixes: not at all when
    ``enabled`` is off (``ppo.share_prefixes``), else a tree, expanded for a fused kernel when the
    training forward runs one (docs/training.md §3.1)."""
    if not enabled:
        return NO_SHARING
    runtime = model.runtime
    def kernel_at(length: int) -> bool:
        return choose_attention(runtime.attention_impl, model.platform(), length, runtime.attention_block) in KERNEL_PLATFORMS

    if kernel_at(Sharing().capacity(capacity)):
        # A kernel attends causally over a whole expanded sequence, block pairs across its segments
        # included: sequences of the rows' own capacity keep that work and memory at the rows-alone
        # packing's (docs/training.md §3.1).
        return Sharing(span=1, expand_block=KERNEL_BLOCK if kernel_at(capacity) else 0)
    return Sharing()


@dataclasses.dataclass(frozen=True)
class PPOLoss:
    """Token-level PPO-clip + KL to the reference + entropy bonus (``loss.ppo_loss``)."""

    config: PPOLossConfig
    chunk_size: int | None = None  # LM-head positions per chunk (None: all at once)
    trainable_layers: int = 0  # > 0: gradients only for the top layers (optim.trainable_layers)
    weight_key = "response_mask"
    keys = ("inputs", "attention_mask", "head_index", "targets", "response_mask", "old_logprobs", "ref_logprobs",
            "advantages")
    sum_metrics = METRIC_KEYS
    min_metrics = ("ratio_min",)
    max_metrics = ("ratio_max",)

    def __call__(self, model, batch, token_count):
        logprobs, entropy = head_logprobs(model, batch, self.chunk_size, self.trainable_layers, with_entropy=True)
        return ppo_loss(logprobs, batch["old_logprobs"], batch["ref_logprobs"], entropy, batch["advantages"],
                        batch["response_mask"], token_count, self.config)


@dataclasses.dataclass(frozen=True)
class SFTLoss:
    """Mean negative log-likelihood of the ``loss_mask`` tokens; ``target_prob`` is their mean
    probability (a readable accuracy proxy)."""

    chunk_size: int | None = None
    weight_key = "loss_mask"
    keys = ("inputs", "attention_mask", "head_index", "targets", "loss_mask")
    sum_metrics = ("loss", "target_prob")
    min_metrics = ()
    max_metrics = ()

    def __call__(self, model, batch, token_count):
        logprobs = head_logprobs(model, batch, self.chunk_size)
        mask = batch["loss_mask"]
        loss = -jnp.sum(logprobs * mask) / token_count
        return loss, {"target_prob": jnp.sum(jnp.exp(logprobs) * mask) / token_count}


@dataclasses.dataclass(frozen=True)
class TrainStep:
    """A jittable train step for one model structure, optimizer and loss (all static).

    ``params`` is the model's ``nnx.State`` (``nnx.split``), ``opt_state`` is ``tx.init(params)``,
    ``batch`` a dict of ``loss.keys`` arrays shaped ``[micro_batches, rows, T]`` (``LAYOUT_KEYS``)
    or ``[micro_batches, rows, K]`` (the rest, at ``head_index``).
    """

    graphdef: Any
    tx: optax.GradientTransformation
    loss: Any  # PPOLoss | SFTLoss

    def __call__(self, params, opt_state, batch):
        sharding = nnx.merge(self.graphdef, params).sharding
        keys = self.loss.keys + tuple(key for key in TREE_KEYS + (TRUNK_KEY,) if key in batch)
        batch = {key: constrain(batch[key], (None, "batch") + (None,) * (batch[key].ndim - 2), sharding)
                 for key in keys}
        token_count = jnp.maximum(jnp.sum(batch[self.loss.weight_key]), 1.0)

        def accumulate(total, micro):
            def loss_fn(params):
                return self.loss(nnx.merge(self.graphdef, params), micro, token_count)

            (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            return jax.tree.map(jnp.add, total, grads), {"loss": loss, **metrics}

        zeros = jax.tree.map(jnp.zeros_like, params)
        grads, per_micro = jax.lax.scan(accumulate, zeros, batch)
        metrics = {key: jnp.sum(per_micro[key]) for key in self.loss.sum_metrics}
        metrics.update({key: jnp.min(per_micro[key]) for key in self.loss.min_metrics})
        metrics.update({key: jnp.max(per_micro[key]) for key in self.loss.max_metrics})
        updates, opt_state = self.tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, {**metrics, "grad_norm": optax.tree.norm(grads)}


def build_train_step(graphdef, runtime: RuntimeOptions, loss: PPOLossConfig, optim: OptimizerConfig) -> TrainStep:
    """The PPO step for a model structure (the trainer's and ``experiments.aot``'s): the loss's options,
    the LM-head chunk of ``runtime`` and the optimizer's options (``optim.trainable_layers`` as well)."""
    return TrainStep(graphdef, make_optimizer(optim), PPOLoss(loss, runtime.chunk_size, optim.trainable_layers))


def batch_shapes(keys, micro: int, rows: int, length: int, head: int,
                 sharding: LogicalSharding | None = None, depth: int = 0, expanded: int = 0) -> dict[str, jax.ShapeDtypeStruct]:
    """``ShapeDtypeStruct``s of a mini-batch of ``micro`` x ``rows`` rows of ``length`` tokens, ``head``
    of them weighted; ``depth`` > 0: tree-packed (``TREE_KEYS``), ``expanded`` slots for a kernel."""
    keys = tuple(keys) + (TREE_KEYS[:2] if depth else ()) + (TREE_KEYS[2:] if depth and expanded else ())
    sizes = {"segment_ancestors": (length, depth), "expand_index": (expanded,), "expand_segments": (expanded,)}

    def struct(key):
        shape = (micro, rows) + sizes.get(key, (length,) if key in LAYOUT_KEYS else (head,))
        placed = None if sharding is None else sharding.named((None, "batch") + (None,) * (len(shape) - 2), shape)
        return jax.ShapeDtypeStruct(shape, TOKEN_DTYPES[key], sharding=placed)

    return {key: struct(key) for key in keys}


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
    return jax.jit(step, donate_argnums=(0, 1), out_shardings=(param_shardings, opt_shardings, None))


__all__ = ["METRIC_KEYS", "PPOLoss", "SFTLoss", "TOKEN_DTYPES", "TREE_KEYS", "TRUNK_KEY", "TrainStep", "batch_shapes",
           "build_train_step", "head_logprobs", "jit_train_step", "layout_arguments", "opt_state_shardings",
           "train_step_shardings", "update_sharing"]

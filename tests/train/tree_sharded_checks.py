"""Tree-packed rows on 8 fake CPU devices (run by ``test_tree_packing.py`` in a child process: the XLA
device count is fixed when jax first initialises). The PPO loss, metrics and gradients of a sharded,
rematerialised model on tree-packed rows (and from the frozen trunk, docs/training.md §3.2) equal the
unsharded model's on the rows packed alone.

By hand: ``XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m pytest tests/train/tree_sharded_checks.py``.
"""

from __future__ import annotations

import jax
from flax import nnx

from milegpo_jax import parallel
from milegpo_jax.models import RuntimeOptions, init_model
from milegpo_jax.train.packing import NO_SHARING, Sharing
from tests.train.test_tree_packing import CONFIG, assert_same_update, loss_and_grads, packed_batch, tree_rows

if jax.device_count() != 8:
    raise RuntimeError("tree_sharded_checks.py needs 8 devices: set XLA_FLAGS=--xla_force_host_platform_device_count=8")

FSDP_TP = {"data": 1, "fsdp": 4, "tensor": 2}


def test_sharded_tree_update_equals_the_rows_alone():
    """Splash (Pallas's interpreter) per device over the trees' expansion, rematerialised."""
    impl, capacity, sharing = "splash", 128, Sharing(expand_block=128)
    rows = tree_rows(9, groups=2)
    plain = init_model(CONFIG, RuntimeOptions(attention_impl="xla"), seed=9)
    want = loss_and_grads(plain, packed_batch(rows, capacity, NO_SHARING)[1])

    mesh = parallel.make_mesh(FSDP_TP)
    runtime = RuntimeOptions(attention_impl=impl, remat="full")
    model = init_model(CONFIG, runtime, seed=9, sharding=parallel.logical_sharding(mesh, "train"))
    _, batch = packed_batch(rows, capacity, sharing, quantum=4)  # whole sequences per batch shard
    graphdef, params = nnx.split(model)
    shardings = parallel.state_shardings(params, model.sharding)
    step = jax.jit(lambda p, b: loss_and_grads(nnx.merge(graphdef, p), b), in_shardings=(shardings, None),
                   out_shardings=((None, None), shardings))
    got = step(params, batch)
    assert_same_update(want, got)


def test_sharded_update_from_the_trunk_equals_the_rows_alone():
    """The frozen trunk (milegpo_jax.train.trunk) computed on the mesh and read by sharded mini-batches."""
    import jax.numpy as jnp
    import numpy as np

    from milegpo_jax.train.step import TRUNK_KEY
    from milegpo_jax.train.trunk import trunk_states
    from tests.train.test_trunk import CONFIG as DEEP, LAYERS, TOP, TRAINED

    rows = tree_rows(10, groups=2)
    plain = init_model(DEEP, RuntimeOptions(attention_impl="xla", scan_layers=True), seed=10)
    want = loss_and_grads(plain, packed_batch(rows, 64, NO_SHARING, TOP)[1], TOP)

    mesh = parallel.make_mesh(FSDP_TP)
    model = init_model(DEEP, RuntimeOptions(scan_layers=True, remat="full"), seed=10,
                       sharding=parallel.logical_sharding(mesh, "train"))
    place = lambda a: jax.device_put(a, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, ("data", "fsdp"))))
    trunk = trunk_states(model, rows, layers=LAYERS - TRAINED, capacity=64, max_sequences=4, pad_id=0, place=place,
                         sharing=Sharing(), quantum=4)
    packed, batch = packed_batch(rows, 64, Sharing(), TOP, quantum=4)
    batch[TRUNK_KEY] = jnp.asarray(trunk.gather(packed, np.arange(len(rows))))
    graphdef, params = nnx.split(model)
    shardings = parallel.state_shardings(params, model.sharding)
    step = jax.jit(lambda p, b: loss_and_grads(nnx.merge(graphdef, p), b, TOP), in_shardings=(shardings, None),
                   out_shardings=((None, None), shardings))
    assert_same_update(want, step(params, batch))

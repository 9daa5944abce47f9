"""Mesh construction and the logical->mesh rules; the 8-device checks run in a child process."""

from __future__ import annotations

import jax
import pytest
from jax.sharding import AxisType, PartitionSpec as P

from milegpo_jax import multihost, parallel
from tests.fake_devices import run_on_8_fake_devices


class FakeMesh:
    """Just the ``shape`` mapping that ``logical_to_spec`` consults (no devices needed)."""

    def __init__(self, **shape):
        self.shape = shape


def test_mesh_config_fills_and_validates():
    assert parallel.MeshConfig().resolve(8) == (1, 8, 1)
    assert parallel.MeshConfig(data=2, fsdp=-1, tensor=2).resolve(8) == (2, 2, 2)
    assert parallel.MeshConfig.from_value({"tensor": 4, "fsdp": 1, "data": -1}).resolve(8) == (2, 1, 4)
    assert parallel.MeshConfig.from_value((1, 2, 4)).resolve(8) == (1, 2, 4)
    with pytest.raises(parallel.ShardingError, match="not divisible"):
        parallel.MeshConfig(data=3).resolve(8)
    with pytest.raises(parallel.ShardingError, match="at most one -1"):
        parallel.MeshConfig(data=-1, fsdp=-1).resolve(8)
    with pytest.raises(parallel.ShardingError, match="needs 16 devices"):
        parallel.MeshConfig(data=2, fsdp=4, tensor=2).resolve(8)
    with pytest.raises(parallel.ShardingError, match="unknown mesh axes"):
        parallel.MeshConfig.from_value({"model": 2})
    with pytest.raises(parallel.ShardingError, match="one size per axis"):
        parallel.MeshConfig.from_value((2, 4))


def test_make_mesh_is_auto_on_every_axis():
    mesh = parallel.make_mesh()
    assert mesh.axis_names == parallel.MESH_AXES
    assert mesh.axis_types == (AxisType.Auto,) * 3
    assert mesh.devices.size == jax.device_count()


def test_one_table_two_modes():
    train, sample = dict(parallel.RULES["train"]), dict(parallel.RULES["sample"])
    assert train.keys() == sample.keys() == {row[0] for row in parallel.RULES_TABLE}
    assert train["embed"] == ("fsdp",) and sample["embed"] == ()  # sampling keeps weights whole per fsdp device
    assert train["heads"] == sample["heads"] == ("tensor",)
    assert train["batch"] == sample["batch"] == ("data", "fsdp")


def test_logical_to_spec_divisibility_and_collisions():
    rules = parallel.RULES["train"]
    mesh = FakeMesh(data=2, fsdp=2, tensor=4)
    spec = parallel.logical_to_spec(("embed", "heads", "head_dim"), rules, mesh, (64, 8, 16))
    assert spec == P("fsdp", "tensor", None)
    # 2 KV heads cannot be split 4 ways: replicated instead.
    spec = parallel.logical_to_spec(("embed", "kv_heads", "head_dim"), rules, mesh, (64, 2, 16))
    assert spec == P("fsdp", None, None)
    # A batch of 2 keeps only the data axis; a batch of 4 uses data x fsdp.
    assert parallel.logical_to_spec(("batch", "seq"), rules, mesh, (2, 7)) == P("data", None)
    assert parallel.logical_to_spec(("batch", "seq"), rules, mesh, (4, 7)) == P(("data", "fsdp"), None)
    # Size-1 mesh axes are dropped; without a mesh the rule is returned as written.
    assert parallel.logical_to_spec(("batch",), rules, FakeMesh(data=1, fsdp=8, tensor=1), (8,)) == P("fsdp")
    assert parallel.logical_to_spec(("vocab", "embed"), rules) == P("tensor", "fsdp")
    with pytest.raises(parallel.ShardingError, match="no rule"):
        parallel.logical_to_spec(("embedding",), rules)
    with pytest.raises(parallel.ShardingError, match="'fsdp' would shard both 'batch' and 'embed'"):
        parallel.logical_to_spec(("batch", "embed"), rules)
    with pytest.raises(parallel.ShardingError, match="do not match"):
        parallel.logical_to_spec(("batch",), rules, mesh, (4, 4))
    with pytest.raises(parallel.ShardingError, match="unknown sharding mode"):
        parallel.logical_sharding(parallel.make_mesh(), "serve")


def test_multihost_hook_is_a_noop_on_one_host():
    assert multihost.initialize() == (0, 1)
    assert not jax.distributed.is_initialized()


@pytest.mark.slow
def test_sharded_checks_on_8_fake_cpu_devices():
    """tests/models/sharded_checks.py in a fresh interpreter: XLA's device count is fixed at import."""
    run_on_8_fake_devices("tests/models/sharded_checks.py")

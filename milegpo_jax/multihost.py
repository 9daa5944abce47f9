"""Multi-host runs: joining the job, each host's share of the work, and moving data between hosts.

One process per host (per TPU VM or GPU node; on CPU, per local process) runs the same program. JAX
arrays sharded over the global mesh span every process; plain Python and NumPy data stays on its
host. An entry point calls ``initialize`` first, to join the job; the trainer uses the rest of this
module for the few places where the two meet:

* ``host_share``: the slice of a global list (task groups, eval tasks) this host plays;
* ``allgather_objects``: every host's picklable object, on every host (rollouts -> global batch);
* ``to_host``: a global array's value as NumPy on every host (metrics, log-probs);
* ``host_local_copy``: a model whose parameters live on this host's devices only, laid out for
  sampling, so each host decodes its own prompts without cross-host traffic per token;
* ``barrier``: wait for every host (e.g. while process 0 writes the warm-start checkpoint).

Single-process runs go through the same calls, which then do nothing or the obvious local thing.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any, TypeVar

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding

from milegpo_jax import parallel

T = TypeVar("T")


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    auto: bool = False,
    local_device_ids: Sequence[int] | None = None,
) -> tuple[int, int]:
    """Join this process to a multi-host JAX job; returns ``(process_index, process_count)``.

    Call it first thing in the entry point, before any other JAX call. Single-host runs pass nothing
    and nothing happens. Pods either pass the coordinator explicitly or ``auto=True`` to let JAX
    detect the cluster (Cloud TPU, SLURM, ...). Calling it again is a no-op. CPU processes exchange
    collectives over gloo; GPU and TPU use their own transports, which that setting does not affect.
    """
    if not jax.distributed.is_initialized() and (auto or coordinator_address is not None):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=coordinator_address,
            num_processes=num_processes,
            process_id=process_id,
            local_device_ids=local_device_ids,
        )
    return jax.process_index(), jax.process_count()


class MultiHostError(RuntimeError):
    """A multi-host layout this code cannot run (with what to change)."""


def is_lead() -> bool:
    """Process 0: the one that writes logs, plots and shared files."""
    return jax.process_index() == 0


def barrier(name: str) -> None:
    """Returns once every process reached the barrier ``name`` (immediately on one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def host_share(items: Sequence[T], index: int | None = None, count: int | None = None) -> list[T]:
    """This host's items: every ``count``-th from ``index`` (defaults: this process among all)."""
    index = jax.process_index() if index is None else index
    count = jax.process_count() if count is None else count
    return list(items[index::count])


def allgather_objects(value: Any) -> list[Any]:
    """``[value of process 0, value of process 1, ...]`` on every process (pickled through a
    padded uint8 all-gather; meant for rollout records, not for large arrays)."""
    if jax.process_count() == 1:
        return [value]
    from jax.experimental import multihost_utils

    payload = np.frombuffer(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)
    sizes = multihost_utils.process_allgather(np.asarray([payload.size], np.int64))
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[: payload.size] = payload
    gathered = multihost_utils.process_allgather(padded)
    return [pickle.loads(gathered[i, : int(sizes[i, 0])].tobytes()) for i in range(gathered.shape[0])]


def to_host(x: Any) -> np.ndarray:
    """The full value of a (possibly multi-host) array as NumPy, on every process."""
    if not isinstance(x, jax.Array) or x.is_fully_addressable:
        return np.asarray(x)
    if x.is_fully_replicated:
        return np.asarray(x.addressable_data(0))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def local_submesh(mesh: Mesh) -> Mesh:
    """This host's devices as a ``(data, fsdp=1, tensor)`` mesh with the global ``tensor`` size.

    Every ``tensor`` group of the global mesh must sit on one host (the usual layout: tensor
    parallelism within a node, data/FSDP across nodes).
    """
    tensor = mesh.shape["tensor"]
    groups = np.asarray(mesh.devices).reshape(-1, tensor)
    owners = [{device.process_index for device in group} for group in groups]
    if any(len(hosts) > 1 for hosts in owners):
        raise MultiHostError(
            f"mesh {dict(mesh.shape)}: a tensor-parallel group spans several hosts; keep mesh.tensor at most "
            f"the devices per host ({jax.local_device_count()}) so each host can sample on its own devices"
        )
    mine = [group for group, hosts in zip(groups, owners) if hosts == {jax.process_index()}]
    devices = np.asarray(mine).reshape(len(mine), 1, tensor)
    return Mesh(devices, parallel.MESH_AXES, axis_types=(jax.sharding.AxisType.Auto,) * len(parallel.MESH_AXES))


def host_local_copy(model: Any, mesh: Mesh) -> Any:
    """A copy of ``model`` (parameters on the global ``mesh``) for sampling on this host alone.

    The parameters are first laid out by the ``sample`` rules on the global mesh (tensor-sharded,
    whole across data/FSDP), so each host already holds a complete tensor-parallel copy; those local
    shards then become arrays on the host's own sub-mesh, without another copy.
    """
    from flax import nnx

    local = local_submesh(mesh)
    global_sample = parallel.logical_sharding(mesh, "sample")
    local_sample = parallel.logical_sharding(local, "sample")
    graphdef, state = nnx.split(model)
    placed = jax.device_put(state, parallel.state_shardings(state, global_sample))

    def relocate(variable):
        value = variable.get_value()
        target = NamedSharding(local, parallel.variable_sharding(variable, local_sample).spec)
        by_device = {shard.device: shard.data for shard in value.addressable_shards}
        pieces = [by_device[device] for device in local.devices.flat]
        return variable.replace(jax.make_array_from_single_device_arrays(value.shape, target, pieces))

    state = jax.tree.map(relocate, placed, is_leaf=lambda x: isinstance(x, nnx.Variable))
    copy = nnx.merge(graphdef, state)
    copy.sharding = local_sample
    return copy

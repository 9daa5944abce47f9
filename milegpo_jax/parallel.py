"""Device mesh and logical-to-mesh sharding rules (multi-host start-up: ``multihost.initialize``).

Models never name mesh axes. Every parameter carries logical axis names in its ``logical_axes``
metadata (``("embed", "heads", "head_dim")``) and every activation is constrained by logical names
(``("batch", "seq", "act_embed")``). ``RULES_TABLE`` below is the one place that maps those names onto
the mesh axes, with a column per mode:

* ``train``: FSDP over ``fsdp`` (the ``embed`` dimension of every weight), tensor parallelism over
  ``tensor`` (heads, MLP width, vocabulary), batch over ``data`` x ``fsdp``;
* ``sample``: the same tensor parallelism, but weights are whole on every ``fsdp`` device (decoding
  would otherwise all-gather every weight on every token); ``fsdp`` then acts as more data parallelism.

A mesh axis is dropped from a dimension it does not divide (e.g. 2 KV heads on 4 tensor devices are
replicated rather than split), so one rules table serves every model size and mesh.

Meshes are made with ``AxisType.Auto`` on every axis (GSPMD-style propagation; jax 0.10's
``make_mesh`` would otherwise default to Explicit, docs/architecture.md §6.4).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

# the mesh shape and its errors are jax-free, so the training config can hold one without jax
from milegpo_jax.mesh_shape import MESH_AXES, MeshConfig, ShardingError

MODES = ("train", "sample")

# logical name -> (mesh axes in train mode, mesh axes in sample mode). None: not sharded.
RULES_TABLE: tuple[tuple[str, Any, Any], ...] = (
    # activations and the KV cache
    ("batch", ("data", "fsdp"), ("data", "fsdp")),
    ("seq", None, None),
    ("cache_seq", None, None),
    ("act_embed", None, None),
    ("act_heads", "tensor", "tensor"),
    ("act_kv_heads", "tensor", "tensor"),
    ("act_mlp", "tensor", "tensor"),
    ("act_vocab", "tensor", "tensor"),
    # parameters
    ("layers", None, None),
    ("vocab", "tensor", "tensor"),
    ("embed", "fsdp", None),
    ("heads", "tensor", "tensor"),
    ("kv_heads", "tensor", "tensor"),
    ("head_dim", None, None),
    ("mlp", "tensor", "tensor"),
    ("norm", None, None),
)

Rules = tuple[tuple[str, tuple[str, ...]], ...]


def _as_axes(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


RULES: dict[str, Rules] = {
    mode: tuple((row[0], _as_axes(row[1 + column])) for row in RULES_TABLE) for column, mode in enumerate(MODES)
}


# --------------------------------------------------------------------------------------------- mesh


def make_mesh(config: MeshConfig | Mapping[str, int] | Sequence[int] | None = None, devices=None) -> Mesh:
    """A ``(data, fsdp, tensor)`` mesh over ``devices`` (default: all), every axis ``AxisType.Auto``."""
    devices = list(jax.devices() if devices is None else devices)
    shape = MeshConfig.from_value(config).resolve(len(devices))
    return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES), devices=devices)


# ------------------------------------------------------------------------------------------- rules


def logical_to_spec(
    logical_axes: Sequence[str | None],
    rules: Rules,
    mesh: Mesh | None = None,
    shape: Sequence[int] | None = None,
) -> PartitionSpec:
    """PartitionSpec for a tensor whose dimensions have these logical names.

    With ``mesh`` and ``shape``, a dimension keeps the longest prefix of its mesh axes whose total size
    divides it (the rest of that dimension is replicated). A mesh axis may shard only one dimension.
    """
    table = dict(rules)
    if shape is not None and len(shape) != len(logical_axes):
        raise ShardingError(f"logical axes {tuple(logical_axes)} do not match a tensor of shape {tuple(shape)}")
    entries: list[Any] = []
    used: dict[str, str] = {}
    for dim, name in enumerate(logical_axes):
        if name is None:
            entries.append(None)
            continue
        if name not in table:
            raise ShardingError(f"logical axis {name!r} has no rule; known: {sorted(table)}")
        axes = table[name]
        if mesh is not None:
            axes = tuple(a for a in axes if mesh.shape.get(a, 1) > 1)
            if shape is not None:
                kept: tuple[str, ...] = ()
                for axis in axes:
                    if shape[dim] % (math.prod(mesh.shape[a] for a in kept) * mesh.shape[axis]):
                        break
                    kept += (axis,)
                axes = kept
        for axis in axes:
            if axis in used:
                raise ShardingError(
                    f"mesh axis {axis!r} would shard both {used[axis]!r} and {name!r} in {tuple(logical_axes)}"
                )
            used[axis] = name
        entries.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return PartitionSpec(*entries)


@dataclasses.dataclass(frozen=True)
class LogicalSharding:
    """A mesh plus one mode's rules: what a model holds to place its tensors (hashable, so static)."""

    mesh: Mesh
    rules: Rules

    def spec(self, logical_axes: Sequence[str | None], shape: Sequence[int] | None = None) -> PartitionSpec:
        return logical_to_spec(logical_axes, self.rules, self.mesh, shape)

    def named(self, logical_axes: Sequence[str | None], shape: Sequence[int] | None = None) -> NamedSharding:
        return NamedSharding(self.mesh, self.spec(logical_axes, shape))

    def constrain(self, x: jax.Array, logical_axes: Sequence[str | None]) -> jax.Array:
        return jax.lax.with_sharding_constraint(x, self.named(logical_axes, x.shape))


def logical_sharding(mesh: Mesh, mode: str = "train") -> LogicalSharding:
    if mode not in RULES:
        raise ShardingError(f"unknown sharding mode {mode!r}; choose one of {MODES}")
    return LogicalSharding(mesh, RULES[mode])


def constrain(x: jax.Array, logical_axes: Sequence[str | None], sharding: LogicalSharding | None) -> jax.Array:
    """Sharding constraint by logical names; a no-op without a mesh (single device)."""
    return x if sharding is None else sharding.constrain(x, logical_axes)


def _is_variable(x: Any) -> bool:
    from flax import nnx

    return isinstance(x, nnx.Variable)


def variable_sharding(variable: Any, sharding: LogicalSharding) -> NamedSharding:
    """Target sharding of one NNX variable from its ``logical_axes`` metadata."""
    axes = variable.get_metadata().get("logical_axes")
    if axes is None:
        raise ShardingError(f"variable of shape {variable.shape} has no logical_axes metadata")
    return sharding.named(axes, variable.shape)


def state_shardings(state: Any, sharding: LogicalSharding) -> Any:
    """The pytree of ``NamedSharding`` for an NNX state (same structure; for jit/device_put)."""
    return jax.tree.map(
        lambda v: v.replace(variable_sharding(v, sharding)), state, is_leaf=_is_variable
    )


def shard_model(model: Any, mesh: Mesh, mode: str = "train") -> Any:
    """A copy of ``model`` with its parameters placed by ``mode``'s rules and its activations
    constrained by them (e.g. the trainer's model re-laid out for the sampler)."""
    from flax import nnx

    sharding = logical_sharding(mesh, mode)
    graphdef, state = nnx.split(model)
    state = jax.device_put(state, state_shardings(state, sharding))
    placed = nnx.merge(graphdef, state)
    placed.sharding = sharding
    return placed

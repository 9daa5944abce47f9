"""A ``CreditBatch`` packed into planes, for a batch kept on the device, and unpacked inside the program.

The fields of one type and shape are stacked into one array: 8 arrays instead of up to 21 to hold
on the device. A batch from the host passes goes to the jitted call unpacked, since stacking it
costs more there than the arguments it saves (docs/credit-implementation.md §1.1). Which fields a plane holds
follows from the batch's host parts alone (each field names its plane in ``passes.ROWS`` and
``passes.PASSES``), which the packed batch carries as static data (part of
the compiled program's key); inside the program ``unpack`` gives the named ``CreditBatch`` back, so
that no program ever addresses a plane.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from milegpo_jax.credit.batch import CreditBatch
from milegpo_jax.credit.passes import ALL_PARTS, fields_of


@dataclasses.dataclass(frozen=True)
class PackedBatch:
    step_ints: np.ndarray  # int32 [G, P, K, T], planes ``plane_fields("step_ints", parts)``
    step_flags: np.ndarray  # bool [G, Q, K, T], planes ``plane_fields("step_flags", parts)``
    reward: np.ndarray  # float32 [G, K, T]
    traj_mask: np.ndarray  # bool [G, K]
    last_state: np.ndarray  # int32 [G, K]
    node_ints: np.ndarray  # int32 [G, R, N], planes ``plane_fields("node_ints", parts)`` (node_mask as 1/0)
    edge_ends: np.ndarray | None  # int32 [G, 2, E]: edge_src, edge_dst (None without the edges)
    edge_mask: np.ndarray | None  # bool [G, E]
    parts: frozenset[str]  # the batch's host parts (static)


jax.tree_util.register_dataclass(
    PackedBatch,
    data_fields=["step_ints", "step_flags", "reward", "traj_mask", "last_state", "node_ints", "edge_ends", "edge_mask"],
    meta_fields=["parts"],
)


# The stacked planes, each of one dtype, with the axes of its fields after the plane axis.
PLANES = {"step_ints": (np.int32, 2), "step_flags": (np.bool_, 2), "node_ints": (np.int32, 1), "edge_ends": (np.int32, 1)}
# A field of no plane is a packed array of its own (``PackedBatch`` names each).
_ALONE = tuple(field.name for field in fields_of(ALL_PARTS) if field.plane is None)
if not set(_ALONE) <= {f.name for f in dataclasses.fields(PackedBatch)} or any(
    field.plane not in (None, *PLANES) for field in fields_of(ALL_PARTS)
):
    raise ValueError("planes: a host field names a plane of PLANES, or a PackedBatch array of its own")


def plane_fields(plane: str, parts: frozenset[str]) -> tuple[str, ...]:
    """The fields in ``plane`` of a batch with ``parts``, in their order there."""
    return tuple(field.name for field in fields_of(parts) if field.plane == plane)


def pack(batch: CreditBatch) -> PackedBatch:
    """The planes of ``batch`` (numpy on the host; jnp where its fields are already JAX arrays)."""
    stack = jnp.stack if isinstance(batch.src, jax.Array) else np.stack
    parts = batch.parts

    def planes(names, dtype):
        stacked = stack([getattr(batch, name) for name in names], axis=1)  # one copy; node_mask promotes to int32
        return stacked if stacked.dtype == dtype else stacked.astype(dtype)

    stacked = {plane: planes(names, dtype) if (names := plane_fields(plane, parts)) else None
               for plane, (dtype, _) in PLANES.items()}
    return PackedBatch(**stacked, **{name: getattr(batch, name) for name in _ALONE}, parts=parts)


def unpack(packed: PackedBatch) -> CreditBatch:
    """The named batch of ``packed`` (planes indexed from the end: [G, P, K, T] or one group's [P, K, T])."""
    parts = packed.parts
    fields = {name: getattr(packed, name) for name in _ALONE}
    for plane, (dtype, axes) in PLANES.items():
        members = [field for field in fields_of(parts) if field.plane == plane]
        for i, field in enumerate(members):
            fields[field.name] = getattr(packed, plane)[(..., i, *(slice(None),) * axes)]
        for field in members:  # a flag kept in an int plane (node_mask) back to bool
            if field.dtype == "bool" and dtype is not np.bool_:
                fields[field.name] = fields[field.name] != 0
    return CreditBatch(**fields)

"""A ``CreditBatch`` packed into planes, for a batch kept on the device, and unpacked inside the program.

The fields of one type and shape are stacked into one array: 8 arrays instead of up to 21 to hold
on the device. A batch from the host passes goes to the jitted call unpacked, since stacking it
costs more there than the arguments it saves (docs/credit.md §10.1). Which fields a plane holds
follows from the batch's host parts alone, which the packed batch carries as static data (part of
the compiled program's key); inside the program ``unpack`` gives the named ``CreditBatch`` back, so
that no program ever addresses a plane.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from milegpo_jax.credit.batch import CreditBatch


@dataclasses.dataclass(frozen=True)
class PackedBatch:
    step_ints: np.ndarray  # int32 [G, P, K, T], planes ``step_int_fields(parts)``
    step_flags: np.ndarray  # bool [G, Q, K, T], planes ``step_flag_fields(parts)``
    reward: np.ndarray  # float32 [G, K, T]
    traj_mask: np.ndarray  # bool [G, K]
    last_state: np.ndarray  # int32 [G, K]
    node_ints: np.ndarray  # int32 [G, R, N], planes ``node_fields(parts)`` (node_mask as 1/0)
    edge_ends: np.ndarray | None  # int32 [G, 2, E]: edge_src, edge_dst (None without the edges)
    edge_mask: np.ndarray | None  # bool [G, E]
    parts: frozenset[str]  # the batch's host parts (static)


jax.tree_util.register_dataclass(
    PackedBatch,
    data_fields=["step_ints", "step_flags", "reward", "traj_mask", "last_state", "node_ints", "edge_ends", "edge_mask"],
    meta_fields=["parts"],
)


def step_int_fields(parts: frozenset[str]) -> tuple[str, ...]:
    return ("src", "dst", "action", *(("edge",) if "edges" in parts else ()),
            *(("state_action", "history2", "history3") if "clusters" in parts else ()))


def step_flag_fields(parts: frozenset[str]) -> tuple[str, ...]:
    return ("valid", "step_mask", "milestone", *(("first_use",) if "edges" in parts else ()),
            *(("first_visit",) if "clusters" in parts else ()))


def node_fields(parts: frozenset[str]) -> tuple[str, ...]:
    return ("node_mask", *(("sink_hops",) if "hops" in parts else ()), *(("region",) if "regions" in parts else ()))


def pack(batch: CreditBatch) -> PackedBatch:
    """The planes of ``batch`` (numpy on the host; jnp where its fields are already JAX arrays)."""
    stack = jnp.stack if isinstance(batch.src, jax.Array) else np.stack
    parts = batch.parts

    def planes(names, dtype):
        stacked = stack([getattr(batch, name) for name in names], axis=1)  # one copy; node_mask promotes to int32
        return stacked if stacked.dtype == dtype else stacked.astype(dtype)

    edges = "edges" in parts
    return PackedBatch(
        step_ints=planes(step_int_fields(parts), np.int32),
        step_flags=planes(step_flag_fields(parts), np.bool_),
        reward=batch.reward, traj_mask=batch.traj_mask, last_state=batch.last_state,
        node_ints=planes(node_fields(parts), np.int32),
        edge_ends=planes(("edge_src", "edge_dst"), np.int32) if edges else None,
        edge_mask=batch.edge_mask if edges else None,
        parts=parts,
    )


def unpack(packed: PackedBatch) -> CreditBatch:
    """The named batch of ``packed`` (planes indexed from the end: [G, P, K, T] or one group's [P, K, T])."""
    parts = packed.parts
    fields = {name: packed.step_ints[..., i, :, :] for i, name in enumerate(step_int_fields(parts))}
    fields.update({name: packed.step_flags[..., i, :, :] for i, name in enumerate(step_flag_fields(parts))})
    fields.update({name: packed.node_ints[..., i, :] for i, name in enumerate(node_fields(parts))})
    fields["node_mask"] = fields["node_mask"] != 0
    if "edges" in parts:
        fields.update(edge_src=packed.edge_ends[..., 0, :], edge_dst=packed.edge_ends[..., 1, :], edge_mask=packed.edge_mask)
    return CreditBatch(reward=packed.reward, traj_mask=packed.traj_mask, last_state=packed.last_state, **fields)

"""The host passes that build a batch's structure beyond the rows: one ``HostPass`` per module, from
which everything else about a part follows (docs/credit-implementation.md §1.1, §4).

Every batch has the rows (``ROWS``): the node numbering of ``nodes.py``, padded by ``batch.py``. The
other parts are built only when an estimator reads them (its ``EstimatorSpec.reads``,
``registry.host_parts``), each by the pass of its own module, described in ``PASSES``: its name, the
parts it is built from, the ``CreditBatch`` fields it fills (with the plane ``planes.pack`` stacks
each into) and its build. ``batch.CreditBatch``'s fields, the part names a spec may read
(``registry.HOST_PARTS``), the planes (``planes.py``) and the passes ``batch.padded_batch`` runs, in
this order, all follow from the two tables. ``table.py`` is the open-addressing table of pairs the
edge pass numbers with.

A build is named by ``"module:function"``, as the registry names programs, and imported by
``batch.py``, so that this table, and the registry and config that read it, import no numba (half a
second).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import TYPE_CHECKING, NamedTuple

from milegpo_jax.shapes import bucket_size

if TYPE_CHECKING:
    import numpy as np

    from milegpo_jax.credit.passes.nodes import NodeNumbering


class Field(NamedTuple):
    """One ``CreditBatch`` field."""

    name: str
    dtype: str  # "int32", "bool" or "float32"
    plane: str | None  # the plane of ``planes.PLANES`` it is stacked into; None: a packed array of its own
    about: str  # its shape and meaning


class PassInput(NamedTuple):
    """What a pass builds from."""

    fields: dict[str, np.ndarray]  # the batch so far: the rows and every part before this one in PASSES
    shape: tuple[int, int, int, int]  # G, K, T, N
    lengths: np.ndarray  # int64 [trajectories] steps per trajectory (trajectory-major, as the columns)
    group_sizes: np.ndarray  # int64 [groups] trajectories per group
    nodes: NodeNumbering  # the node ids of every step, unpadded
    place: np.ndarray  # int64 [S] each step's flat index in [G, K, T]
    bucket: bool  # a size the pass adds is padded with ``padded_size`` and this flag
    min_edges: int  # the caller's floor of E, the edge pass's own size


@dataclasses.dataclass(frozen=True)
class HostPass:
    name: str  # the part's name in ``EstimatorSpec.reads``
    needs: tuple[str, ...]  # the parts it is built from (before it in PASSES)
    fields: tuple[Field, ...]  # the ``CreditBatch`` fields it fills (None in a batch built without it)
    build: str  # "module:function": ``f(PassInput) -> {field name: padded array}``


ROWS = (
    Field("src", "int32", "step_ints", "[G, K, T] node id of s_t"),
    Field("dst", "int32", "step_ints", "[G, K, T] node id of s_{t+1} (SINK on a successful final step)"),
    Field("action", "int32", "step_ints", "[G, K, T] per-group action id"),
    Field("reward", "float32", None, "[G, K, T] env reward of the step"),
    Field("valid", "bool", "step_flags", "[G, K, T] format validity of the response"),
    Field("step_mask", "bool", "step_flags", "[G, K, T] real step"),
    Field("milestone", "bool", "step_flags", "[G, K, T] the step completes the next env milestone (BEACON; "
          "False if unrecorded)"),
    Field("traj_mask", "bool", None, "[G, K] real trajectory"),
    Field("last_state", "int32", None, "[G, K] s_T: next state of the trajectory's last step"),
    Field("node_mask", "bool", "node_ints", "[G, N] real node (the sink only if the group has a success)"),
)

_HERE = "milegpo_jax.credit.passes"
PASSES: tuple[HostPass, ...] = (
    HostPass("edges", (), (
        Field("edge", "int32", "step_ints", "[G, K, T] the step's edge id (E on padded rows)"),
        Field("first_use", "bool", "step_flags", "[G, K, T] the step is its trajectory's first use of its edge"),
        Field("edge_src", "int32", "edge_ends", "[G, E] u of each distinct edge (0 on padded edges)"),
        Field("edge_dst", "int32", "edge_ends", "[G, E] v of each distinct edge"),
        Field("edge_mask", "bool", None, "[G, E] real edge"),
    ), f"{_HERE}.edges:build"),
    HostPass("hops", ("edges",), (
        Field("sink_hops", "int32", "node_ints", "[G, N] hops to the sink; -1 if unreachable or no success"),
    ), f"{_HERE}.hops:build"),
    HostPass("regions", (), (
        Field("region", "int32", "node_ints", "[G, N] MVPO's loop-body region: the least node id of the set"),
    ), f"{_HERE}.regions:build"),
    HostPass("clusters", (), (
        Field("state_action", "int32", "step_ints", "[G, K, T] ECPO's (s_t, action) cluster; K·T on padded rows"),
        Field("history2", "int32", "step_ints", "[G, K, T] HGPO's order-2 history id; K·T where t = 0 or padded"),
        Field("history3", "int32", "step_ints", "[G, K, T] HGPO's order-3 history id; K·T where t < 2"),
        Field("first_visit", "bool", "step_flags", "[G, K, T] s_{t+1} is none of s_0..s_t (ProGPO's novelty)"),
    ), f"{_HERE}.clusters:build"),
)

# Derived: the part names and the fields each fills.
PART_FIELDS = {host_pass.name: tuple(field.name for field in host_pass.fields) for host_pass in PASSES}
ALL_PARTS = frozenset(PART_FIELDS)


def _check_tables() -> None:
    names = [field.name for field in ROWS] + [name for fields in PART_FIELDS.values() for name in fields]
    if len(set(names)) != len(names) or len(ALL_PARTS) != len(PASSES):
        raise ValueError("host passes: every part and every field named once")
    for i, host_pass in enumerate(PASSES):
        if not set(host_pass.needs) <= {earlier.name for earlier in PASSES[:i]}:
            raise ValueError(f"host pass {host_pass.name}: the parts it needs come before it in PASSES")


_check_tables()


def with_needed(parts: Collection[str]) -> frozenset[str]:
    """``parts`` and the parts they are built from."""
    unknown = set(parts) - ALL_PARTS
    if unknown:
        raise ValueError(f"unknown host parts {sorted(unknown)}: choose from {sorted(ALL_PARTS)}")
    parts = set(parts)
    for host_pass in reversed(PASSES):  # what a part needs comes before it
        if host_pass.name in parts:
            parts.update(host_pass.needs)
    return frozenset(parts)


def fields_of(parts: Collection[str]) -> tuple[Field, ...]:
    """The batch's fields with ``parts``: the rows, then each part's, in PASSES order."""
    return ROWS + tuple(field for host_pass in PASSES if host_pass.name in parts for field in host_pass.fields)


def padded_size(size: int, minimum: int, bucket: bool) -> int:
    """A dimension of ``size`` padded to at least ``minimum``: to its power-of-two bucket, or not beyond."""
    return bucket_size(size, minimum) if bucket else max(size, minimum)

"""The device mesh's shape: its axis names and ``MeshConfig`` (sizes, one of them "the rest").

Apart from ``parallel`` because the training config holds a ``MeshConfig`` and must import without
jax (docs/architecture.md §3); ``parallel`` builds the mesh itself.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

MESH_AXES = ("data", "fsdp", "tensor")


class ShardingError(ValueError):
    """A bad mesh request or a logical-axis spec the rules cannot place."""


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """Mesh shape over ``MESH_AXES``; one entry may be -1 to take all remaining devices."""

    data: int = 1
    fsdp: int = -1
    tensor: int = 1

    @classmethod
    def from_value(cls, value: MeshConfig | Mapping[str, int] | Sequence[int] | None) -> MeshConfig:
        """Accepts a MeshConfig, a ``{"data": .., "fsdp": .., "tensor": ..}`` mapping or a 3-sequence."""
        if value is None:
            return cls()
        if isinstance(value, MeshConfig):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - set(MESH_AXES)
            if unknown:
                raise ShardingError(f"unknown mesh axes {sorted(unknown)}; the axes are {MESH_AXES}")
            return cls(**{k: int(v) for k, v in value.items()})
        sizes = tuple(value)
        if len(sizes) != len(MESH_AXES):
            raise ShardingError(f"mesh shape {sizes} needs one size per axis {MESH_AXES}")
        return cls(*(int(s) for s in sizes))

    def resolve(self, num_devices: int) -> tuple[int, int, int]:
        sizes = (self.data, self.fsdp, self.tensor)
        fill = [i for i, s in enumerate(sizes) if s == -1]
        if len(fill) > 1 or any(s == 0 or s < -1 for s in sizes):
            raise ShardingError(f"mesh {dict(zip(MESH_AXES, sizes))}: sizes must be positive, at most one -1")
        known = math.prod(s for s in sizes if s != -1)
        if fill:
            if num_devices % known:
                raise ShardingError(
                    f"mesh {dict(zip(MESH_AXES, sizes))}: {num_devices} devices are not divisible by {known}"
                )
            sizes = tuple(num_devices // known if s == -1 else s for s in sizes)
        if math.prod(sizes) != num_devices:
            raise ShardingError(
                f"mesh {dict(zip(MESH_AXES, sizes))} needs {math.prod(sizes)} devices, {num_devices} available"
            )
        return sizes  # type: ignore[return-value]

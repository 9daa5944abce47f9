"""The TPU chips ``experiments.aot`` compiles for: their HBM and peaks, the slice shapes a topology may
name (checked before libtpu sees it), and the libtpu set-up that must run before jax is imported.

Imports no jax: ``setup_libtpu`` has to run first.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import re
import sys
from pathlib import Path

from experiments.chips import TPU_CHIPS

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3
LIBTPU_VERSION = "0.0.42.1"  # the libtpu wheel jax[tpu]==0.10.2 pins

# HBM per chip in GiB, and the roofline's peak dense bf16 FLOP/s and HBM bytes/s per chip, by generation:
# the chip table experiments.bench.device reads too (experiments/chips.py, with its sources)
HBM_GIB = {generation: chip.hbm_gib for generation, chip in TPU_CHIPS.items()}
PEAK = {generation: (chip.peak_tflops * 1e12, chip.bandwidth_gbs * 1e9) for generation, chip in TPU_CHIPS.items()}


@dataclasses.dataclass(frozen=True)
class TopologyRule:
    dims: int
    example: str
    shapes: tuple[tuple[int, ...], ...] | None = None  # the published slice shapes (2-D generations)
    max_side: int = 0  # 3-D generations: the largest side and chip count of a slice
    max_chips: int = 0


# Slice shapes from the Cloud TPU docs (cloud.google.com/tpu/docs/{v5e,v5p,v6e}, "supported
# configurations"): v5e and v6e come in fixed 2-D shapes up to 16x16; v5p is a 3-D torus whose sides
# are 1, 2 or multiples of 4 (up to 8,960 chips in a 16x20x28 pod).
_PLANE = ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16))
TOPOLOGY_RULES = {
    "v5e": TopologyRule(2, "v5e:4x4", shapes=_PLANE),
    "v5p": TopologyRule(3, "v5p:2x2x2", max_side=28, max_chips=8960),
    "v6e": TopologyRule(2, "v6e:2x2", shapes=_PLANE),
}
TOPOLOGY_EXAMPLES = ("v5e:4x4", "v5p:2x2x2", "v6e:2x2")
# Known generations this tool cannot compile for, and why
UNSUPPORTED = {
    "v4": "libtpu describes a v4 slice with one device per TensorCore, and jax builds meshes for TPU v4 "
          "and later only with one device per chip (megacore), so no mesh can be made; use v5e, v5p or v6e",
}
EXIT_DOES_NOT_FIT = 1
EXIT_USAGE = 2


class AotError(Exception):
    """A bad request (topology, model, mesh): printed, exit status 2."""


def setup_libtpu() -> str:
    """Makes ``import libtpu`` work before jax is imported; returns where libtpu comes from."""
    if "jax" in sys.modules:  # too late: jax has chosen its plugins
        print("aot: warning: jax was imported before the libtpu set-up", file=sys.stderr)
    # Compiling for a topology needs no TPU: stay on CPU unless told otherwise, and tell libtpu it is not
    # on a TPU VM so that it neither queries the metadata server nor warns about the missing host names.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # libtpu otherwise takes a lockfile of its own in the temp folder, and a second compiling process (another aot run, a test)
    # fails with "Internal error when accessing libtpu multi-process lockfile"; nothing here opens a TPU.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    if importlib.util.find_spec("libtpu") is not None:
        return "installed"
    directory = os.environ.get("MILEGPO_LIBTPU_DIR") or str(ROOT / ".libtpu")
    sys.path.insert(0, directory)
    importlib.invalidate_caches()
    if importlib.util.find_spec("libtpu") is None:
        print(
            f"aot: error: libtpu (the TPU compiler) is not installed and not in {directory}. Either "
            f'`pip install "jax[tpu]==0.10.2"` (libtpu=={LIBTPU_VERSION}) or run `source experiments/bootstrap.sh`, '
            f"which installs it into {ROOT / '.libtpu'} (set MILEGPO_LIBTPU_DIR to use another folder)",
            file=sys.stderr,
        )
        sys.exit(EXIT_USAGE)
    return directory


def hbm_gib(topology: str) -> tuple[str, int]:
    generation = check_topology(topology)[0]
    return generation, HBM_GIB[generation]


def check_topology(topology: str) -> tuple[str, tuple[int, ...]]:
    """``(generation, chip grid)`` of a topology name that ``TOPOLOGY_RULES`` allows, else AotError
    (checked before libtpu sees it: libtpu aborts the process on a grid it cannot build)."""
    match = re.fullmatch(r"([a-z0-9]+):(\d+(?:x\d+)*)", topology.strip().lower())
    if not match:
        raise AotError(f"--topology {topology!r}: expected GENERATION:AxB[xC], e.g. {', '.join(TOPOLOGY_EXAMPLES)}")
    generation, grid = match.group(1), tuple(int(n) for n in match.group(2).split("x"))
    if generation in UNSUPPORTED:
        raise AotError(f"--topology {topology!r}: not supported: {UNSUPPORTED[generation]}")
    if generation not in TOPOLOGY_RULES:
        raise AotError(f"--topology {topology!r}: unknown TPU generation {generation!r}; known: {', '.join(TOPOLOGY_RULES)}")
    rule = TOPOLOGY_RULES[generation]
    if len(grid) != rule.dims:
        raise AotError(f"--topology {topology!r}: {generation} slices are {rule.dims}-D grids, e.g. {rule.example}")
    if rule.shapes is not None and grid not in rule.shapes:
        shapes = ", ".join("x".join(map(str, shape)) for shape in rule.shapes)
        raise AotError(f"--topology {topology!r}: {generation} slices come in {shapes}")
    if rule.shapes is None:
        chips = math.prod(grid)
        bad = [n for n in grid if not (n in (1, 2) or n % 4 == 0) or n > rule.max_side]
        if bad or chips > rule.max_chips:
            raise AotError(f"--topology {topology!r}: {generation} grids have sides of 1, 2 or a multiple of 4 up to "
                           f"{rule.max_side}, at most {rule.max_chips} chips, e.g. {rule.example}")
    return generation, grid

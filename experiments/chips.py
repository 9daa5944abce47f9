"""The accelerator chips the experiments know, in one table: peak dense bf16 FLOP/s and HBM bandwidth
per chip, and for the TPU generations the HBM per chip.

``experiments.bench.device`` looks a device up by its ``device_kind`` (``device_spec``) for its
rooflines; ``experiments.aot`` takes each TPU generation's HBM and peaks (``TPU_CHIPS``) for its memory
check and step-time floor. Imports no jax: aot reads it before libtpu is set up.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    name: str
    peak_tflops: float  # bf16 dense (no 2:4 sparsity), per chip
    bandwidth_gbs: float  # HBM, GB/s (1e9 bytes/s), per chip
    source: str
    hbm_gib: int = 0  # HBM per chip in GiB; 0 where not recorded (the GPUs: aot compiles for TPUs only)


_NVIDIA = "NVIDIA datasheet"
_TPU_DOCS = "Cloud TPU docs"
# TPUs, by the generation a topology names ("v5e:4x4"): "Peak compute per chip (bf16)", "HBM bandwidth" and
# "HBM2 capacity" / "HBM capacity" from cloud.google.com/tpu/docs/{v4,v5e,v5p,v6e}: v4 275 TFLOP/s, 1,200 GB/s;
# v5e 197, 819; v5p 459, 2,765; v6e (Trillium) 918, 1,640. The pages write the capacity in GB; the TPU
# compiler's own out-of-memory message ("exceeds available HBM (15.75G)" on v5e, a little reserved) shows
# they are GiB.
TPU_CHIPS = {
    "v4": DeviceSpec("TPU v4", 275.0, 1200.0, _TPU_DOCS, hbm_gib=32),
    "v5e": DeviceSpec("TPU v5e", 197.0, 819.0, _TPU_DOCS, hbm_gib=16),
    "v5p": DeviceSpec("TPU v5p", 459.0, 2765.0, _TPU_DOCS, hbm_gib=95),
    "v6e": DeviceSpec("TPU v6e", 918.0, 1640.0, _TPU_DOCS, hbm_gib=32),
}

# Matched in order against device_kind (case-insensitive; every listed fragment must occur), most
# specific first. NVIDIA datasheets quote bf16 Tensor Core FLOP/s with 2:4 sparsity; dense is half:
# H100/H200 SXM 1,979 -> 989.5 TFLOP/s, H100 PCIe 1,513 -> 756.5, H100/H200 NVL 1,671 -> 835.5,
# A100 312 dense. HBM: H200 4.8 TB/s, H100 SXM 3.35, H100 NVL 3.9, H100 PCIe 2.0, A100 80GB SXM 2.039,
# A100 80GB PCIe 1.935, A100 40GB 1.555 (NVIDIA H200, H100 and A100 Tensor Core GPU datasheets).
# JAX names v5e "TPU v5 lite", v6e "TPU v6 lite", v5p "TPU v5" (newer runtimes: "TPU v5p").
DEVICE_SPECS: tuple[tuple[tuple[str, ...], DeviceSpec | None], ...] = (
    (("gh200",), None),  # Grace Hopper: H100-class compute, its own HBM; not "H200" (use the flags)
    (("h200", "nvl"), DeviceSpec("NVIDIA H200 NVL", 835.5, 4800.0, _NVIDIA)),
    (("h200",), DeviceSpec("NVIDIA H200 SXM", 989.5, 4800.0, _NVIDIA)),
    (("h100", "nvl"), DeviceSpec("NVIDIA H100 NVL", 835.5, 3900.0, _NVIDIA)),
    (("h100", "pcie"), DeviceSpec("NVIDIA H100 PCIe", 756.5, 2000.0, _NVIDIA)),
    (("h100",), DeviceSpec("NVIDIA H100 SXM", 989.5, 3350.0, _NVIDIA)),
    (("a100", "80gb", "pcie"), DeviceSpec("NVIDIA A100 80GB PCIe", 312.0, 1935.0, _NVIDIA)),
    (("a100", "80gb"), DeviceSpec("NVIDIA A100 80GB SXM", 312.0, 2039.0, _NVIDIA)),
    (("a100",), DeviceSpec("NVIDIA A100 40GB", 312.0, 1555.0, _NVIDIA)),
    (("tpu v4",), TPU_CHIPS["v4"]),
    (("tpu v5 lite",), TPU_CHIPS["v5e"]),
    (("tpu v5e",), TPU_CHIPS["v5e"]),
    (("tpu v5",), TPU_CHIPS["v5p"]),  # "TPU v5" and "TPU v5p"
    (("tpu v6",), TPU_CHIPS["v6e"]),  # "TPU v6 lite" and "TPU v6e"
)


def device_spec(device_kind: str) -> DeviceSpec | None:
    """The table's entry for a ``jax.Device.device_kind``, or None (CPU, or a chip not listed)."""
    kind = device_kind.lower()
    for fragments, spec in DEVICE_SPECS:
        if all(fragment in kind for fragment in fragments):
            return spec
    return None

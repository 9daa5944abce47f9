"""Per-chip memory of a compiled program: the ``Report`` row ``experiments.aot`` prints, and the compile
that fills it (an out-of-HBM refusal becomes the row's error instead of an exception)."""

from __future__ import annotations

import dataclasses
import math
import re
import time

from experiments.aot.topologies import GIB


@dataclasses.dataclass
class Report:
    what: str
    shapes: str
    arguments: int = 0
    outputs: int = 0
    aliased: int = 0
    temporaries: int = 0
    host_temporaries: int = 0  # in the host's memory, not HBM: residuals model.remat="offload" moves off the chip
    code: int = 0
    compile_s: float = 0.0
    error: str = ""  # the compiler refused (e.g. out of HBM) or arguments alone exceed HBM
    attention: str = ""  # the form the program's attention takes (train; prefill: a kernel or dense chunks)
    cost: dict = dataclasses.field(default_factory=dict)  # FLOPs, bytes and roofline per chip (train, prefill)

    @property
    def total(self) -> int:
        """Peak per-chip bytes: live arguments + outputs (less what is donated into them) + scratch + code."""
        return self.arguments + self.outputs - self.aliased + self.temporaries + self.code

    def fits(self, hbm: int) -> bool:
        return not self.error and self.total <= hbm

    def line(self, hbm: int) -> str:
        def g(n):
            return f"{n / GIB:7.2f}"

        verdict = "fits" if self.fits(hbm) else "DOES NOT FIT"
        text = (f"{self.what:10s} {g(self.arguments)} {g(self.outputs)} {g(self.aliased)} {g(self.temporaries)} "
                f"{g(self.code)} {g(self.total)} / {hbm / GIB:.0f}  {self.compile_s:6.1f}  {verdict}")
        if self.host_temporaries:
            text += f" (and {self.host_temporaries / GIB:.2f} GiB in host memory)"
        return text + (f": {self.error}" if self.error else "")

    def as_dict(self, hbm: int) -> dict:
        fields = {k: v for k, v in dataclasses.asdict(self).items()}
        fields.update(total=self.total, fits=self.fits(hbm))
        return fields


def per_chip_bytes(tree) -> int:
    """Bytes one device holds of ``ShapeDtypeStruct`` leaves carrying shardings."""
    import jax
    import numpy as np

    total = 0
    for leaf in jax.tree.leaves(tree):
        shape = leaf.sharding.shard_shape(leaf.shape) if leaf.sharding is not None else leaf.shape
        total += math.prod(shape) * np.dtype(leaf.dtype).itemsize
    return total


def compile_program(report: Report, lowered_fn, hbm: int):
    """Lowers and compiles; fills ``report``. Returns the compiled program (None when it failed)."""
    start = time.perf_counter()
    try:
        compiled = lowered_fn().compile()
    except RuntimeError as error:  # XlaRuntimeError; the TPU compiler reports HBM exhaustion as RESOURCE_EXHAUSTED
        message = str(error)
        if "RESOURCE_EXHAUSTED" not in message and "memory" not in message.lower():
            raise
        report.compile_s = time.perf_counter() - start
        report.error = "the TPU compiler ran out of HBM: " + " ".join(message.split())[:400]
        # "... the total memory required for HLO temporaries (16.51G) exceeds available HBM (15.75G)."
        needed = re.search(r"HLO temporaries \(([\d.]+)G\)", message)
        if needed:
            report.temporaries = int(float(needed.group(1)) * GIB)
        return None
    report.compile_s = time.perf_counter() - start
    stats = compiled.memory_analysis()
    report.arguments = stats.argument_size_in_bytes
    report.outputs = stats.output_size_in_bytes
    report.aliased = stats.alias_size_in_bytes
    report.temporaries = stats.temp_size_in_bytes
    report.host_temporaries = stats.host_temp_size_in_bytes
    report.code = stats.generated_code_size_in_bytes
    return compiled

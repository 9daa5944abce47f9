"""experiments.bench.device: the --smoke run end to end on CPU, the device table, limits and formulas."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.bench import device

REPO = Path(__file__).resolve().parents[2]

MEASURED = (
    "decode_tokens_per_s", "generate_tokens_per_s", "generate_s", "prefill_s", "decode_s",
    "train_model_tflops_per_s", "train_step_s", "train_tokens_per_s", "train_flops_per_step",
    "train_attention_flops_per_step", "params", "weight_bytes", "kv_bytes_per_step",
)


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def test_smoke_run_on_cpu():
    """One subprocess (compiles dominate its ~30 s): the bandwidth is given, the peak is not, so the
    decode row has a ratio and the MFU rows say "limit unknown" (the CPU has no table entry)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # one CPU device, whatever the calling shell set
    result = subprocess.run(
        [sys.executable, "-m", "experiments.bench.device", "--smoke", "--bandwidth-gbs", "50"],
        check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=150,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    assert figures["bench"] == "device" and figures["smoke"] is True
    assert (figures["platform"], figures["device_kind"]) == ("cpu", "cpu")
    for key in MEASURED:
        assert _positive(figures[key]), (key, figures[key])
    # the step timed per attention form: auto resolves to the dense form at 32 positions on CPU
    assert set(figures["train_step_s_by_attention"]) == {"auto", "xla"}
    assert all(_positive(s) for s in figures["train_step_s_by_attention"].values())
    assert figures["train_attention_forms"] == {"auto": "xla", "xla": "xla"}

    # the override gives a decode roofline and its ratio
    assert figures["bandwidth_gbs"] == 50 and figures["limits_source"] == "command-line override"
    assert _positive(figures["decode_roofline_tokens_per_s"]) and _positive(figures["decode_roofline_fraction"])
    assert figures["decode_roofline_fraction"] == pytest.approx(
        figures["decode_tokens_per_s"] / figures["decode_roofline_tokens_per_s"], rel=1e-3
    )
    assert figures["decode_roofline_tokens_per_s"] == pytest.approx(
        figures["batch"] * 50e9 / (figures["weight_bytes"] + figures["kv_bytes_per_step"]), rel=1e-4
    )
    # no peak for a CPU: MFU unknown, and said so
    assert figures["peak_tflops"] is None and figures["mfu"] is None and figures["mfu_6n"] is None
    decode_row = next(line for line in lines if line.startswith("decode new tokens/s"))
    mfu_row = next(line for line in lines if line.startswith("train model TFLOP/s"))
    assert "limit unknown" not in decode_row and "%" in decode_row
    assert "limit unknown" in mfu_row
    assert "bandwidth unknown" not in lines[0] and "peak FLOP/s unknown" in lines[0]


@pytest.mark.parametrize("kind, name", [
    ("NVIDIA H200", "NVIDIA H200 SXM"),
    ("NVIDIA H200 NVL", "NVIDIA H200 NVL"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
    ("TPU v4", "TPU v4"),
    ("TPU v5 lite", "TPU v5e"),
    ("TPU v5", "TPU v5p"),
    ("TPU v5p", "TPU v5p"),
    ("TPU v6 lite", "TPU v6e"),
])
def test_device_table(kind, name):
    spec = device.device_spec(kind)
    assert spec is not None and spec.name == name
    assert _positive(spec.peak_tflops) and _positive(spec.bandwidth_gbs) and spec.source


@pytest.mark.parametrize("kind", ["cpu", "NVIDIA GH200 480GB", "NVIDIA GeForce RTX 4090", "TPU v3"])
def test_unknown_devices(kind):
    assert device.device_spec(kind) is None


def test_limits_and_overrides():
    assert device.device_limits("cpu", None, None) == {"peak_tflops": None, "bandwidth_gbs": None, "limits_source": None}
    assert device.device_limits("cpu", 100.0, 2000.0) == {
        "peak_tflops": 100.0, "bandwidth_gbs": 2000.0, "limits_source": "command-line override",
    }
    h200 = device.device_limits("NVIDIA H200", None, None)
    assert (h200["peak_tflops"], h200["bandwidth_gbs"]) == (989.5, 4800.0)
    assert "datasheet" in h200["limits_source"]
    mixed = device.device_limits("NVIDIA H200", 500.0, None)  # a flag wins, the table fills the rest
    assert (mixed["peak_tflops"], mixed["bandwidth_gbs"]) == (500.0, 4800.0)
    assert "override" in mixed["limits_source"] and "datasheet" in mixed["limits_source"]


def test_formulas_for_the_default_shape():
    from milegpo_jax.models import RuntimeOptions, num_params, preset

    config = RuntimeOptions(param_dtype="bfloat16", compute_dtype="bfloat16").apply(preset("qwen2.5-1.5b"))
    params = num_params(config)
    assert 1.5e9 < params < 1.6e9
    # 28 layers x (K + V) x 2 kv heads x 128 dims x 2 bytes
    assert device.kv_bytes_per_token(config) == 28 * 2 * 2 * 128 * 2
    bound = device.decode_roofline(2 * params, device.kv_bytes_per_token(config), 128, 640, 4800.0)
    assert bound == pytest.approx(128 * 4800e9 / (2 * params + 28 * 2 * 2 * 128 * 2 * 128 * 640))
    dense, attention = device.train_flops(config, params, rows=16, seq=1024)
    assert dense == 6 * params * 16 * 1024  # tied embedding: every parameter is in a matmul
    assert attention == 6 * 28 * 12 * 128 * 1024 * 16 * 1024
    untied = preset("qwen2.5-7b")
    assert device.matmul_params(untied, 100 * untied.vocab_size * untied.hidden_size) == (
        99 * untied.vocab_size * untied.hidden_size
    )

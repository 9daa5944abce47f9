"""GGUF import: dequantisation and q/k un-permutation against independent references, refusals and
the command line's bad-input behaviour. Real weights: test_real_weights.py."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from milegpo_jax.models import gguf_weights
from milegpo_jax.models.gguf_weights import GGUFImportError
from milegpo_jax.models.import_gguf import main, packaged_gguf

# Types transformers' own (torch) dequantiser implements: the reference for ours (gguf's numpy).
TORCH_CHECKED = ("Q4_0", "Q4_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")


def _random_blocks(type_name: str, blocks: int, seed: int) -> np.ndarray:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    _, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    raw = np.random.default_rng(seed).integers(0, 256, size=blocks * block_bytes, dtype=np.uint8)
    return raw & 0xBF  # no byte has bit 6 set, so no fp16 scale is inf/NaN


@pytest.mark.parametrize("type_name", TORCH_CHECKED)
def test_dequantize_equals_transformers_dequantiser(type_name):
    from gguf import GGMLQuantizationType
    from transformers.integrations.gguf.dequant import dequantize as torch_dequantize

    raw = _random_blocks(type_name, 8, seed=len(type_name))
    elements = 8 * (256 if type_name.endswith("_K") else 32)
    ours = gguf_weights.dequantize(raw, type_name, (elements,), "t")
    want = torch_dequantize(torch.from_numpy(raw.copy()), int(GGMLQuantizationType[type_name])).numpy()
    np.testing.assert_allclose(ours, want, rtol=1e-6, atol=1e-6)


def _q5_reference(raw: np.ndarray, with_min: bool) -> np.ndarray:
    """ggml's block_q5_0 / block_q5_1 decoded by hand: fp16 d (and m), 32 high bits, 16 nibble bytes."""
    size = 24 if with_min else 22
    out = []
    for block in raw.reshape(-1, size):
        d = float(block[:2].view(np.float16)[0])
        m = float(block[2:4].view(np.float16)[0]) if with_min else 0.0
        rest = block[4:] if with_min else block[2:]
        qh = int(rest[:4].view(np.uint32)[0])
        qs = [int(b) for b in rest[4:]]
        values = np.zeros(32)
        for j in range(16):
            low = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4)
            high = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)
            offset = 0 if with_min else 16
            values[j] = (low - offset) * d + m
            values[j + 16] = (high - offset) * d + m
        out.append(values)
    return np.concatenate(out)


@pytest.mark.parametrize("type_name", ["Q5_0", "Q5_1"])
def test_q5_dequantize_equals_hand_decoding(type_name):
    raw = _random_blocks(type_name, 4, seed=3)
    ours = gguf_weights.dequantize(raw, type_name, (128,), "t")
    np.testing.assert_allclose(ours, _q5_reference(raw, type_name == "Q5_1"), rtol=1e-6, atol=1e-6)


def test_llama_qk_permutation_is_undone():
    """llama.cpp's converter permutes rows as ``reshape(heads, 2, d/2, in).swapaxes(1, 2)``."""
    heads, head_dim, hidden = 3, 8, 5
    hf = np.arange(heads * head_dim * hidden, dtype=np.float32).reshape(heads * head_dim, hidden)
    llama_cpp = hf.reshape(heads, 2, head_dim // 2, hidden).swapaxes(1, 2).reshape(hf.shape)
    assert not np.array_equal(llama_cpp, hf)
    np.testing.assert_array_equal(gguf_weights.undo_llama_qk_permutation(llama_cpp, heads), hf)
    bias = np.arange(heads * head_dim, dtype=np.float32)
    permuted = bias.reshape(heads, 2, head_dim // 2).swapaxes(1, 2).reshape(-1)
    np.testing.assert_array_equal(gguf_weights.undo_llama_qk_permutation(permuted, heads), bias)


def test_refusals_name_the_key_or_tensor():
    meta = {"general.architecture": "gemma2"}
    with pytest.raises(GGUFImportError, match="gemma2"):
        gguf_weights.model_config(meta, {"token_embd.weight": (10, 4)})
    with pytest.raises(GGUFImportError, match="tensor blk.0.attn_q.weight: quantisation type IQ2_XS"):
        gguf_weights.dequantize(np.zeros(74, np.uint8), "IQ2_XS", (256,), "blk.0.attn_q.weight")
    with pytest.raises(GGUFImportError, match="blk.0.ssm_conv1d.weight"):
        gguf_weights.hf_tensor_name("blk.0.ssm_conv1d.weight")
    with pytest.raises(GGUFImportError, match="rope_freqs.weight"):
        gguf_weights.model_config({"general.architecture": "llama"}, {"rope_freqs.weight": (32,)})
    with pytest.raises(GGUFImportError, match="tokenizer.ggml.model is 'llama'"):
        gguf_weights.tokenizer_files({"tokenizer.ggml.model": "llama"})


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "milegpo_jax.models.import_gguf", *map(str, args)],
        capture_output=True, text=True, timeout=300,
    )


def test_cli_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path):
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 definitely a zip")
    truncated = tmp_path / "truncated.gguf"
    with open(packaged_gguf(), "rb") as f:
        truncated.write_bytes(f.read(3_000_000))  # header and metadata intact, tensor data cut off
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("x")
    cases = [
        ((not_gguf, tmp_path / "a"), "not a GGUF file"),
        ((truncated, tmp_path / "b"), "truncated"),
        ((tmp_path / "missing.gguf", tmp_path / "c"), "no such file"),
        ((packaged_gguf(), busy), "pass --force"),
    ]
    for args, message in cases:
        proc = _cli(*args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "model.gguf", "truncated.gguf"]
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]


def test_main_returns_2_for_unsupported_dtype(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([str(packaged_gguf()), str(tmp_path / "x"), "--dtype", "int8"])
    assert exit_info.value.code == 2

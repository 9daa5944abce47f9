"""Bad checkpoints fail loudly, naming the file or tensor, before any model exists."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from milegpo_jax.models import (
    CheckpointError,
    ModelConfigError,
    UnsupportedConfigError,
    load_pretrained,
    save_pretrained,
)
from milegpo_jax.models.hf_io import INDEX_FILE
from milegpo_jax.models.runtime import RuntimeOptions


@pytest.fixture
def checkpoint(tied_checkpoint, tmp_path):
    """A private, editable copy of the tiny tied checkpoint."""
    _, path = tied_checkpoint
    work = tmp_path / "ckpt"
    shutil.copytree(path, work)
    return work


def _edit_config(path, **changes):
    hf = json.loads((path / "config.json").read_text())
    hf.update(changes)
    (path / "config.json").write_text(json.dumps(hf))


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_pretrained(tmp_path / "nowhere")


def test_missing_config(checkpoint):
    (checkpoint / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_pretrained(checkpoint)


def test_invalid_config_json(checkpoint):
    (checkpoint / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="invalid JSON"):
        load_pretrained(checkpoint)


def test_missing_weights(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_pretrained(checkpoint)


def test_index_names_missing_shard(tied_checkpoint, tmp_path):
    torch_model, _ = tied_checkpoint
    path = tmp_path / "sharded"
    torch_model.save_pretrained(path, max_shard_size="60KB")
    weight_map = json.loads((path / INDEX_FILE).read_text())["weight_map"]
    victim = sorted(set(weight_map.values()))[1]
    (path / victim).unlink()
    with pytest.raises(FileNotFoundError, match=victim):
        load_pretrained(path)


def test_unknown_model_type(checkpoint):
    _edit_config(checkpoint, model_type="mistral")
    with pytest.raises(UnsupportedConfigError, match="model_type 'mistral'"):
        load_pretrained(checkpoint)


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(use_sliding_window=True, sliding_window=16), "sliding"),
        (dict(layer_types=["full_attention", "sliding_attention"]), "sliding_attention"),
        (dict(rope_scaling={"rope_type": "yarn", "factor": 4.0}), "yarn"),
        (dict(rope_parameters={"rope_type": "linear", "rope_theta": 1e6, "factor": 2.0}), "linear"),
        (dict(hidden_act="gelu"), "gelu"),
    ],
)
def test_unsupported_options(checkpoint, changes, message):
    _edit_config(checkpoint, **changes)
    with pytest.raises(UnsupportedConfigError, match=message):
        load_pretrained(checkpoint)


def test_inconsistent_config(checkpoint):
    _edit_config(checkpoint, num_attention_heads=3)  # 64 is not divisible by 3
    with pytest.raises(CheckpointError, match="config.json.*num_heads"):
        load_pretrained(checkpoint)


def test_shape_mismatch_names_the_tensor(checkpoint):
    _edit_config(checkpoint, intermediate_size=96)  # the tensors say 128
    with pytest.raises(CheckpointError) as err:
        load_pretrained(checkpoint)
    message = str(err.value)
    assert "model.layers.0.mlp.gate_proj.weight" in message and "model.safetensors" in message
    assert "(128, 64)" in message and "(96, 64)" in message


def test_missing_tensor_is_named(checkpoint):
    tensors = load_file(checkpoint / "model.safetensors")
    del tensors["model.layers.1.self_attn.k_proj.bias"]
    save_file(tensors, checkpoint / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"missing 1 tensor\(s\): model.layers.1.self_attn.k_proj.bias"):
        load_pretrained(checkpoint)


def test_untied_config_needs_its_head(checkpoint):
    _edit_config(checkpoint, tie_word_embeddings=False)
    with pytest.raises(CheckpointError, match="lm_head.weight"):
        load_pretrained(checkpoint)


def test_unexpected_tensor_is_named(checkpoint):
    tensors = load_file(checkpoint / "model.safetensors")
    tensors["model.layers.0.self_attn.o_proj.bias"] = np.zeros(64, np.float32)
    save_file(tensors, checkpoint / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="model.layers.0.self_attn.o_proj.bias"):
        load_pretrained(checkpoint)


def test_unreadable_dtype_is_named(checkpoint):
    tensors = load_file(checkpoint / "model.safetensors")
    tensors["model.norm.weight"] = tensors["model.norm.weight"].astype(np.int32)
    save_file(tensors, checkpoint / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="model.norm.weight.*I32"):
        load_pretrained(checkpoint)


def test_corrupt_weights_file(checkpoint):
    (checkpoint / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not a header")
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_pretrained(checkpoint)


def test_bad_runtime_options_are_the_callers(checkpoint):
    with pytest.raises(ModelConfigError, match="param_dtype"):
        load_pretrained(checkpoint, runtime=RuntimeOptions(param_dtype="float64"))
    with pytest.raises(ModelConfigError, match="remat"):
        load_pretrained(checkpoint, runtime=RuntimeOptions(remat="sometimes"))
    with pytest.raises(TypeError, match="scan_layers"):  # RuntimeOptions is the only runtime argument
        load_pretrained(checkpoint, scan_layers=True)


def test_save_rejects_a_foreign_config(checkpoint, tmp_path):
    model, config = load_pretrained(checkpoint)
    with pytest.raises(ValueError, match="hidden_size"):
        save_pretrained(model, config.replace(hidden_size=32, head_dim=16), tmp_path / "out")
    with pytest.raises(ValueError, match="size"):
        save_pretrained(model, config, tmp_path / "out", max_shard_size="lots")


def test_truncated_weights_file(checkpoint):
    data = (checkpoint / "model.safetensors").read_bytes()
    (checkpoint / "model.safetensors").write_bytes(data[:-1000])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_pretrained(checkpoint)

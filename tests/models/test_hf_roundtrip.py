"""Hugging Face checkpoint -> our model -> Hugging Face checkpoint, against transformers (PyTorch)."""

from __future__ import annotations

import copy
import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from transformers import AutoTokenizer, Qwen2ForCausalLM

from milegpo_jax.models import RuntimeOptions, config_to_hf, hf_io, load_pretrained, save_pretrained
from tests.models.helpers import forward, make_hf_model, random_ids, torch_logits


def _reload_logits(path, ids):
    reloaded = Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return reloaded, torch_logits(reloaded, ids)


@pytest.mark.parametrize("scan_layers", [False, True], ids=["layers", "scanned"])
def test_roundtrip_matches_transformers(hf_checkpoint, tmp_path, scan_layers):
    torch_model, path = hf_checkpoint
    ids = random_ids(3, 13)
    want = torch_logits(torch_model, ids)

    model, config = load_pretrained(path, runtime=RuntimeOptions(scan_layers=scan_layers))
    got = model(jnp.asarray(ids))  # the contract: int32 [B, T] -> float [B, T, vocab]
    assert got.shape == (3, 13, config.vocab_size) and got.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-4, rtol=1e-4)

    out = save_pretrained(model, config, tmp_path / "saved")
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    reloaded, again = _reload_logits(out, ids)
    np.testing.assert_allclose(again, np.asarray(got), atol=1e-5, rtol=1e-5)
    # Not just close: every tensor comes back bit-identical, the head tied exactly when it was.
    original = torch_model.state_dict()
    for name, tensor in reloaded.state_dict().items():
        assert torch.equal(tensor, original[name]), name
    assert reloaded.config.tie_word_embeddings == torch_model.config.tie_word_embeddings


def test_sharded_index_both_ways(tied_checkpoint, tmp_path):
    torch_model, _ = tied_checkpoint
    src = tmp_path / "hf_sharded"
    torch_model.save_pretrained(src, max_shard_size="60KB")
    assert (src / hf_io.INDEX_FILE).is_file()
    ids = random_ids(2, 9)
    model, config = load_pretrained(src)
    np.testing.assert_allclose(forward(model, ids), torch_logits(torch_model, ids), atol=1e-4)

    out = tmp_path / "ours_sharded"
    save_pretrained(model, config, out, max_shard_size="40KB")
    index = json.loads((out / hf_io.INDEX_FILE).read_text())
    files = sorted(p.name for p in out.glob("model-*.safetensors"))
    assert len(files) > 1 and set(index["weight_map"].values()) == set(files)
    _, again = _reload_logits(out, ids)
    np.testing.assert_allclose(again, torch_logits(torch_model, ids), atol=1e-5)

    # Saving again into the same directory as one file leaves no stale shards or index behind.
    save_pretrained(model, config, out)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]


@pytest.mark.parametrize("style", ["legacy", "v5"])
def test_config_key_spellings(tied_checkpoint, tmp_path, style):
    """Hub files say rope_theta/torch_dtype, transformers 5 writes rope_parameters/dtype."""
    torch_model, path = tied_checkpoint
    work = tmp_path / style
    shutil.copytree(path, work)
    hf = json.loads((work / "config.json").read_text())
    hf.pop("rope_theta", None), hf.pop("rope_parameters", None), hf.pop("dtype", None), hf.pop("torch_dtype", None)
    if style == "legacy":
        hf.update(rope_theta=12345.0, torch_dtype="float32")
    else:
        hf.update(rope_parameters={"rope_type": "default", "rope_theta": 12345.0}, dtype="float32")
    (work / "config.json").write_text(json.dumps(hf))
    model, config = load_pretrained(work)
    assert config.rope_theta == 12345.0
    reference = Qwen2ForCausalLM.from_pretrained(work, dtype=torch.float32).eval()
    ids = random_ids(2, 17)
    np.testing.assert_allclose(forward(model, ids), torch_logits(reference, ids), atol=1e-4)
    written = config_to_hf(config)
    assert written["rope_theta"] == written["rope_parameters"]["rope_theta"] == 12345.0


def test_bf16_checkpoint_dtype_plumbing(tmp_path):
    """bf16 safetensors in (read through framework="flax"), bf16 compute, bf16 safetensors out."""
    torch_model = make_hf_model(tied=False, seed=3).to(torch.bfloat16)
    src = tmp_path / "bf16"
    torch_model.save_pretrained(src)
    ids = random_ids(2, 8)

    model, config = load_pretrained(src, runtime=RuntimeOptions(param_dtype="bfloat16", compute_dtype="bfloat16"))
    assert model.runtime.param_dtype == model.runtime.compute_dtype == "bfloat16"
    params = dict(nnx.to_flat_state(nnx.state(model, nnx.Param)))
    emb = params[("embedding",)][...]
    assert emb.dtype == jnp.bfloat16
    want = torch_model.model.embed_tokens.weight.detach().float().numpy()
    np.testing.assert_array_equal(np.asarray(emb, np.float32), want)  # bit-exact

    logits = forward(model, ids)
    assert logits.dtype == jnp.bfloat16
    reference = torch_logits(copy.deepcopy(torch_model).float(), ids)  # same bf16 values, fp32 maths
    assert np.abs(np.asarray(logits, np.float32) - reference).max() < 0.1 * np.abs(reference).max()

    upcast, _ = load_pretrained(src)
    assert dict(nnx.to_flat_state(nnx.state(upcast, nnx.Param)))[("embedding",)][...].dtype == jnp.float32
    np.testing.assert_allclose(forward(upcast, ids), reference, atol=1e-4)
    mixed, _ = load_pretrained(src, runtime=RuntimeOptions(compute_dtype="bfloat16"))
    assert forward(mixed, ids).dtype == jnp.bfloat16

    out = save_pretrained(model, config, tmp_path / "bf16_out")
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"
    reloaded = Qwen2ForCausalLM.from_pretrained(out).eval()
    assert reloaded.dtype == torch.bfloat16
    original = torch_model.state_dict()
    for name, tensor in reloaded.state_dict().items():
        assert torch.equal(tensor, original[name]), name


def test_head_dim_and_eos_list_survive(tmp_path):
    """An explicit head_dim (not hidden/heads) and a list eos_token_id round-trip."""
    torch_model = make_hf_model(tied=True, seed=4, head_dim=8, eos_token_id=[5, 7])
    src = tmp_path / "hd"
    torch_model.save_pretrained(src)
    model, config = load_pretrained(src)
    assert config.head_dim == 8 and config.eos_token_id == (5, 7)
    ids = random_ids(2, 6)
    np.testing.assert_allclose(forward(model, ids), torch_logits(torch_model, ids), atol=1e-4)
    out = save_pretrained(model, config, tmp_path / "hd_out")
    reloaded, again = _reload_logits(out, ids)
    assert reloaded.config.eos_token_id == [5, 7]
    np.testing.assert_allclose(again, torch_logits(torch_model, ids), atol=1e-5)


def test_tokenizer_saved_with_checkpoint(tied_checkpoint, tmp_path, qwen_tokenizer):
    """AutoTokenizer loads from the saved checkpoint directory, offline."""
    _, path = tied_checkpoint
    model, config = load_pretrained(path)
    out = save_pretrained(model, config, tmp_path / "with_tok", tokenizer=qwen_tokenizer)
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert tok.encode("Hello world") == qwen_tokenizer.encode("Hello world")
    assert tok.convert_tokens_to_ids("<|im_end|>") == 151645


def test_loaded_arrays_live_on_one_device_without_mesh(tied_checkpoint):
    _, path = tied_checkpoint
    model, _ = load_pretrained(path)
    for leaf in jax.tree.leaves(nnx.state(model, nnx.Param)):
        assert len(leaf.sharding.device_set) == 1
    assert model.sharding is None

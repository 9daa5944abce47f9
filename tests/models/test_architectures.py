"""Llama and Qwen3 checkpoints (besides Qwen2) against transformers' own PyTorch classes.

Each family's tiny random checkpoint is written by transformers; ours loads it, matches its logits,
saves it back (transformers reloads every tensor bit-identical) and greedy-decodes what ``generate``
decodes. The Qwen2 path has its own tests in test_hf_roundtrip.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers

from milegpo_jax.models import (
    CheckpointError,
    Llama3RopeScaling,
    RuntimeOptions,
    UnsupportedConfigError,
    load_pretrained,
    save_pretrained,
)
from milegpo_jax.models.layers import rope_inverse_frequencies
from milegpo_jax.sampling import SamplingConfig, generate
from tests.models.helpers import TINY, forward, make_hf_model, random_ids, torch_logits

LLAMA3_SCALING = {
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
FAMILIES = {
    "llama-tied": dict(family="llama", tied=True),
    # llama3 scaling only changes anything when some wavelengths exceed the original context: 64
    # positions with theta 1e6 and head_dim 16 puts frequencies in all three bands.
    "llama-untied-llama3rope": dict(family="llama", tied=False, rope_scaling=LLAMA3_SCALING),
    "qwen3": dict(family="qwen3", tied=False, head_dim=24),  # head_dim != hidden / heads (16)
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family_checkpoint(request, tmp_path_factory):
    model = make_hf_model(seed=5, **FAMILIES[request.param])
    path = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(path)
    return request.param, model, path


def test_load_save_reload_matches_transformers(family_checkpoint, tmp_path):
    name, torch_model, path = family_checkpoint
    ids = random_ids(3, 40)
    mask = np.ones_like(ids)
    mask[0, :7] = 0  # left padding
    mask[1, 20:] = 2  # a second packed segment
    model, config = load_pretrained(path, runtime=RuntimeOptions(scan_layers=name == "qwen3"))
    assert config.model_type == torch_model.config.model_type
    assert config.attention_bias is False and config.qk_norm is (name == "qwen3")
    got = forward(model, ids)
    np.testing.assert_allclose(got, torch_logits(torch_model, ids), atol=1e-4, rtol=1e-4)
    # Padding and packing: each real segment equals transformers on that segment alone.
    padded = forward(model, ids, attention_mask=mask)
    np.testing.assert_allclose(padded[0, 7:], torch_logits(torch_model, ids[:1, 7:])[0], atol=1e-4)
    np.testing.assert_allclose(padded[1, 20:], torch_logits(torch_model, ids[1:2, 20:])[0], atol=1e-4)

    out = save_pretrained(model, config, tmp_path / "saved")
    written = json.loads((out / "config.json").read_text())
    assert written["architectures"] == [type(torch_model).__name__]
    reloaded = type(torch_model).from_pretrained(out, dtype=torch.float32).eval()
    original = torch_model.state_dict()
    assert set(reloaded.state_dict()) == set(original)
    for tensor_name, tensor in reloaded.state_dict().items():
        assert torch.equal(tensor, original[tensor_name]), tensor_name
    np.testing.assert_allclose(torch_logits(reloaded, ids), got, atol=1e-4, rtol=1e-4)


def test_greedy_decode_matches_transformers_generate(family_checkpoint):
    _, torch_model, path = family_checkpoint
    model, _ = load_pretrained(path)
    prompts = [list(random_ids(1, 5, seed=1)[0]), list(random_ids(1, 11, seed=2)[0])]
    ours = generate(model, prompts, SamplingConfig(max_new_tokens=12, temperature=0.0)).rows()
    for prompt, row in zip(prompts, ours):
        with torch.no_grad():
            want = torch_model.generate(
                torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long), max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=0
            )[0, len(prompt):].tolist()
        assert list(row.token_ids) == want


def test_llama3_frequencies_equal_transformers():
    config = transformers.LlamaConfig(head_dim=16, rope_theta=1e6, rope_scaling=LLAMA3_SCALING)
    want, scale = transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    ours = make_ours(rope_scaling=Llama3RopeScaling(8.0, 1.0, 4.0, 64))
    got = rope_inverse_frequencies(ours)
    assert scale == 1.0
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)
    plain = rope_inverse_frequencies(ours.replace(rope_scaling=None))
    assert (got < plain).any() and (got == plain).any()  # both scaled and untouched bands exist


def make_ours(**fields):
    from milegpo_jax.models import ModelConfig

    return ModelConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1,
        head_dim=16, rope_theta=1e6, model_type="llama", attention_bias=False, **fields,
    )


@pytest.mark.parametrize(
    "change, error, message",
    [
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, UnsupportedConfigError, "'yarn'"),
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, CheckpointError, "lacks"),
        ({"mlp_bias": True}, UnsupportedConfigError, "mlp_bias"),
        ({"model_type": "mistral"}, UnsupportedConfigError, "mistral"),
    ],
)
def test_unsupported_llama_options_are_refused(tmp_path, change, error, message):
    """Refused from config.json alone, before any tensor is read."""
    hf = {**transformers.LlamaConfig(**TINY).to_dict(), **change}
    hf.pop("rope_parameters", None)
    (tmp_path / "config.json").write_text(json.dumps(hf))
    with pytest.raises(error, match=message):
        load_pretrained(tmp_path)

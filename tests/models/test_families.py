"""A model family added the documented way (docs/models.md §1.1): one ``FamilySpec`` in
``FAMILIES``, and a tiny model of it builds, saves, reloads and imports from GGUF metadata."""

from __future__ import annotations

import json

import numpy as np
import pytest

from milegpo_jax.models import (
    FAMILIES, FamilySpec, ModelConfig, ModelConfigError, gguf_weights, init_model, load_pretrained, save_pretrained,
)

# biases always there (no switch) and q/k norms: a combination none of the three real families has
TOY = FamilySpec("toy", "ToyForCausalLM", qk_norm=True, bias_switch=False,
                 hf_fields=lambda config: {"toy_layers": config.num_layers})
SHAPE = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, num_kv_heads=2)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(FAMILIES, TOY.model_type, TOY)  # the table entry, for this test only
    return TOY


def test_an_unregistered_family_is_refused():
    with pytest.raises(ModelConfigError, match="model_type"):
        ModelConfig(**SHAPE, model_type="toy")


def test_a_registered_family_builds_saves_and_reloads(toy, tmp_path):
    config = ModelConfig(**SHAPE, model_type=toy.model_type)
    assert config.qk_norm
    model = init_model(config, seed=3)
    attn = model.layers[0].attn
    assert attn.q_bias is not None and attn.q_norm is not None  # the spec's parts exist

    save_pretrained(model, config, tmp_path)
    hf = json.loads((tmp_path / "config.json").read_text())
    assert hf["model_type"] == "toy" and hf["architectures"] == ["ToyForCausalLM"] and hf["toy_layers"] == 2
    assert "attention_bias" not in hf  # no switch: the family always has them

    loaded, loaded_config = load_pretrained(tmp_path)
    assert loaded_config == config
    ids = np.arange(16, dtype=np.int32).reshape(2, 8) % 64
    np.testing.assert_array_equal(np.asarray(loaded(ids)), np.asarray(model(ids)))


def test_a_registered_family_imports_from_gguf_metadata(toy):
    meta = {
        "general.architecture": "toy", "toy.attention.head_count": 4, "toy.attention.head_count_kv": 2,
        "toy.feed_forward_length": 64, "toy.block_count": 2, "toy.attention.layer_norm_rms_epsilon": 1e-6,
    }
    shapes = {"token_embd.weight": (64, 32), "blk.0.attn_q.bias": (32,)}
    config = gguf_weights.model_config(meta, shapes)
    assert (config.model_type, config.qk_norm, config.attention_bias, config.tie_word_embeddings) == ("toy", True, True, True)
    q = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    assert gguf_weights.hf_tensor("blk.0.attn_q.weight", q, config)[1] is q  # not permuted: the spec says so

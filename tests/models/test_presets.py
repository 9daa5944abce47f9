"""Named presets have the public Qwen2.5 shapes: checked tensor by tensor against transformers."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from milegpo_jax.models import (
    ModelConfig,
    ModelConfigError,
    RuntimeOptions,
    abstract_model,
    config_to_hf,
    init_model,
    num_params,
    preset,
)
from milegpo_jax.models.hf_format import tensor_maps

# Parameter counts on the Qwen2.5 model cards (0.49B, 1.54B, 3.09B, 7.61B), exactly.
PUBLIC_COUNTS = {
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-1.5b": 1_543_714_304,
    "qwen2.5-3b": 3_085_938_688,
    "qwen2.5-7b": 7_615_616_512,
}


@pytest.mark.parametrize("name", sorted(PUBLIC_COUNTS))
def test_preset_shapes_match_transformers(name):
    config = preset(name)
    hf = config_to_hf(config)
    with torch.device("meta"):  # shapes only: no memory, no init
        reference = Qwen2ForCausalLM(Qwen2Config(**{k: v for k, v in hf.items() if k != "architectures"}))
    want = {k: tuple(v.shape) for k, v in reference.named_parameters()}  # tied: no lm_head entry
    got = {m.hf_name: m.hf_shape for m in tensor_maps(config)}
    assert got == want
    assert num_params(config) == reference.num_parameters() == PUBLIC_COUNTS[name]


def test_preset_options_and_scanned_layout():
    config = preset("qwen2.5-1.5b")
    assert (config.hidden_size, config.num_layers, config.head_dim) == (1536, 28, 128)
    model = abstract_model(config, RuntimeOptions(param_dtype="bfloat16", scan_layers=True, remat="dots"))
    assert model.layers.attn.q_kernel.shape == (28, 1536, 12, 128)
    assert model.layers.attn.q_kernel.get_metadata()["logical_axes"] == ("layers", "embed", "heads", "head_dim")
    assert model.embedding.dtype == "bfloat16"
    assert num_params(model) == PUBLIC_COUNTS["qwen2.5-1.5b"]


def test_config_validation():
    with pytest.raises(ModelConfigError, match="unknown preset"):
        preset("qwen2.5-70b")
    base = dict(vocab_size=8, hidden_size=8, intermediate_size=8, num_layers=1, num_heads=2, num_kv_heads=2)
    with pytest.raises(ModelConfigError, match="multiple of num_kv_heads"):
        ModelConfig(**{**base, "num_kv_heads": 3})
    with pytest.raises(ModelConfigError, match="vocab_size"):
        ModelConfig(**{**base, "vocab_size": 0})
    with pytest.raises(ModelConfigError, match="compute_dtype"):
        RuntimeOptions(compute_dtype="int8")
    with pytest.raises(TypeError, match="dtype"):  # the architecture holds no runtime option
        ModelConfig(**base, dtype="float32")
    with pytest.raises(ModelConfigError, match="even"):
        ModelConfig(**base, head_dim=3)
    config = ModelConfig(**base, eos_token_id=[1, 2])
    assert config.eos_token_id == (1, 2) and hash(config)  # frozen and hashable (a static jit argument)


def test_init_model_follows_hf_initialisation():
    config = ModelConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
        initializer_range=0.05,
    )
    model = init_model(config, RuntimeOptions(scan_layers=True), seed=3)
    assert float(jnp.std(model.embedding[...])) == pytest.approx(0.05, rel=0.1)
    assert float(jnp.std(model.layers.mlp.up_kernel[...])) == pytest.approx(0.05, rel=0.1)
    assert not np.any(np.asarray(model.layers.attn.q_bias[...]))  # zero biases, unit norms (as HF)
    assert np.all(np.asarray(model.final_norm.scale[...]) == 1.0)
    # The two stacked layers got different draws.
    q = np.asarray(model.layers.attn.q_kernel[...])
    assert not np.allclose(q[0], q[1])

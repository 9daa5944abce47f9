"""The Hugging Face checkpoint format, without files or devices: ``config.json`` <-> ``ModelConfig``
and HF tensor names and layouts <-> our parameters (``TensorMap``), for the families of
``families.FAMILIES`` (docs/models.md §2). ``hf_io.py`` reads and writes checkpoint directories with
them; ``import_gguf.py`` writes config.json with them.

Both spellings transformers uses are read: ``rope_theta`` (hub files, 4.x) or ``rope_parameters``
(5.x) and ``torch_dtype`` or ``dtype``; both are written, so 4.x and 5.x reload.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from milegpo_jax.models.families import FAMILIES
from milegpo_jax.models.model_config import Llama3RopeScaling, ModelConfig, ModelConfigError


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded as-is: names the file and, where it applies, the tensor."""


class UnsupportedConfigError(CheckpointError):
    """A config.json that asks for something this port does not implement."""


# --------------------------------------------------------------------------------------- config.json


def _rope_scaling_from_hf(hf: Mapping[str, Any], source: str) -> tuple[float | None, Llama3RopeScaling | None]:
    """(rope_theta, llama3 scaling or None) from either spelling: ``rope_theta`` + ``rope_scaling``
    (hub files, transformers 4.x) or ``rope_parameters`` (5.x)."""
    rope = dict(hf.get("rope_parameters") or {})
    legacy = dict(hf.get("rope_scaling") or {})
    scaling = None
    for name, params in (("rope_parameters", rope), ("rope_scaling", legacy)):
        kind = params.get("rope_type", params.get("type", "default"))
        if kind == "default":
            continue
        if kind != "llama3":
            raise UnsupportedConfigError(
                f"{source}: {name} has rope_type {kind!r}; supported: 'default' and 'llama3'"
            )
        keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        missing = [key for key in keys if key not in params]
        if missing:
            raise CheckpointError(f"{source}: {name} of type llama3 lacks {missing}")
        try:
            scaling = Llama3RopeScaling(
                float(params["factor"]), float(params["low_freq_factor"]), float(params["high_freq_factor"]),
                int(params["original_max_position_embeddings"]),
            )
        except ModelConfigError as err:
            raise CheckpointError(f"{source}: {name}: {err}") from None
    return hf.get("rope_theta", rope.get("rope_theta")), scaling


def config_from_hf(hf: Mapping[str, Any], *, source: str = "config.json") -> ModelConfig:
    """``ModelConfig`` from a parsed config.json; ``source`` names it in errors."""
    model_type = hf.get("model_type")
    if model_type not in FAMILIES:
        raise UnsupportedConfigError(
            f"{source}: model_type {model_type!r} is not supported (supported: {tuple(FAMILIES)})"
        )
    spec = FAMILIES[model_type]
    if hf.get("use_sliding_window"):
        raise UnsupportedConfigError(f"{source}: use_sliding_window is true; sliding-window attention is not supported")
    layer_types = hf.get("layer_types") or []
    if any(kind != "full_attention" for kind in layer_types):
        raise UnsupportedConfigError(
            f"{source}: layer_types {sorted(set(layer_types))}; only full_attention is supported"
        )
    if hf.get("hidden_act", "silu") != "silu":
        raise UnsupportedConfigError(f"{source}: hidden_act {hf['hidden_act']!r}; only 'silu' is supported")
    if hf.get("mlp_bias"):
        raise UnsupportedConfigError(f"{source}: mlp_bias is true; MLP biases are not supported")
    if (hf.get("pretraining_tp") or 1) != 1:
        raise UnsupportedConfigError(f"{source}: pretraining_tp {hf['pretraining_tp']}; only 1 is supported")
    theta, scaling = _rope_scaling_from_hf(hf, source)
    if theta is None:
        raise CheckpointError(f"{source}: neither rope_theta nor rope_parameters.rope_theta is set")
    required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    missing = [key for key in required if key not in hf]
    if missing:
        raise CheckpointError(f"{source}: missing keys {missing}")
    attention_bias = bool(hf.get("attention_bias", False)) if spec.bias_switch else True
    try:
        return ModelConfig(
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_layers=hf["num_hidden_layers"],
            num_heads=hf["num_attention_heads"],
            num_kv_heads=hf.get("num_key_value_heads") or hf["num_attention_heads"],
            head_dim=hf.get("head_dim") or 0,
            rope_theta=float(theta),
            rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
            max_position_embeddings=hf.get("max_position_embeddings", 32768),
            initializer_range=float(hf.get("initializer_range", 0.02)),
            bos_token_id=hf.get("bos_token_id"),
            eos_token_id=hf.get("eos_token_id"),
            pad_token_id=hf.get("pad_token_id"),
            model_type=model_type,
            attention_bias=attention_bias,
            rope_scaling=scaling,
        )
    except ModelConfigError as err:
        raise CheckpointError(f"{source}: {err}") from None


def config_to_hf(config: ModelConfig, dtype: str = "float32") -> dict[str, Any]:
    """config.json contents for ``config`` with weights saved in ``dtype``."""
    spec = FAMILIES[config.model_type]
    if not (spec.bias_switch or config.attention_bias):
        raise ValueError(f"a {spec.model_type} checkpoint always has q/k/v biases; use a family with a switch "
                         "(e.g. model_type 'llama') without them")
    eos = list(config.eos_token_id) if isinstance(config.eos_token_id, tuple) else config.eos_token_id
    rope = {"rope_type": "default", "rope_theta": config.rope_theta}
    if config.rope_scaling is not None:
        rope = {"rope_type": "llama3", "rope_theta": config.rope_theta, **dataclasses.asdict(config.rope_scaling)}
    hf = {
        "architectures": [spec.architecture],
        "model_type": config.model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads,
        "num_key_value_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": config.max_position_embeddings,
        "initializer_range": config.initializer_range,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_theta,
        "rope_parameters": rope,
        "rope_scaling": None if config.rope_scaling is None else {k: v for k, v in rope.items() if k != "rope_theta"},
        "tie_word_embeddings": config.tie_word_embeddings,
        "attention_dropout": 0.0,
        "use_cache": True,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": eos,
        "pad_token_id": config.pad_token_id,
        "torch_dtype": dtype,
        "dtype": dtype,
    }
    hf.update(spec.hf_fields(config))
    return hf


# ------------------------------------------------------------------------------------ tensor mapping


@dataclasses.dataclass(frozen=True)
class TensorMap:
    """One HF tensor <-> (a layer slice of) one of our parameters."""

    hf_name: str
    path: tuple[str | int, ...]  # of the parameter in the model's state
    layer: int | None  # index into the stacked layer axis (scanned layers), else None
    hf_shape: tuple[int, ...]
    to_ours: Callable[[np.ndarray], np.ndarray]
    to_hf: Callable[[np.ndarray], np.ndarray]


def tensor_maps(config: ModelConfig, scan_layers: bool = False) -> list[TensorMap]:
    """Every HF tensor of a checkpoint with ``config``, in HF's order, mapped onto a model whose layers
    are one entry each or (``scan_layers``) one stacked layer."""
    d, f, v = config.hidden_size, config.intermediate_size, config.vocab_size
    n, k, h = config.num_heads, config.num_kv_heads, config.head_dim

    def identity(x):
        return x

    def transpose(x):
        return x.T

    def in_heads(heads):  # torch [heads*h, d] <-> ours [d, heads, h]
        return (lambda x: x.T.reshape(d, heads, h)), (lambda x: x.reshape(d, heads * h).T)

    def bias(heads):
        return (lambda x: x.reshape(heads, h)), (lambda x: x.reshape(heads * h))

    out_heads = (lambda x: x.T.reshape(n, h, d)), (lambda x: x.reshape(n * h, d).T)

    maps = [TensorMap("model.embed_tokens.weight", ("embedding",), None, (v, d), identity, identity)]
    per_layer = [
        ("input_layernorm.weight", ("input_norm", "scale"), (d,), (identity, identity)),
        ("self_attn.q_proj.weight", ("attn", "q_kernel"), (n * h, d), in_heads(n)),
        ("self_attn.q_proj.bias", ("attn", "q_bias"), (n * h,), bias(n)),
        ("self_attn.k_proj.weight", ("attn", "k_kernel"), (k * h, d), in_heads(k)),
        ("self_attn.k_proj.bias", ("attn", "k_bias"), (k * h,), bias(k)),
        ("self_attn.v_proj.weight", ("attn", "v_kernel"), (k * h, d), in_heads(k)),
        ("self_attn.v_proj.bias", ("attn", "v_bias"), (k * h,), bias(k)),
        ("self_attn.o_proj.weight", ("attn", "o_kernel"), (d, n * h), out_heads),
        ("self_attn.q_norm.weight", ("attn", "q_norm", "scale"), (h,), (identity, identity)),
        ("self_attn.k_norm.weight", ("attn", "k_norm", "scale"), (h,), (identity, identity)),
        ("post_attention_layernorm.weight", ("post_attn_norm", "scale"), (d,), (identity, identity)),
        ("mlp.gate_proj.weight", ("mlp", "gate_kernel"), (f, d), (transpose, transpose)),
        ("mlp.up_proj.weight", ("mlp", "up_kernel"), (f, d), (transpose, transpose)),
        ("mlp.down_proj.weight", ("mlp", "down_kernel"), (d, f), (transpose, transpose)),
    ]
    if not config.attention_bias:
        per_layer = [row for row in per_layer if not row[0].endswith("_proj.bias")]
    if not config.qk_norm:
        per_layer = [row for row in per_layer if row[0] not in ("self_attn.q_norm.weight", "self_attn.k_norm.weight")]
    for i in range(config.num_layers):
        for suffix, sub_path, shape, (to_ours, to_hf) in per_layer:
            path = ("layers", *sub_path) if scan_layers else ("layers", i, *sub_path)
            layer = i if scan_layers else None
            maps.append(TensorMap(f"model.layers.{i}.{suffix}", path, layer, shape, to_ours, to_hf))
    maps.append(TensorMap("model.norm.weight", ("final_norm", "scale"), None, (d,), identity, identity))
    if not config.tie_word_embeddings:
        maps.append(TensorMap("lm_head.weight", ("lm_head",), None, (v, d), transpose, transpose))
    return maps

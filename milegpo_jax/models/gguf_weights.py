"""GGUF (llama.cpp) model files -> Hugging Face tensors, config and tokenizer: the pure part.

No file I/O here: ``import_gguf.py`` reads the file with the ``gguf`` package and writes the
checkpoint directory. What this module decides (docs/models.md §3):

* which architectures (the ``model_type`` of each family in ``families.FAMILIES``) and tensor types
  are understood, and the HF name of every GGUF tensor;
* dequantisation through ``gguf.quants.dequantize`` (numpy), for the types in ``SUPPORTED_TYPES``;
* llama.cpp's q/k row permutation, undone for the families whose spec says so
  (``FamilySpec.gguf_permuted_qk``: ``llama``): its converter interleaves the two rotary halves of
  every head (``[x0, x_{d/2}, x1, ...]`` order) for llama.cpp's own RoPE; Qwen2/Qwen3 files keep
  HF's rotate-half order;
* the ``ModelConfig`` the metadata describes;
* ``tokenizer.json`` / ``tokenizer_config.json`` built with ``tokenizers`` from the vocabulary,
  merges, token types and chat template the file embeds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from milegpo_jax.models.families import FAMILIES
from milegpo_jax.models.model_config import ModelConfig, ModelConfigError
from milegpo_jax.models.tokenizer import PRETOKENIZE_PATTERN as QWEN2_PATTERN

# Each dequantised by gguf.quants and checked against transformers' own dequantiser
# (tests/models/test_gguf_import.py).
SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")

_LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# tokenizer.ggml.pre -> how text is split before BPE (llama.cpp's pre-tokenizer names).
PRE_TOKENIZERS = ("gpt2", "default", "smollm", "qwen2", "deepseek-r1-qwen", "llama-bpe", "llama3")

_LAYER_TENSORS = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_GLOBAL_TENSORS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_NAME = re.compile(r"blk\.(\d+)\.(.+)")


class GGUFImportError(ValueError):
    """A GGUF file this importer cannot convert; the message names the key or tensor."""


def hf_tensor_name(gguf_name: str) -> str:
    """``blk.3.attn_q.weight`` -> ``model.layers.3.self_attn.q_proj.weight``; refuses unknown names."""
    if gguf_name in _GLOBAL_TENSORS:
        return _GLOBAL_TENSORS[gguf_name]
    match = _LAYER_NAME.fullmatch(gguf_name)
    if match and match.group(2) in _LAYER_TENSORS:
        return f"model.layers.{match.group(1)}.{_LAYER_TENSORS[match.group(2)]}"
    raise GGUFImportError(f"tensor {gguf_name}: not part of a supported decoder (no Hugging Face equivalent)")


def undo_llama_qk_permutation(weight: np.ndarray, heads: int) -> np.ndarray:
    """Inverse of llama.cpp's ``permute`` of q/k projection rows ``[heads * head_dim, ...]``.

    llama.cpp stores each head's rows as pairs ``(i, i + head_dim / 2)`` interleaved; HF keeps the
    halves apart. Works for weights ``[rows, in]`` and biases ``[rows]``."""
    rows = weight.shape[0]
    if rows % (2 * heads):
        raise GGUFImportError(f"cannot un-permute {rows} rows over {heads} heads")
    rest = weight.shape[1:]
    return weight.reshape(heads, rows // heads // 2, 2, *rest).swapaxes(1, 2).reshape(rows, *rest)


def dequantize(data: np.ndarray, type_name: str, shape: Sequence[int], tensor_name: str) -> np.ndarray:
    """float32 array of ``shape`` (numpy order: ``reversed`` of GGUF's dims) from a tensor's raw data."""
    from gguf import GGMLQuantizationType, quants

    if type_name not in SUPPORTED_TYPES:
        raise GGUFImportError(
            f"tensor {tensor_name}: quantisation type {type_name} is not supported (supported: {', '.join(SUPPORTED_TYPES)})"
        )
    values = quants.dequantize(np.asarray(data), GGMLQuantizationType[type_name])
    return np.asarray(values, np.float32).reshape(tuple(shape))


def _get(meta: Mapping[str, Any], key: str, default: Any = KeyError) -> Any:
    if key in meta:
        return meta[key]
    if default is KeyError:
        raise GGUFImportError(f"metadata key {key} is missing")
    return default


def model_config(meta: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]]) -> ModelConfig:
    """The architecture described by the metadata; ``shapes`` (GGUF name -> numpy shape) settle the
    vocabulary size and whether the head is tied (no ``output.weight``)."""
    arch = _get(meta, "general.architecture")
    if arch not in FAMILIES:
        raise GGUFImportError(f"general.architecture {arch!r} is not supported (supported: {', '.join(sorted(FAMILIES))})")
    if "rope_freqs.weight" in shapes:
        raise GGUFImportError("tensor rope_freqs.weight: per-frequency RoPE factors (llama3 scaling) are not supported")
    scaling = _get(meta, f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", ""):
        raise GGUFImportError(f"metadata {arch}.rope.scaling.type is {scaling!r}; only unscaled RoPE is supported")
    if "token_embd.weight" not in shapes:
        raise GGUFImportError("tensor token_embd.weight is missing")
    vocab, hidden = shapes["token_embd.weight"]
    heads = int(_get(meta, f"{arch}.attention.head_count"))
    head_dim = int(_get(meta, f"{arch}.attention.key_length", 0) or _get(meta, f"{arch}.rope.dimension_count", 0))
    if head_dim and head_dim != int(_get(meta, f"{arch}.rope.dimension_count", head_dim)):
        raise GGUFImportError(f"metadata {arch}.rope.dimension_count differs from key_length: partial RoPE is not supported")
    eos = meta.get("tokenizer.ggml.eos_token_id")
    try:
        return ModelConfig(
            vocab_size=int(vocab),
            hidden_size=int(hidden),
            intermediate_size=int(_get(meta, f"{arch}.feed_forward_length")),
            num_layers=int(_get(meta, f"{arch}.block_count")),
            num_heads=heads,
            num_kv_heads=int(_get(meta, f"{arch}.attention.head_count_kv", heads)),
            head_dim=head_dim or 0,
            rope_theta=float(_get(meta, f"{arch}.rope.freq_base", 10_000.0)),
            # stored as float32 in the file: round-trip through float32 text to get 1e-05, not 9.99e-06
            rms_norm_eps=float(np.format_float_positional(np.float32(_get(meta, f"{arch}.attention.layer_norm_rms_epsilon")))),
            tie_word_embeddings="output.weight" not in shapes,
            max_position_embeddings=int(_get(meta, f"{arch}.context_length", 32768)),
            bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
            eos_token_id=eos,
            pad_token_id=meta.get("tokenizer.ggml.padding_token_id"),
            model_type=arch,
            attention_bias="blk.0.attn_q.bias" in shapes,
        )
    except (ModelConfigError, TypeError, ValueError) as err:
        raise GGUFImportError(f"metadata describes an invalid model: {err}") from None


def hf_tensor(gguf_name: str, values: np.ndarray, config: ModelConfig) -> tuple[str, np.ndarray]:
    """(HF name, HF-layout array) of one dequantised tensor."""
    name = hf_tensor_name(gguf_name)
    if FAMILIES[config.model_type].gguf_permuted_qk:
        if name.endswith("q_proj.weight") or name.endswith("q_proj.bias"):
            values = undo_llama_qk_permutation(values, config.num_heads)
        elif name.endswith("k_proj.weight") or name.endswith("k_proj.bias"):
            values = undo_llama_qk_permutation(values, config.num_kv_heads)
    return name, values


# ------------------------------------------------------------------------------------------ tokenizer

_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp token types


def _pre_tokenizer(kind: str):
    from tokenizers import Regex, pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if kind in ("gpt2", "default"):
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if kind == "smollm":  # digits one by one, then GPT-2's split (SmolLM's own tokenizer.json)
        return pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
        )
    pattern = QWEN2_PATTERN if kind in ("qwen2", "deepseek-r1-qwen") else _LLAMA3_PATTERN
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"), byte_level])


def tokenizer_files(meta: Mapping[str, Any]) -> dict[str, str]:
    """``tokenizer.json`` and ``tokenizer_config.json`` contents for the embedded BPE tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors

    kind = _get(meta, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise GGUFImportError(f"metadata tokenizer.ggml.model is {kind!r}; only byte-level BPE ('gpt2') is supported")
    pre = _get(meta, "tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise GGUFImportError(f"metadata tokenizer.ggml.pre is {pre!r}; supported: {', '.join(PRE_TOKENIZERS)}")
    tokens = list(_get(meta, "tokenizer.ggml.tokens"))
    types = list(meta.get("tokenizer.ggml.token_type") or [1] * len(tokens))
    merges = [tuple(m.split(" ", 1)) for m in _get(meta, "tokenizer.ggml.merges")]
    vocab = {token: i for i, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise GGUFImportError("metadata tokenizer.ggml.tokens holds duplicate tokens")
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    if pre in ("qwen2", "deepseek-r1-qwen"):
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = _pre_tokenizer(pre)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, kind_ in zip(tokens, types) if kind_ == _CONTROL]
    )
    tok.add_tokens(
        [AddedToken(t, special=False, normalized=False) for t, kind_ in zip(tokens, types) if kind_ == _USER_DEFINED]
    )

    def token(key: str) -> str | None:
        index = meta.get(f"tokenizer.ggml.{key}_token_id")
        return tokens[int(index)] if index is not None and 0 <= int(index) < len(tokens) else None

    add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False))
    if add_bos and token("bos") is not None:
        bos = token("bos")
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])]
        )
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": token("bos"),
        "eos_token": token("eos"),
        "unk_token": token("unknown"),
        "pad_token": token("padding"),
        "add_bos_token": add_bos,
        "add_eos_token": bool(meta.get("tokenizer.ggml.add_eos_token", False)),
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(meta.get(f"{meta.get('general.architecture')}.context_length", 32768)),
    }
    if "tokenizer.chat_template" in meta:
        config["chat_template"] = meta["tokenizer.chat_template"]
    return {"tokenizer.json": tok.to_str(pretty=False), "tokenizer_config.json": json.dumps(config, indent=2) + "\n"}


def generation_config(config: ModelConfig) -> dict[str, Any]:
    """generation_config.json: the token ids ``generate`` needs (greedy unless asked otherwise)."""
    return {"bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id, "pad_token_id": config.pad_token_id}

"""The decoder families the model implements: one ``FamilySpec`` each in ``FAMILIES``, keyed by
config.json's ``model_type``. Everything a family fixes is here; the rest of the port reads the table
(docs/models.md §1 and "Adding a model family"):

* ``model_config.ModelConfig`` accepts the registered ``model_type`` values and reads ``qk_norm``
  from the family, so the layers (``layers.Attention``) build q/k norms for the families that have
  them;
* ``hf_format`` reads a family's biases from config.json as the spec says and writes its
  ``architectures`` entry and its own config.json keys;
* ``gguf_weights`` imports a GGUF file whose ``general.architecture`` is a registered ``model_type``,
  undoing llama.cpp's q/k row order where the spec says it was changed.

jax-free, like ``model_config`` (the training config checks a model section without jax).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


def _sliding_window_off(config) -> dict[str, Any]:
    """The sliding-window keys of transformers' Qwen configs, written off (sliding windows are refused)."""
    return {"use_sliding_window": False, "sliding_window": None, "max_window_layers": config.num_layers}


@dataclasses.dataclass(frozen=True)
class FamilySpec:
    """One decoder family: how its checkpoints name and switch the parts of the shared decoder."""

    model_type: str  # config.json's model_type; also the general.architecture of its GGUF files
    architecture: str  # config.json's architectures entry: the transformers class
    qk_norm: bool = False  # a per-head RMSNorm of q and k before RoPE (self_attn.q_norm / k_norm)
    # True: config.json switches the q/k/v biases with attention_bias (default false); False: the family
    # always has them (transformers' Qwen2 config has no switch)
    bias_switch: bool = True
    # the family's own config.json keys, after the shared ones, as save_pretrained writes them
    hf_fields: Callable[[Any], dict[str, Any]] = lambda config: {}
    # llama.cpp's converter interleaved the two rotary halves of every q/k head (undone on import)
    gguf_permuted_qk: bool = False


FAMILIES: dict[str, FamilySpec] = {
    spec.model_type: spec
    for spec in (
        FamilySpec("qwen2", "Qwen2ForCausalLM", bias_switch=False, hf_fields=_sliding_window_off),
        # attention_bias is always written false: a Llama checkpoint with it on also has an o_proj
        # bias, which this port does not implement, so loading one is refused (hf_io's tensor check)
        FamilySpec("llama", "LlamaForCausalLM", gguf_permuted_qk=True,
                   hf_fields=lambda config: {"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1}),
        FamilySpec("qwen3", "Qwen3ForCausalLM", qk_norm=True,
                   hf_fields=lambda config: {**_sliding_window_off(config), "attention_bias": config.attention_bias}),
    )
}


def family(model_type: str) -> FamilySpec:
    """The registered family of ``model_type`` (KeyError if there is none: ``ModelConfig`` checks first)."""
    return FAMILIES[model_type]


__all__ = ["FAMILIES", "FamilySpec", "family"]

"""Test helpers. Tiny random Qwen2 checkpoints are written by transformers itself (the reference).

Nothing is downloaded: ``transformers.Qwen2ForCausalLM`` is built from a random ``Qwen2Config`` and
saved with ``save_pretrained``. HF initialises the q/k/v biases to zero and the norms to one, so both
are perturbed: a bug in either would otherwise go unnoticed.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from flax import nnx  # noqa: E402

# Two torch threads next to JAX on two cores made torch erratic and up to 60x slower (docs/architecture.md §6.2).
torch.set_num_threads(1)

TINY = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    rope_theta=1e6,
    rms_norm_eps=1e-6,
)


def make_hf_model(*, tied: bool, seed: int = 0, family: str = "qwen2", **overrides):
    """A random tiny ``Qwen2ForCausalLM`` / ``LlamaForCausalLM`` / ``Qwen3ForCausalLM`` (fp32, eval
    mode) with perturbed biases and norm weights (Qwen3's q/k norms included)."""
    import transformers

    config_class, model_class = {
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
    }[family]
    torch.manual_seed(seed)
    config = config_class(**{**TINY, "tie_word_embeddings": tied, **overrides})
    model = model_class(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(".bias"):
                param.copy_(0.5 * torch.randn_like(param))
            elif "norm" in name:
                param.add_(0.3 * torch.randn_like(param))
    return model


def torch_logits(model, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
    kwargs = {} if attention_mask is None else {"attention_mask": torch.tensor(attention_mask)}
    with torch.no_grad():
        out = model(torch.tensor(np.asarray(input_ids), dtype=torch.long), **kwargs).logits
    return out.float().numpy()


def random_ids(batch: int, length: int, vocab: int = TINY["vocab_size"], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, size=(batch, length), dtype=np.int32)


@nnx.jit
def _jit_call(model, input_ids, attention_mask, positions):
    return model(input_ids, attention_mask=attention_mask, positions=positions)


def forward(model, input_ids, attention_mask=None, positions=None) -> np.ndarray:
    """Jitted forward as numpy (one compile per config beats eager op-by-op dispatch on CPU)."""
    def arr(x):
        return None if x is None else jnp.asarray(x)

    return np.asarray(_jit_call(model, arr(input_ids), arr(attention_mask), arr(positions)))

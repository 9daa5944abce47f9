"""The policy RL starts from, written as a Hugging Face checkpoint: a local checkpoint or a randomly
initialised Qwen2 (with a word tokenizer built from the environment's text), optionally fine-tuned on
demonstrations first (the supervised warm start).

Used by the trainer (``workdir/warm_start``) and by ``experiments/sft.py``, the general SFT entry point.
Demonstrations are (user prompt, assistant response) pairs: by default the expert paths of the
environment's training tasks (``milegpo_jax.train.expert``), or any list the caller gives.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from milegpo_jax.config import TrainConfig
from milegpo_jax.models import ModelConfig, init_model, load_pretrained, save_pretrained
from milegpo_jax.models.tokenizer import load_tokenizer
from milegpo_jax.models.word_tokenizer import build_word_tokenizer
from milegpo_jax.train.expert import expert_episodes
from milegpo_jax.train.logging import ProgressBar
from milegpo_jax.train.sft import SFTExample, train_sft

Pair = tuple[str, str]  # (user prompt, assistant response)


def chat_ids(tokenizer, prompt: str, response: str) -> SFTExample:
    """Token ids of a one-turn chat and the assistant answer closed by the end-of-turn token."""
    prompt_text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    response_ids = tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return SFTExample(tuple(prompt_ids), tuple(response_ids))


def expert_pairs(config: TrainConfig, episodes: int) -> list[Pair]:
    """Every step of the expert episodes of the first ``episodes`` training tasks, as the collector
    would prompt it (same template and history window)."""
    return [
        (d.prompt, d.response)
        for episode in expert_episodes(
            config.env.name, config.env.adapter_options(), config.env.train_split, range(episodes),
            history_length=config.env.history_length, seed=config.run.seed,
        )
        for d in episode
    ]


def policy_config(config: TrainConfig, tokenizer) -> ModelConfig:
    """The architecture of a randomly initialised policy (``model.preset`` or ``model.architecture``)."""
    cfg = config.model
    if cfg.preset is not None:
        from milegpo_jax.models import preset

        return preset(cfg.preset, param_dtype=cfg.param_dtype, dtype=cfg.compute_dtype)
    arch = cfg.architecture
    return arch.model_config(
        vocab_size=arch.vocab_size or len(tokenizer), param_dtype=cfg.param_dtype, dtype=cfg.compute_dtype,
        remat=cfg.remat, scan_layers=cfg.scan_layers,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )


def write_warm_start(
    config: TrainConfig,
    out: str | Path,
    *,
    tokenizer_dir: str | Path,
    demonstrations: Sequence[Pair] | None = None,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, float]]:
    """Writes the starting policy to ``out`` (config.json, safetensors, tokenizer files); returns the
    SFT loss history (empty without fine-tuning).

    ``demonstrations``: the SFT data; None plays ``config.sft.episodes`` expert episodes (and none
    when that is 0, unless a word tokenizer needs a corpus). A new word tokenizer goes to
    ``tokenizer_dir``. ``progress(step, metrics)`` is called after every SFT step.
    """
    cfg = config.model
    pairs = list(demonstrations) if demonstrations is not None else None

    def data() -> list[Pair]:
        nonlocal pairs
        if pairs is None:
            pairs = expert_pairs(config, max(config.sft.episodes, 1))
        return pairs

    if cfg.hf_checkpoint is not None:
        model, _ = load_pretrained(cfg.hf_checkpoint, dtype=cfg.param_dtype, compute_dtype=cfg.compute_dtype,
                                   scan_layers=cfg.scan_layers, remat=cfg.remat)
        source = Path(cfg.tokenizer_dir or cfg.hf_checkpoint)
    elif cfg.tokenizer_dir:
        source = Path(cfg.tokenizer_dir)
    else:  # a word tokenizer over the demonstrations' text
        source = build_word_tokenizer([text for pair in data() for text in pair], tokenizer_dir)
    tokenizer = load_tokenizer(source)
    if cfg.hf_checkpoint is None:
        model = init_model(policy_config(config, tokenizer), seed=cfg.init_seed)

    history: list[dict[str, float]] = []
    if demonstrations is not None or config.sft.episodes > 0:
        examples = [chat_ids(tokenizer, prompt, response) for prompt, response in data()]
        if not examples:
            raise ValueError("no demonstrations to fine-tune on")
        sft = config.sft
        steps = max(1, sft.epochs * len(examples) // sft.batch_rows)
        with ProgressBar(steps, keys=("loss",), description="SFT warm start", enabled=config.logging.progress_bar) as bar:
            def report(step: int, metrics: dict[str, Any]) -> None:
                bar.update({"loss": metrics["loss"]})
                if progress is not None:
                    progress(step, metrics)

            history = train_sft(
                model, examples, pad_id=tokenizer.pad_token_id, steps=steps, batch_size=sft.batch_rows,
                learning_rate=sft.learning_rate, seed=config.run.seed, progress=report,
            )
    out = Path(out)
    save_pretrained(model, model.config, out)
    # The tokenizer's own files, byte for byte: a transformers round trip re-saves a word-level
    # tokenizer under a generic backend class that then loads with a different vocabulary mapping.
    for file in source.iterdir():
        if file.is_file() and not (file.name == "config.json" or file.name.startswith("model")):
            shutil.copy2(file, out / file.name)
    return history

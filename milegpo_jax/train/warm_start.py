"""The policy RL starts from, written as a Hugging Face checkpoint: a local checkpoint or a randomly
initialised Qwen2 (with a word tokenizer built from the environment's text), optionally fine-tuned on
demonstrations first (the supervised warm start).

Used by the trainer (``workdir/warm_start``) and by ``experiments/sft.py``, the general SFT entry point.
Demonstrations are (user prompt, assistant response) pairs: by default the expert paths of the
environment's training tasks (``milegpo_jax.train.expert``), or any list the caller gives.

The directory is written whole or not at all: everything goes to a temporary sibling that is renamed
into place once complete, with ``warm_start_inputs.json`` (the config keys the warm start depends on,
and their hash) written last. ``warm_start_status`` compares a directory against a config.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from milegpo_jax.config import TrainConfig, describe_changes, to_dict
from milegpo_jax.models import ModelConfig, init_model, load_pretrained, save_pretrained
from milegpo_jax.models.runtime import RuntimeOptions
from milegpo_jax.models.tokenizer import TokenizerFilesError, check_tokenizer_files, load_tokenizer
from milegpo_jax.models.word_tokenizer import build_word_tokenizer
from milegpo_jax.train.expert import expert_episodes
from milegpo_jax.train.logging import ProgressBar
from milegpo_jax.train.sft import SFTExample, train_sft

Pair = tuple[str, str]  # (user prompt, assistant response)
INPUTS_FILE = "warm_start_inputs.json"  # written last: its presence marks a complete warm start


def warm_start_inputs(config: TrainConfig, demonstrations: Sequence[Pair] | None = None) -> dict[str, Any]:
    """Every config value the warm start depends on (model, SFT, the env text it is built from, the
    seed), plus a digest of explicit demonstrations."""
    data = to_dict(config)
    env = data["env"]
    # remat and scan_layers change how the model runs, not what it computes: a warm start serves both
    model = {key: value for key, value in data["model"].items() if key not in ("remat", "scan_layers")}
    inputs: dict[str, Any] = {
        "model": model,
        "sft": data["sft"],
        "env": {key: env[key] for key in ("name", "options", "train_split", "history_length")},
        "run": {"seed": data["run"]["seed"]},
    }
    if demonstrations is not None:
        text = json.dumps([list(pair) for pair in demonstrations], ensure_ascii=False)
        inputs["demonstrations_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    return inputs


def inputs_hash(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def warm_start_status(directory: Path, config: TrainConfig) -> tuple[str, list[str]]:
    """``("missing" | "incomplete" | "matches" | "differs", changed keys)`` of a warm-start directory."""
    directory = Path(directory)
    if not directory.exists():
        return "missing", []
    record = directory / INPUTS_FILE
    if not record.is_file() or not (directory / "config.json").is_file():
        return "incomplete", []
    try:  # e.g. tokenizer files deleted by hand: before any checkpoint the warm start is rebuilt
        check_tokenizer_files(directory)
    except TokenizerFilesError as error:
        return "incomplete", [str(error)]
    try:
        stored = json.loads(record.read_text(encoding="utf-8"))["inputs"]
    except (ValueError, KeyError, TypeError):
        return "incomplete", []
    current = warm_start_inputs(config)
    if inputs_hash(stored) == inputs_hash(current):
        return "matches", []
    return "differs", describe_changes(stored, current)


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

        return preset(cfg.preset)
    arch = cfg.architecture
    return arch.model_config(
        vocab_size=arch.vocab_size or len(tokenizer), eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def write_warm_start(
    config: TrainConfig,
    out: str | Path,
    *,
    tokenizer_dir: str | Path,
    demonstrations: Sequence[Pair] | None = None,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, float]]:
    """Writes the starting policy to ``out`` (config.json, safetensors, tokenizer files, the inputs
    record), replacing whatever is there; returns the SFT loss history (empty without fine-tuning).

    ``demonstrations``: the SFT data; None plays ``config.sft.episodes`` expert episodes (and none
    when that is 0, unless a word tokenizer needs a corpus). A new word tokenizer goes to
    ``tokenizer_dir``. ``progress(step, metrics)`` is called after every SFT step.
    """
    out = Path(out)
    scratch = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        history = _build(config, scratch, tokenizer_dir=tokenizer_dir, demonstrations=demonstrations, progress=progress)
        record = {"inputs": warm_start_inputs(config, demonstrations)}
        record["hash"] = inputs_hash(record["inputs"])
        (scratch / INPUTS_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if out.exists():  # an incomplete or outdated one: the complete new one replaces it
            shutil.rmtree(out)
        os.replace(scratch, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return history


def _build(config, out: Path, *, tokenizer_dir, demonstrations, progress) -> list[dict[str, float]]:
    cfg = config.model
    runtime = RuntimeOptions.from_config(config)
    pairs = list(demonstrations) if demonstrations is not None else None

    def data() -> list[Pair]:
        nonlocal pairs
        if pairs is None:
            pairs = expert_pairs(config, max(config.sft.episodes, 1))
        return pairs

    if cfg.hf_checkpoint is not None:
        model, _ = load_pretrained(cfg.hf_checkpoint, runtime=runtime)
        source = Path(cfg.tokenizer_dir or cfg.hf_checkpoint)
    elif cfg.tokenizer_dir:
        source = Path(cfg.tokenizer_dir)
    else:  # a word tokenizer over the demonstrations' text
        source = build_word_tokenizer([text for pair in data() for text in pair], tokenizer_dir)
    tokenizer = load_tokenizer(source)
    if cfg.hf_checkpoint is None:
        model = init_model(policy_config(config, tokenizer), runtime, seed=cfg.init_seed)

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

            model, history = train_sft(
                model, examples, pad_id=tokenizer.pad_token_id, steps=steps, batch_size=sft.batch_rows,
                learning_rate=sft.learning_rate, seed=config.run.seed, chunk_size=runtime.chunk_size,
                progress=report, share_prefixes=config.ppo.share_prefixes,
            )
    save_pretrained(model, model.config, out)
    # The tokenizer's own files, byte for byte: a transformers round trip re-saves a word-level
    # tokenizer under a generic backend class that then loads with a different vocabulary mapping.
    for file in source.iterdir():
        if file.is_file() and not (file.name == "config.json" or file.name.startswith("model")):
            shutil.copy2(file, out / file.name)
    return history

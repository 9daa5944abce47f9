"""The policy RL starts from, written as a Hugging Face checkpoint: a local checkpoint or a randomly
initialised Qwen2 (with a word tokenizer built from the environment's text), optionally fine-tuned on
demonstrations first (the supervised warm start).

Used by the trainer (``workdir/warm_start``) and by ``experiments/sft.py``, the general SFT entry point.
Demonstrations are (user prompt, assistant response) pairs: by default the expert paths of the
environment's training tasks (``milegpo_jax.train.expert``), or any list the caller gives.

The directory is written whole or not at all: everything goes to a temporary sibling that is renamed
into place once complete, with ``warm_start_inputs.json`` (the config keys the warm start depends on,
and their hash) written last. ``warm_start_status`` compares a directory against a run's inputs. It
takes a ``WarmStartPlan`` (option objects and values), not the config: the trainer builds that.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from milegpo_jax.changes import describe_changes
from milegpo_jax.models import ModelConfig, init_model, load_pretrained, save_pretrained
from milegpo_jax.models.model_config import ArchitectureConfig
from milegpo_jax.models.runtime import RuntimeOptions
from milegpo_jax.models.tokenizer import TokenizerFilesError, check_tokenizer_files, load_tokenizer
from milegpo_jax.models.word_tokenizer import build_word_tokenizer
from milegpo_jax.train.expert import expert_episodes
from milegpo_jax.train.logging import ProgressBar
from milegpo_jax.train.sft import SFTExample, train_sft

Pair = tuple[str, str]  # (user prompt, assistant response)
INPUTS_FILE = "warm_start_inputs.json"  # written last: its presence marks a complete warm start


@dataclasses.dataclass(frozen=True)
class WarmStartPlan:
    """What a warm start is built from; the trainer makes it from its config (``trainer.warm_start_plan``)."""

    inputs: Mapping[str, Any]  # the config values it depends on (``config.identity.warm_start_inputs``)
    runtime: RuntimeOptions
    hf_checkpoint: str | None = None  # else a random policy of preset or architecture
    preset: str | None = None
    architecture: ArchitectureConfig | None = None
    init_seed: int = 0
    tokenizer_dir: str | None = None
    seed: int = 0  # the expert episodes' and the SFT batches'
    # the supervised warm start (the config's sft section; episodes 0: none)
    sft_episodes: int = 0
    sft_epochs: int = 1
    sft_learning_rate: float = 1e-3
    sft_batch_rows: int = 32
    sft_skip_repeated_prompts: bool = False
    share_prefixes: bool = True
    # where expert episodes come from: the environment, its adapter options, split and prompt history
    env: str = ""
    env_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    train_split: str = "train"
    history_length: int = 2
    progress_bar: bool = True


def with_demonstrations(inputs: Mapping[str, Any], demonstrations: Sequence[Pair] | None) -> dict[str, Any]:
    """``inputs`` plus a digest of explicit demonstrations (when given)."""
    inputs = dict(inputs)
    if demonstrations is not None:
        text = json.dumps([list(pair) for pair in demonstrations], ensure_ascii=False)
        inputs["demonstrations_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    return inputs


def inputs_hash(inputs: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def warm_start_status(directory: Path, inputs: Mapping[str, Any]) -> tuple[str, list[str]]:
    """``("missing" | "incomplete" | "matches" | "differs", changed keys)`` of a warm-start directory
    against the ``inputs`` of the run at hand (``WarmStartPlan.inputs``)."""
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
    if inputs_hash(stored) == inputs_hash(inputs):
        return "matches", []
    return "differs", describe_changes(stored, inputs)


def chat_ids(tokenizer, prompt: str, response: str) -> SFTExample:
    """Token ids of a one-turn chat and the assistant answer closed by the end-of-turn token."""
    prompt_text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    response_ids = tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return SFTExample(tuple(prompt_ids), tuple(response_ids))


def expert_pairs(plan: WarmStartPlan, episodes: int) -> list[Pair]:
    """Every step of the expert episodes of the first ``episodes`` training tasks, as the collector
    would prompt it (same template and history window)."""
    return [
        (d.prompt, d.response)
        for episode in expert_episodes(
            plan.env, dict(plan.env_options), plan.train_split, range(episodes),
            history_length=plan.history_length, seed=plan.seed, skip_repeated_prompts=plan.sft_skip_repeated_prompts,
        )
        for d in episode
    ]


def policy_config(plan: WarmStartPlan, tokenizer) -> ModelConfig:
    """The architecture of a randomly initialised policy (``preset`` or ``architecture``)."""
    if plan.preset is not None:
        from milegpo_jax.models import preset

        return preset(plan.preset)
    arch = plan.architecture
    return arch.model_config(
        vocab_size=arch.vocab_size or len(tokenizer), eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def write_warm_start(
    plan: WarmStartPlan,
    out: str | Path,
    *,
    tokenizer_dir: str | Path,
    demonstrations: Sequence[Pair] | None = None,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
) -> list[dict[str, float]]:
    """Writes the starting policy to ``out`` (config.json, safetensors, tokenizer files, the inputs
    record), replacing whatever is there; returns the SFT loss history (empty without fine-tuning).

    ``demonstrations``: the SFT data; None plays ``plan.sft_episodes`` expert episodes (and none
    when that is 0, unless a word tokenizer needs a corpus). A new word tokenizer goes to
    ``tokenizer_dir``. ``progress(step, metrics)`` is called after every SFT step.
    """
    out = Path(out)
    scratch = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        history = _build(plan, scratch, tokenizer_dir=tokenizer_dir, demonstrations=demonstrations, progress=progress)
        record = {"inputs": with_demonstrations(plan.inputs, demonstrations)}
        record["hash"] = inputs_hash(record["inputs"])
        (scratch / INPUTS_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        if out.exists():  # an incomplete or outdated one: the complete new one replaces it
            shutil.rmtree(out)
        os.replace(scratch, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return history


def _build(plan: WarmStartPlan, out: Path, *, tokenizer_dir, demonstrations, progress) -> list[dict[str, float]]:
    runtime = plan.runtime
    pairs = list(demonstrations) if demonstrations is not None else None

    def data() -> list[Pair]:
        nonlocal pairs
        if pairs is None:
            pairs = expert_pairs(plan, max(plan.sft_episodes, 1))
        return pairs

    if plan.hf_checkpoint is not None:
        model, _ = load_pretrained(plan.hf_checkpoint, runtime=runtime)
        source = Path(plan.tokenizer_dir or plan.hf_checkpoint)
    elif plan.tokenizer_dir:
        source = Path(plan.tokenizer_dir)
    else:  # a word tokenizer over the demonstrations' text
        source = build_word_tokenizer([text for pair in data() for text in pair], tokenizer_dir)
    tokenizer = load_tokenizer(source)
    if plan.hf_checkpoint is None:
        model = init_model(policy_config(plan, tokenizer), runtime, seed=plan.init_seed)

    history: list[dict[str, float]] = []
    if demonstrations is not None or plan.sft_episodes > 0:
        examples = [chat_ids(tokenizer, prompt, response) for prompt, response in data()]
        if not examples:
            raise ValueError("no demonstrations to fine-tune on")
        steps = max(1, plan.sft_epochs * len(examples) // plan.sft_batch_rows)
        with ProgressBar(steps, keys=("loss",), description="SFT warm start", enabled=plan.progress_bar) as bar:
            def report(step: int, metrics: dict[str, Any]) -> None:
                bar.update({"loss": metrics["loss"]})
                if progress is not None:
                    progress(step, metrics)

            model, history = train_sft(
                model, examples, pad_id=tokenizer.pad_token_id, steps=steps, batch_size=plan.sft_batch_rows,
                learning_rate=plan.sft_learning_rate, seed=plan.seed, chunk_size=runtime.chunk_size,
                progress=report, share_prefixes=plan.share_prefixes,
            )
    save_pretrained(model, model.config, out)
    # The tokenizer's own files, byte for byte: a transformers round trip re-saves a word-level
    # tokenizer under a generic backend class that then loads with a different vocabulary mapping.
    for file in source.iterdir():
        if file.is_file() and not (file.name == "config.json" or file.name.startswith("model")):
            shutil.copy2(file, out / file.name)
    return history

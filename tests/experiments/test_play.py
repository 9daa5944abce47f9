"""experiments.play refuses bad input in one line with exit status 2, before loading or starting anything."""

from __future__ import annotations

import json
import time

import pytest

from experiments import play
from milegpo_jax.models import ModelConfig, init_model, save_pretrained
from milegpo_jax.models.word_tokenizer import build_word_tokenizer

TINY = ModelConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2, num_kv_heads=1)


@pytest.fixture(scope="module")
def checkpoint_without_tokenizer(tmp_path_factory):
    directory = tmp_path_factory.mktemp("weights_only")
    save_pretrained(init_model(TINY, seed=0), TINY, directory)  # config.json + safetensors, no tokenizer
    return directory


def _refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        play.main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    return err


def test_a_huge_task_count_is_refused_up_front(checkpoint_without_tokenizer, capsys):
    start = time.perf_counter()
    err = _refused(["--checkpoint", str(checkpoint_without_tokenizer), "--env", "textworld_express", "--tasks", "100000000"], capsys)
    assert "--tasks 100000000: at most 4096 per env server" in err
    assert time.perf_counter() - start < 5  # nothing built, no server started


def test_a_bad_seed_is_refused_up_front(checkpoint_without_tokenizer, capsys):
    err = _refused(["--checkpoint", str(checkpoint_without_tokenizer), "--env", "textworld_express", "--tasks", "1",
                    "--seed", "-1"], capsys)
    assert err == "play: error: --seed -1: a seed is an integer in 0..2**32-1"


@pytest.mark.parametrize(
    "files, missing",
    [
        ({}, "tokenizer.json"),
        ({"vocab.json": "{}"}, "merges.txt"),
        ({"tokenizer.json": "WORD"}, "tokenizer_config.json"),
        ({"tokenizer.json": "WORD", "tokenizer_config.json": json.dumps({"eos_token": "<eos>"})}, "tokenizer_config.json: no chat_template"),
        ({"tokenizer.json": "WORD", "tokenizer_config.json": "{not json"}, "tokenizer_config.json: not a JSON file"),
    ],
)
def test_a_checkpoint_without_tokenizer_files_names_the_missing_one(tmp_path, checkpoint_without_tokenizer, capsys, files, missing):
    for source in checkpoint_without_tokenizer.iterdir():
        (tmp_path / source.name).write_bytes(source.read_bytes())
    if files.get("tokenizer.json") == "WORD":  # a real tokenizer.json, as the warm start writes it
        build_word_tokenizer(["go north", "take key"], tmp_path / "word")
        files = {**files, "tokenizer.json": (tmp_path / "word" / "tokenizer.json").read_text()}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    err = _refused(["--checkpoint", str(tmp_path), "--env", "textworld_express", "--tasks", "1"], capsys)
    assert f"{tmp_path}/{missing}" in err, err

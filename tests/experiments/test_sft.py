"""experiments/sft.py: fine-tunes a policy on TextWorldExpress expert paths or on a JSON-lines file and
writes a checkpoint the trainer and transformers load; bad data is refused with the line named."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.sft import main
from milegpo_jax.models import load_pretrained, token_logprobs
from milegpo_jax.models.tokenizer import load_tokenizer

TINY = [
    "--config.model.architecture.hidden_size=32",
    "--config.model.architecture.intermediate_size=64",
    "--config.model.architecture.num_layers=1",
    "--config.logging.progress_bar=false",
]


def _response_logprob(model, tokenizer, prompt, response):
    from milegpo_jax.train.warm_start import chat_ids

    example = chat_ids(tokenizer, prompt, response)
    ids = np.asarray([list(example.prompt_ids) + list(example.response_ids)], np.int32)
    logprobs = np.asarray(token_logprobs(model, ids[:, :-1], ids[:, 1:]))[0]
    return float(logprobs[len(example.prompt_ids) - 1 :].sum())


@pytest.mark.slow
def test_expert_paths_fine_tune_a_loadable_checkpoint(tmp_path, capsys):
    out = tmp_path / "sft"
    figures = main(["--config", "experiments/configs/demo.py", "--out", str(out), *TINY,
                    "--config.sft.episodes=3", "--config.sft.epochs=4", "--config.sft.batch_rows=4"])
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == figures
    assert figures["steps"] > 1 and figures["loss_last"] < figures["loss_first"]
    history = [json.loads(line) for line in (out / "sft_history.jsonl").read_text().splitlines()]
    assert len(history) == figures["steps"] and history[-1]["loss"] == pytest.approx(figures["loss_last"])
    _, config = load_pretrained(out)
    tokenizer = load_tokenizer(out)
    assert config.vocab_size == len(tokenizer) and config.hidden_size == 32
    from transformers import AutoModelForCausalLM

    assert AutoModelForCausalLM.from_pretrained(out).config.hidden_size == 32  # a real HF checkpoint


def test_jsonl_demonstrations_are_learnt(tmp_path):
    data = tmp_path / "demos.jsonl"
    pairs = [("where is the coin", "<action> take coin </action>"), ("open the door", "<action> open door </action>")]
    data.write_text("\n".join(json.dumps({"prompt": p, "response": r}) for p, r in pairs) + "\n\n")
    common = ["--config", "experiments/configs/demo.py", "--data", str(data), *TINY,
              "--config.sft.epochs=1", "--config.sft.batch_rows=2"]
    main([*common, "--out", str(tmp_path / "one_step")])
    main([*common, "--out", str(tmp_path / "trained"), "--config.sft.epochs=60", "--config.sft.learning_rate=3e-3"])
    start, _ = load_pretrained(tmp_path / "one_step")
    trained, _ = load_pretrained(tmp_path / "trained")
    tokenizer = load_tokenizer(tmp_path / "trained")
    for prompt, response in pairs:
        assert _response_logprob(trained, tokenizer, prompt, response) > _response_logprob(start, tokenizer, prompt, response) + 1.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "a", "response": "b"}\nnot json\n', "demos.jsonl:2: not JSON"),
        ('{"prompt": "a"}\n', 'demos.jsonl:1: expected {"prompt"'),
        ("\n", "demos.jsonl: no demonstrations"),
    ],
)
def test_bad_data_is_refused_with_the_line(tmp_path, capsys, content, message):
    data = tmp_path / "demos.jsonl"
    data.write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main(["--config", "experiments/configs/demo.py", "--data", str(data), "--out", str(tmp_path / "out"), *TINY])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_existing_checkpoint_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "config.json").write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        main(["--config", "experiments/configs/demo.py", "--out", str(tmp_path / "out"), *TINY])
    assert exit_info.value.code == 2 and "already holds a checkpoint" in capsys.readouterr().err

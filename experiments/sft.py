"""Supervised fine-tuning entry point: a policy checkpoint fine-tuned on demonstrations.

    python -m experiments.sft --config experiments/configs/NAME.py --out DIR [--data demos.jsonl] [--config.a.b=value ...]

The policy is the config's (``model.hf_checkpoint``, or a random ``model.preset`` / ``model.architecture``
with a word tokenizer built from the demonstrations' text). The data is ``--data``, a JSON-lines file of
``{"prompt": "<user message>", "response": "<assistant message>"}`` objects, or else the expert paths of
the first ``sft.episodes`` training tasks of the config's environment, prompted exactly as the rollout
collector prompts them. ``sft.epochs``, ``sft.learning_rate`` and ``sft.batch_rows`` set the training.

Writes DIR as a Hugging Face checkpoint (config.json, safetensors, tokenizer files) that
``--config.model.hf_checkpoint=DIR`` trains from, the loss per step in ``DIR/sft_history.jsonl``, and
ends with one JSON line of figures. The trainer runs the same warm start itself when ``sft.episodes``
is set (``milegpo_jax.train.warm_start``); both update through the project's one train step
(``milegpo_jax.train.step.TrainStep`` with the SFT loss, optimizer from ``make_optimizer``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from experiments.train import build_config
from milegpo_jax.config import ConfigError, split_config_flags


def read_demonstrations(path: Path) -> list[tuple[str, str]]:
    """``(prompt, response)`` pairs of a JSON-lines file; ValueError naming the bad line."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(record, dict) or not all(isinstance(record.get(k), str) and record[k].strip() for k in ("prompt", "response")):
            raise ValueError(f'{path}:{number}: expected {{"prompt": "...", "response": "..."}} with non-empty strings')
        pairs.append((record["prompt"], record["response"]))
    if not pairs:
        raise ValueError(f"{path}: no demonstrations")
    return pairs


def main(argv: list[str] | None = None) -> dict:
    overrides, rest = split_config_flags(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="experiments/configs/NAME.py[:arg]")
    parser.add_argument("--out", required=True, help="directory for the fine-tuned Hugging Face checkpoint")
    parser.add_argument("--data", help="JSON lines of {prompt, response}; default: expert paths of sft.episodes training tasks")
    args = parser.parse_args(rest)
    try:
        config = build_config(args.config, overrides)
        config.check_runnable()
        demonstrations = read_demonstrations(Path(args.data)) if args.data else None
    except (ConfigError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    if demonstrations is None and config.sft.episodes == 0:
        print("error: no data: pass --data FILE or set --config.sft.episodes=N (expert episodes)", file=sys.stderr)
        sys.exit(2)
    out = Path(args.out)
    if (out / "config.json").exists():
        print(f"error: {out} already holds a checkpoint; choose another --out", file=sys.stderr)
        sys.exit(2)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(f"error: {out} exists and is not an empty directory; choose another --out", file=sys.stderr)
        sys.exit(2)

    from milegpo_jax.train.trainer import warm_start_plan
    from milegpo_jax.train.warm_start import write_warm_start

    start = time.time()
    # out appears only when complete (written to a temporary sibling, then renamed)
    with tempfile.TemporaryDirectory() as scratch:  # a new word tokenizer is built here, then copied to out
        history = write_warm_start(warm_start_plan(config), out, tokenizer_dir=scratch, demonstrations=demonstrations)
    with open(out / "sft_history.jsonl", "w", encoding="utf-8") as file:
        file.writelines(json.dumps({"step": step, **{k: float(v) for k, v in record.items()}}) + "\n" for step, record in enumerate(history, start=1))
    figures = {
        "job": "sft",
        "out": str(out),
        "steps": len(history),
        "loss_first": float(history[0]["loss"]),
        "loss_last": float(history[-1]["loss"]),
        "wall_s": round(time.time() - start, 1),
    }
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

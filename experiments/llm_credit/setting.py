"""``python -m experiments.llm_credit setting``: how long a TextWorldExpress setting's expert paths are
and what its prompts cost, to choose the study's game (docs/results/llm-credit.md, "Choosing the game").

    python -m experiments.llm_credit setting --game coin --params numLocations=11 --cap 15 --tasks 32

Replays the engine's seeded gold path (envs_bridge/textworld_express/gold.py) of the first ``--tasks``
held-out tasks (``eval_id``, the study's evaluation list) with the collector's prompts, and reports the
gold path lengths (all of them, and how many fit the cap), and the prompt tokens per step under the
SmolLM2 chat template with ``--history`` pairs in the prompt. The uniform policy's success comes from
``python -m experiments.arena uniform``. The last stdout line is one JSON object; bad input is one line
naming the flag, exit 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from envs_bridge.base import EnvError


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.llm_credit setting", description=__doc__.split("\n")[0])
    parser.add_argument("--game", default="coin")
    parser.add_argument("--params", default="", help="TextWorldExpress parameters, k=v,...")
    parser.add_argument("--cap", type=int, default=15, help="actions per episode")
    parser.add_argument("--history", type=int, default=0, help="history pairs in the prompt")
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--split", default="eval_id")
    parser.add_argument("--checkpoint", default=None, help="tokenizer directory (default: the converted SmolLM2)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for flag, value, low, high in (("--cap", args.cap, 1, 1000), ("--history", args.history, 0, 50), ("--tasks", args.tasks, 1, 1000)):
        if not low <= value <= high:
            print(f"experiments.llm_credit setting: {flag} {value}: must lie in {low}..{high}", file=sys.stderr)
            return 2
    from milegpo_jax.models.tokenizer import load_tokenizer
    from milegpo_jax.train.expert import expert_episodes

    if args.checkpoint is None:
        from milegpo_jax.models.import_gguf import converted_checkpoint

        args.checkpoint = str(converted_checkpoint())
    tokenizer = load_tokenizer(args.checkpoint)
    options = {"game": args.game, "game_params": args.params, "max_steps": 1000}  # the whole path, then the cap
    lengths, tokens = [], []
    try:
        for episode in expert_episodes("textworld_express", options, args.split, range(args.tasks),
                                       history_length=args.history):
            lengths.append(len(episode))
            for step in episode[: args.cap]:
                text = tokenizer.apply_chat_template([{"role": "user", "content": step.prompt}],
                                                     add_generation_prompt=True, tokenize=False)
                tokens.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    except EnvError as error:
        print(f"experiments.llm_credit setting: --game/--params: {error}", file=sys.stderr)
        return 2
    print(json.dumps({
        "job": "llm-credit-setting", "game": args.game, "params": args.params, "cap": args.cap,
        "history": args.history, "split": args.split, "tasks": args.tasks,
        "gold_mean": round(statistics.fmean(lengths), 2), "gold_median": statistics.median(lengths),
        "gold_min": min(lengths), "gold_max": max(lengths),
        "gold_within_cap": sum(n <= args.cap for n in lengths),
        "prompt_tokens_mean": round(statistics.fmean(tokens), 1), "prompt_tokens_max": max(tokens),
    }))
    return 0

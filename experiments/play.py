"""A checkpoint plays an environment with the training prompts (no training).

    python -m experiments.play --checkpoint DIR --env {alfworld,webshop,textworld_express} --tasks N \
        [--temperature T] [--split eval_id] [--max-steps S] [--option KEY=VALUE ...] [--transcripts FILE]

Episodes run through the env-server pool and ``milegpo_jax.rollout.collect``, exactly as a training
rollout does: the chat template, the history, the ``<think>``/``<action>`` projection and the
invalid-action handling are the trainer's. One episode per task (tasks 0..N-1 of the split, one group
of size 1 each). Prints one line per episode, then one JSON line: success rate, mean score, share of
well-formed responses, mean steps, mean prompt/response tokens and generation tokens per second.
``--transcripts FILE`` writes every prompt and response of every episode as text. docs/models.md §5
shows what SmolLM2-135M-Instruct does with it.

Bad input is one line and exit status 2, before the model loads where it can be: bad flags, more
``--tasks`` than the servers hold (4,096 envs each) or than the split has, a checkpoint without
config.json, tokenizer files or chat template (the missing file named), an adapter option refused.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import NoReturn

from envs_bridge.protocol import MAX_BATCH
from envs_bridge.specs import env_names
from milegpo_jax.config.checks import seed_problem

# Episode caps of the training recipes (experiments/configs).
DEFAULT_MAX_STEPS = {"alfworld": 50, "webshop": 30, "textworld_express": 50}
DEFAULT_OPTIONS = {"textworld_express": {"game": "twc"}}


class TimedPolicy:
    """A policy that also counts generated tokens and the seconds spent generating them."""

    def __init__(self, policy):
        self.policy = policy
        self.seconds = 0.0
        self.tokens = 0

    def generate(self, prompts, *, temperature, seed):
        start = time.perf_counter()
        generations = self.policy.generate(prompts, temperature=temperature, seed=seed)
        self.seconds += time.perf_counter() - start
        self.tokens += sum(len(g.response_ids) for g in generations)
        return generations


def _option(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--option {text!r}: expected KEY=VALUE")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value  # a plain string, e.g. a path


def _refuse(message: str) -> NoReturn:
    print(f"play: error: {message}", file=sys.stderr)
    sys.exit(2)


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line and exit 2, no usage dump
        _refuse(message)


def parse_args(argv):
    parser = _OneLineParser(prog="python -m experiments.play", description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True, help="Hugging Face checkpoint directory (with tokenizer files)")
    parser.add_argument("--env", required=True, choices=env_names())
    parser.add_argument("--tasks", type=int, required=True, help="episodes: tasks 0..N-1 of the split")
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    parser.add_argument("--split", default="eval_id", choices=("train", "eval_id", "eval_ood"))
    parser.add_argument("--max-steps", type=int, default=None, help="actions per episode (default: the recipe's)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--max-prompt-tokens", type=int, default=4096)
    parser.add_argument("--history-length", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-servers", type=int, default=1)
    parser.add_argument("--option", type=_option, action="append", default=[], help="adapter option KEY=VALUE")
    parser.add_argument("--transcripts", type=Path, default=None, help="write every prompt and response here")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.num_servers < 1 or (args.max_steps is not None and args.max_steps < 1):
        parser.error("--tasks, --num-servers and --max-steps must be >= 1")
    # Refused before anything is built: a server holds at most MAX_BATCH envs (envs_bridge/PROTOCOL.md).
    if args.tasks > MAX_BATCH * args.num_servers:
        parser.error(f"--tasks {args.tasks}: at most {MAX_BATCH} per env server ({MAX_BATCH * args.num_servers} "
                     f"with --num-servers {args.num_servers})")
    if args.num_servers > args.tasks:
        parser.error(f"--num-servers {args.num_servers}: more servers than --tasks {args.tasks}")
    if args.temperature < 0:
        parser.error("--temperature must be >= 0")
    if seed_problem(args.seed):
        parser.error(f"--seed {args.seed}: {seed_problem(args.seed)}")
    if not (args.checkpoint and (Path(args.checkpoint) / "config.json").is_file()):
        parser.error(f"--checkpoint {args.checkpoint}: no config.json there")
    return args


def transcript_text(batch, tokenizer) -> str:
    """Every step of every episode: the prompt as the model saw it, its response and the action."""
    lines = []
    episodes = {(e.group, e.trajectory): e for e in batch.episodes}
    for (group, trajectory), episode in sorted(episodes.items()):
        lines.append(f"===== task {group}: won={episode.won} score={episode.score} steps={episode.steps}")
        for row in batch.rows:
            if (row.group, row.trajectory) != (group, trajectory):
                continue
            prompt = tokenizer.decode(list(row.response.prompt_ids), skip_special_tokens=False)
            lines += [f"--- step {row.t} prompt", prompt, f"--- step {row.t} response", row.response.text,
                      f"--- step {row.t} action: {row.action!r} (well-formed: {row.valid}, reward {row.reward})"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from envs_bridge.client import EnvPool, EnvRequestError
    from envs_bridge.groups import GroupPlan
    from milegpo_jax.models import CheckpointError, load_pretrained, load_tokenizer
    from milegpo_jax.rollout.collector import collect
    from milegpo_jax.rollout.policy import SamplerPolicy
    from milegpo_jax.sampling import SamplingConfig

    try:
        tokenizer = load_tokenizer(args.checkpoint)  # first: its file check takes no time, the weights do
        model, _ = load_pretrained(args.checkpoint)
    except (CheckpointError, OSError) as err:
        _refuse(str(err))
    max_steps = args.max_steps or DEFAULT_MAX_STEPS[args.env]
    options = {**DEFAULT_OPTIONS.get(args.env, {}), **dict(args.option), "max_steps": max_steps}
    policy = TimedPolicy(SamplerPolicy(model, tokenizer, SamplingConfig(
        max_new_tokens=args.max_new_tokens, max_cache_len=args.max_prompt_tokens + args.max_new_tokens,
    )))
    plan = GroupPlan(args.split, tuple(range(args.tasks)), (args.seed,) * args.tasks, 1)
    start = time.perf_counter()
    try:
        pool = EnvPool(args.env, args.tasks, num_servers=args.num_servers, env_options=options)
    except EnvRequestError as err:  # e.g. an --option the adapter refuses
        _refuse(str(err))
    with pool:
        if args.tasks > pool.num_tasks(args.split):
            _refuse(f"--tasks {args.tasks}: the {args.split} split of {args.env} holds {pool.num_tasks(args.split)} tasks")
        batch = collect(
            pool, policy, plan, env=args.env, max_steps=max_steps, history_length=args.history_length,
            temperature=args.temperature, seed=args.seed,
            on_turn=lambda turn, active: print(f"turn {turn}: {active} episodes running", file=sys.stderr, flush=True),
        )
    for e in sorted(batch.episodes, key=lambda e: e.group):
        rows = [r for r in batch.rows if r.group == e.group]
        valid = sum(r.valid for r in rows)
        print(f"episode task={e.group} won={e.won} score={e.score:.3f} steps={e.steps} "
              f"well_formed={valid}/{len(rows)} aborted={e.aborted} type={e.task_type}", flush=True)
    if args.transcripts is not None:
        args.transcripts.parent.mkdir(parents=True, exist_ok=True)
        args.transcripts.write_text(transcript_text(batch, tokenizer))
    rows, episodes = batch.rows, batch.episodes
    n_rows = max(len(rows), 1)
    summary = {
        "env": args.env, "split": args.split, "checkpoint": str(args.checkpoint), "episodes": len(episodes),
        "temperature": args.temperature,
        "success_rate": sum(e.won for e in episodes) / len(episodes),
        "mean_score": sum(e.score for e in episodes) / len(episodes),
        "well_formed_share": sum(r.valid for r in rows) / n_rows,
        "mean_steps": sum(e.steps for e in episodes) / len(episodes),
        "aborted": sum(e.aborted for e in episodes),
        "mean_prompt_tokens": sum(len(r.response.prompt_ids) for r in rows) / n_rows,
        "mean_response_tokens": sum(len(r.response.response_ids) for r in rows) / n_rows,
        "generation_tokens_per_s": policy.tokens / policy.seconds if policy.seconds else 0.0,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()

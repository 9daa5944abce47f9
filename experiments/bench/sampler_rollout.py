"""The sampler on a real checkpoint and a real recipe's rollout: ``python -m experiments.bench.sampler
--checkpoint DIR [--config experiments/configs/smollm2_twx.py]`` (docs/results/real-llm.md).

1. Plays one real rollout of the recipe (its env, G groups x K rollouts, its prompt template and
   history) with our sampler and the checkpoint, and keeps every turn's prompts as the collector sent
   them (chat-templated token ids).
2. Replays those turns, each one batched call, in alternating rounds: our sampler with prefix sharing,
   our sampler without, and transformers ``generate`` (torch on the same number of threads as XLA's
   pool, ``--threads``), all greedy with no end-of-sequence so every row decodes the recipe's whole
   budget. The first round of each is a warm-up (JAX compiles, torch's allocator) and not timed.

Reported: new tokens/s of each (all turns' rows x budget over the median time of a round), our
prefill share, the prefill positions computed against the prompt tokens (at the first turn, where
the K rollouts of a group share their prompt, and over all turns), and greedy agreement (rows whose
tokens equal transformers'). Ends with one JSON line ``{"bench": "sampler_rollout", ...}``.

``--smoke`` plays the demo recipe in miniature (``SMOKE_RECIPE``, ``SMOKE_OVERRIDES``: one group of
two, one turn of 8 new tokens) on any checkpoint with tokenizer files, e.g. ``write_smoke_checkpoint``'s.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np

SMOKE_RECIPE = str(Path(__file__).resolve().parents[1] / "configs" / "demo.py")
# the demo's policy: random, two layers (so a smoke run can freeze one: bench.tree_update's trunk)
SMOKE_POLICY = ("sft.episodes=0", "model.architecture.num_layers=2")
# one turn (each turn's prompts compile anew) of short answers, micro-batches of two rows (also bench.update's)
SMOKE_OVERRIDES = ("env.max_env_steps=1", "sampling.max_new_tokens=8", "ppo.minibatch_rows=4",
                   "ppo.microbatch_rows=2")


def checkpoint_problem(directory: str) -> str | None:
    """Why ``directory`` cannot be the benchmark's policy (one line), or None: its config.json and the
    tokenizer files are checked before anything loads, as ``experiments.play`` and ``train`` refuse them."""
    from milegpo_jax.models.tokenizer import TokenizerFilesError, check_tokenizer_files

    if not Path(directory, "config.json").is_file():
        return f"--checkpoint {directory}: no config.json there (a Hugging Face checkpoint)"
    try:
        check_tokenizer_files(Path(directory))
    except TokenizerFilesError as error:
        return str(error)
    return None


def recipe_config(recipe: str, checkpoint: str, *, seed: int, groups: int = 0, group_size: int = 0,
                  smoke: bool = False, overrides: tuple[str, ...] = ()):
    """The recipe with the checkpoint as its policy (whatever model the recipe names), ``groups`` x
    ``group_size`` rollouts (0: the recipe's), shrunk by ``SMOKE_OVERRIDES`` when ``smoke``, then
    ``overrides``."""
    from experiments.train import build_config

    base = [f"model.hf_checkpoint={checkpoint}", "model.preset=None", "model.architecture=None", f"run.seed={seed}"]
    if groups:
        base.append(f"env.groups_per_iteration={groups}")
    if group_size:
        base.append(f"env.group_size={group_size}")
    return build_config(recipe, base + list(SMOKE_OVERRIDES if smoke else ()) + list(overrides))


def write_smoke_checkpoint(directory: Path) -> Path:
    """A tiny random policy in ``directory``: the demo's model (two layers) and word tokenizer, no warm start."""
    from experiments.train import build_config
    from milegpo_jax.train.trainer import warm_start_plan
    from milegpo_jax.train.warm_start import write_warm_start

    config = build_config(SMOKE_RECIPE, [*SMOKE_POLICY, "logging.progress_bar=false"])
    write_warm_start(warm_start_plan(config), directory / "checkpoint", tokenizer_dir=directory / "tokenizer")
    return directory / "checkpoint"


class RecordingPolicy:
    """Passes calls to a ``SamplerPolicy`` and keeps each call's chat-templated prompt token ids."""

    def __init__(self, policy):
        self.policy = policy
        self.turns: list[list[np.ndarray]] = []

    def generate(self, prompts, *, temperature, seed):
        responses = self.policy.generate(prompts, temperature=temperature, seed=seed)
        self.turns.append([np.asarray(r.prompt_ids, np.int32) for r in responses])
        return responses


def recipe_policy(config, model, tokenizer):
    """The ``SamplerPolicy`` a run of ``config`` samples with (prefix sharing on)."""
    from milegpo_jax.rollout.policy import SamplerPolicy

    return SamplerPolicy(model, tokenizer, config.sampling_config().replace(prefix_sharing=True))


def play_rollout(config, policy) -> None:
    """One real rollout of ``config`` (its first iteration's task groups) played by ``policy``."""
    from envs_bridge.client import EnvPool
    from envs_bridge.groups import GroupPlan
    from envs_bridge.specs import env_spec
    from milegpo_jax.rollout.collector import collect

    env = config.env
    with EnvPool(env.name, env.groups_per_iteration * env.group_size, num_servers=1,
                 env_options=env.adapter_options()) as pool:
        plan = GroupPlan.sample(env.train_split, pool.num_tasks(env.train_split), env.groups_per_iteration,
                                env.group_size, seed=config.run.seed)
        collect(pool, policy, plan, env=env.name, max_steps=env.max_env_steps, history_length=env.history_length,
                temperature=config.sampling.temperature, seed=config.run.seed,
                reward_scale=env_spec(env.name).reward_scale)


def record_rollout_turns(config, model, tokenizer) -> list[list[np.ndarray]]:
    """The prompts of every turn of one real rollout of ``config``."""
    policy = RecordingPolicy(recipe_policy(config, model, tokenizer))
    play_rollout(config, policy)
    return policy.turns


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def run(args) -> dict:
    import jax
    import torch
    from transformers import AutoModelForCausalLM

    from milegpo_jax.models import load_pretrained
    from milegpo_jax.models.tokenizer import load_tokenizer
    from milegpo_jax.sampling import SamplingConfig, generate

    torch.set_num_threads(args.threads)
    config = recipe_config(args.config, args.checkpoint, seed=args.seed, groups=args.groups,
                           group_size=args.group_size, smoke=args.smoke)
    model, _ = load_pretrained(args.checkpoint)
    tokenizer = load_tokenizer(Path(args.checkpoint))
    turns = record_rollout_turns(config, model, tokenizer)
    budget = config.sampling.max_new_tokens
    greedy = SamplingConfig(max_new_tokens=budget, temperature=0.0)  # no EOS: every row decodes the budget
    shared = greedy.replace(prefix_sharing=True)
    reference = AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.float32).eval()
    reference.generation_config.eos_token_id = None
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def ours(sampling):
        return [generate(model, prompts, sampling) for prompts in turns]

    def transformers_generate():
        outputs = []
        for prompts in turns:
            width = max(p.size for p in prompts)
            ids = np.full((len(prompts), width), pad, np.int64)
            mask = np.zeros((len(prompts), width), np.int64)
            for row, prompt in enumerate(prompts):  # left-padded, as generate expects for a decoder
                ids[row, width - prompt.size :], mask[row, width - prompt.size :] = prompt, 1
            with torch.inference_mode():
                out = reference.generate(torch.tensor(ids), attention_mask=torch.tensor(mask), max_new_tokens=budget,
                                         min_new_tokens=budget, do_sample=False, pad_token_id=pad)
            outputs.append(out[:, width:].numpy())
        return outputs

    times = {"shared": [], "full": [], "transformers": []}
    results = {}
    for round_index in range(args.rounds + 1):  # round 0 warms up
        for name, fn in (("shared", lambda: ours(shared)), ("full", lambda: ours(greedy)),
                         ("transformers", transformers_generate)):
            seconds, results[name] = _timed(fn)
            if round_index:
                times[name].append(seconds)
        print(f"round {round_index}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items() if v), flush=True)

    rows = sum(len(p) for p in turns)
    new_tokens = rows * budget
    median = {name: statistics.median(values) for name, values in times.items()}
    per_second = {name: new_tokens / seconds for name, seconds in median.items()}
    prompt_tokens = [sum(p.size for p in prompts) for prompts in turns]
    positions = {name: [g.prefill_positions for g in results[name]] for name in ("shared", "full")}
    prefill_share = sum(g.prefill_s for g in results["shared"]) / sum(g.prefill_s + g.decode_s for g in results["shared"])
    same_rows = sum(int((g.token_ids == t).all(axis=1).sum()) for g, t in zip(results["shared"], results["transformers"]))
    same_as_full = all(np.array_equal(a.token_ids, b.token_ids) for a, b in zip(results["shared"], results["full"]))
    groups, group_size = config.env.groups_per_iteration, config.env.group_size
    print(f"{args.checkpoint}: {len(turns)} turns, {rows} rows ({groups} groups x {group_size} rollouts at the first), "
          f"{budget} new tokens per row, greedy; jax on {jax.device_count()} {jax.default_backend()} device(s), "
          f"torch {torch.__version__} on {args.threads} threads, {args.rounds} timed rounds")
    for name in ("shared", "full", "transformers"):
        print(f"  {name:<13} {median[name]:8.2f} s/round  {per_second[name]:8.1f} new tok/s")
    figures = {
        "bench": "sampler_rollout",
        "checkpoint": str(args.checkpoint),
        "turns": len(turns),
        "rows": rows,
        "groups": groups,
        "group_size": group_size,
        "new_tokens_per_row": budget,
        "threads": args.threads,
        "shared_tokens_per_s": round(per_second["shared"], 1),
        "full_prefill_tokens_per_s": round(per_second["full"], 1),
        "transformers_tokens_per_s": round(per_second["transformers"], 1),
        "speedup_vs_transformers": round(median["transformers"] / median["shared"], 3),
        "speedup_of_prefix_sharing": round(median["full"] / median["shared"], 3),
        "prefill_share": round(prefill_share, 3),
        "prompt_tokens_first_turn": prompt_tokens[0],
        "prefill_positions_first_turn": positions["shared"][0],
        "prefill_positions_first_turn_without_sharing": positions["full"][0],
        "prefill_work_cut_first_turn": round(1 - positions["shared"][0] / positions["full"][0], 4),
        "prompt_tokens": sum(prompt_tokens),
        "prefill_positions": sum(positions["shared"]),
        "prefill_positions_without_sharing": sum(positions["full"]),
        "greedy_rows_equal_to_transformers": same_rows,
        "greedy_shared_equal_to_full": same_as_full,
        "rounds_s": {name: [round(t, 3) for t in values] for name, values in times.items()},
    }
    print(json.dumps(figures))
    return figures

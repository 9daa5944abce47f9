"""Branching benchmark (issue 44 item 4): what a tree group's shared past saves the sampler and the
update, per leaf, against K independent rollouts, in one process from the same parameters.

1. Plays one iteration's task groups of the recipe (``--config``, default the SmolLM2
   TextWorldExpress recipe, ``--groups`` x ``--group-size`` = K) twice in one env pool, on the same
   tasks and seeds: as K independent rollouts per group, and as trees of K leaves (``env.branching``
   with ``--roots``, ``--branches``, ``--fork-at``; docs/training.md "Tree rollouts"). The budget is
   the leaf count: both arms have K leaves per group, each at most ``max_env_steps`` from the root;
   the tree plays its shared steps once, so it spends fewer env steps.
2. Per arm, from the collector and the sampler's own counts (``SamplerPolicy.usage``): env steps
   played, steps from the root over all leaves, prompt tokens sent, prefill positions the sampler
   ran (shared prompt prefixes once, padding included).
3. Per arm, the update's positions over the rows the trainer would build (``tree_training_steps``:
   a shared step is one row), one epoch of the recipe's mini-batches in its row order (shuffled with
   ``--seed``), packed as the trainer packs them (``pack_micro_batches``): each row alone
   (``ppo.share_prefixes`` off) and tree-packed (``update_sharing``); computed (not padding) and
   processed (padding included). ``counts_repeat``: the timed rounds' counts equal the first play's.
4. With ``--rounds N`` (N >= 1) both arms play again N times in rotating order and the rollouts'
   seconds are reported (the first play compiles and is not timed).

Every count is also given per leaf (divided by the G x K leaves), with the ratios independent / tree.
Ends with one JSON line ``{"bench": "branching", "leaves": ..., "independent": {...}, "tree": {...},
"per_leaf": {...}, "ratios": {...}, ...}``.
Run: ``python -m experiments.bench.branching --checkpoint DIR [--groups 4 --group-size 8] [--roots 2
--branches 3 --fork-at uniform] [--rounds 1]`` (``DIR``: the converted SmolLM2 checkpoint,
docs/results/real-llm.md); measured in docs/results/branching.md. ``--smoke``: the demo recipe in
miniature (one group of four leaves, two steps, one root and one branch per fork) on a tiny random
policy unless ``--checkpoint`` is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from experiments.bench.lm_head import load_policy, recipe_arguments, with_smoke_policy
from experiments.bench.sampler_rollout import SMOKE_RECIPE, checkpoint_problem, recipe_policy

ARMS = ("independent", "tree")
SMOKE_STEPS = 2  # the smoke recipe plays one step (sampler_rollout.SMOKE_OVERRIDES): a fork needs a second
PER_LEAF = ("env_steps", "leaf_steps", "prompt_tokens", "prefill_positions", "update_rows", "update_alone",
            "update_tree_packed", "update_alone_processed", "update_tree_packed_processed")


def _parse(argv):
    from milegpo_jax.rollout.branching import FORK_RULES

    parser = argparse.ArgumentParser(prog="python -m experiments.bench.branching", description=__doc__.split("\n\n")[0])
    recipe_arguments(parser, groups=4, group_size=8)  # the recipe's own 4 x 8
    parser.set_defaults(rounds=0)
    parser.add_argument("--roots", type=int, default=2, help="env.branching.roots: episodes per group from the start")
    parser.add_argument("--branches", type=int, default=3, help="env.branching.branches: forks per fork point")
    parser.add_argument("--fork-at", choices=FORK_RULES, default="uniform", help="env.branching.fork_at")
    parser.add_argument("--smoke", action="store_true", help="a miniature run, to check the code path")
    if parser.parse_known_args(argv)[0].smoke:
        parser.set_defaults(config=SMOKE_RECIPE, groups=1, group_size=4, roots=1, branches=1)
    args = parser.parse_args(argv)
    for name in ("groups", "group_size"):
        if not 1 <= getattr(args, name) <= 1024:
            parser.error(f"--{name.replace('_', '-')} must be in 1..1024")
    if not 0 <= args.rounds <= 100:
        parser.error("--rounds must be in 0..100")
    if not 1 <= args.roots < args.group_size:
        parser.error(f"--roots must be in 1..{args.group_size - 1} (below --group-size, the leaves)")
    if args.branches < 1:
        parser.error("--branches must be >= 1")
    if args.checkpoint is None and not args.smoke:
        parser.error("--checkpoint is required (or --smoke, for a tiny random policy)")
    problem = (args.checkpoint and checkpoint_problem(args.checkpoint)
               or (not Path(args.config).is_file() and f"--config {args.config}: no such file"))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    return args


def main(argv: list[str] | None = None) -> dict:
    return with_smoke_policy(_parse(argv), run)


def tree_config(config, args):
    """``config`` with the branching of ``args`` (its own checks apply: one line naming the field)."""
    from milegpo_jax.config.sections import BranchingSection

    branching = BranchingSection(roots=args.roots, branches=args.branches, fork_at=args.fork_at)
    steps = max(config.env.max_env_steps, SMOKE_STEPS) if args.smoke else config.env.max_env_steps
    env = dataclasses.replace(config.env, max_env_steps=steps, branching=branching)
    return dataclasses.replace(config, env=env)


def play(pool, policy, config, shape):
    """(batch, sampler usage, seconds) of one rollout of ``config``'s first iteration's task groups, as
    trees of ``shape`` (None: independent rollouts), at the rollout seed ``run.seed``."""
    from envs_bridge.groups import GroupPlan
    from envs_bridge.specs import env_spec
    from milegpo_jax.rollout.collector import collect

    env, seed = config.env, config.run.seed
    plan = GroupPlan.sample(env.train_split, pool.num_tasks(env.train_split), env.groups_per_iteration,
                            env.group_size, seed=seed)
    policy.usage.reset()
    start = time.perf_counter()
    batch = collect(pool, policy, plan, env=env.name, max_steps=env.max_env_steps, history_length=env.history_length,
                    temperature=config.sampling.temperature, seed=seed, reward_scale=env_spec(env.name).reward_scale,
                    branching=shape)
    return batch, policy.usage.reset(), time.perf_counter() - start


def update_positions(rows, config, model, pad_id: int, seed: int) -> dict[str, int]:
    """Positions one epoch of the trainer's update over ``rows`` computes and processes, each row packed
    alone and tree-packed: the recipe's mini- and micro-batches in its row order (``ppo_epoch``'s packing)."""
    from milegpo_jax.train.packing import NO_SHARING, Head, pack_micro_batches
    from milegpo_jax.train.ppo import minibatches, sequence_capacity
    from milegpo_jax.train.step import PPOLoss, update_sharing

    capacity = sequence_capacity(rows)
    figures = {}
    for name, sharing in (("alone", NO_SHARING), ("tree_packed", update_sharing(model, capacity))):
        head = Head.for_rows(rows, PPOLoss.weight_key, sharing.capacity(capacity))
        computed = processed = 0
        for pick in minibatches(rows, config.ppo.minibatch_rows, np.random.default_rng(seed), config.ppo.row_order):
            packed, _ = pack_micro_batches(rows, pick, capacity, config.ppo.microbatch_rows, pad_id, head, sharing)
            computed += packed.positions_computed
            processed += packed.arrays["inputs"].size
        figures[f"update_{name}"], figures[f"update_{name}_processed"] = computed, processed
    return figures


def arm_figures(batch, usage, config, model, pad_id: int, seed: int) -> dict:
    """The counts of one arm's rollout (module doc, items 2 and 3)."""
    from milegpo_jax.train.ppo import ppo_rows

    _, responses, _ = batch.tree_training_steps()
    rows = ppo_rows(responses, [0.0] * len(responses))  # the positions do not depend on the advantages
    shared = batch.leaves_per_step()
    figures = {
        "leaves": len(batch.episodes),
        "env_steps": len(batch.steps),
        "leaf_steps": sum(e.steps for e in batch.episodes),
        "shared_steps": int(np.count_nonzero(shared > 1)),
        "forks": sum(e.parent is not None for e in batch.episodes),
        "success_rate": round(batch.metrics()["success_rate"], 4),
        "sampler_calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        "prefill_positions": usage.prefill_positions,
        "generated_tokens": usage.generated_tokens,
        "update_rows": len(rows),
        "update_row_positions": int(rows.lengths.sum()),
    }
    figures.update(update_positions(rows, config, model, pad_id, seed))
    return figures


def _counts(figures: dict) -> tuple:
    return tuple(figures[key] for key in ("env_steps", "prompt_tokens", "prefill_positions", "update_rows"))


def run(args) -> dict:
    import jax

    from envs_bridge.client import EnvPool
    from milegpo_jax.config.sections import BranchingSection
    from milegpo_jax.rollout.branching import TreeShape

    base, _, model, tokenizer = load_policy(args)
    tree = tree_config(base, args)
    off = dataclasses.replace(tree.env, branching=BranchingSection())  # off whatever the recipe says
    configs = {"independent": dataclasses.replace(tree, env=off), "tree": tree}
    shapes = {arm: TreeShape.from_config(configs[arm].env.branching, configs[arm].env.group_size) for arm in ARMS}
    env = tree.env
    policy = recipe_policy(tree, model, tokenizer)
    pad_id = tokenizer.pad_token_id or 0
    arms, times = {}, {arm: {"rollout_s": [], "prefill_s": [], "decode_s": []} for arm in ARMS}
    repeat = True  # every timed round's counts equal the first play's
    with EnvPool(env.name, env.groups_per_iteration * env.group_size, num_servers=1,
                 env_options=env.adapter_options()) as pool:
        for round_index in range(args.rounds + 1):  # the first play compiles: its counts, not its time
            for arm in ARMS if round_index % 2 == 0 else ARMS[::-1]:  # each first in turn
                batch, usage, seconds = play(pool, policy, configs[arm], shapes[arm])
                figures = arm_figures(batch, usage, configs[arm], model, pad_id, args.seed)
                if not round_index:
                    arms[arm] = figures
                    continue
                repeat = repeat and _counts(figures) == _counts(arms[arm])
                for key, value in (("rollout_s", seconds), ("prefill_s", usage.prefill_s), ("decode_s", usage.decode_s)):
                    times[arm][key].append(value)
            print(f"round {round_index}{' (compiles)' if not round_index else ''}: "
                  + ", ".join(f"{arm} {times[arm]['rollout_s'][-1]:.1f} s" if round_index else f"{arm} done"
                              for arm in ARMS), flush=True)
    for arm in ARMS:  # the median of the timed rounds (none with --rounds 0)
        arms[arm].update({key: round(statistics.median(values), 2) for key, values in times[arm].items() if values})
    leaves = arms["tree"]["leaves"]
    per_leaf = {arm: {key: round(arms[arm][key] / leaves, 2) for key in PER_LEAF} for arm in ARMS}
    ratios = {key: round(arms["independent"][key] / max(arms["tree"][key], 1), 3) for key in PER_LEAF}
    # the whole saving: independent rollouts' rows each alone against the tree's rows tree-packed
    ratios["independent_alone_over_tree_packed"] = round(
        arms["independent"]["update_alone"] / max(arms["tree"]["update_tree_packed"], 1), 3)
    figures = {
        "bench": "branching",
        "groups": env.groups_per_iteration,
        "group_size": env.group_size,
        "leaves": leaves,
        "budget": "leaves",
        "branching": {"roots": args.roots, "branches": args.branches, "fork_at": args.fork_at},
        "max_env_steps": env.max_env_steps,
        "minibatch_rows": tree.ppo.minibatch_rows,
        "microbatch_rows": tree.ppo.microbatch_rows,
        "row_order": tree.ppo.row_order,
        "independent": arms["independent"],
        "tree": arms["tree"],
        "per_leaf": per_leaf,
        "ratios": ratios,
        "rounds": args.rounds,
        "counts_repeat": repeat,
        "devices": f"{jax.device_count()} x {jax.devices()[0].device_kind}",
    }
    print_per_leaf(per_leaf, ratios)
    print(json.dumps(figures))
    return figures


def print_per_leaf(per_leaf: dict, ratios: dict) -> None:
    for key in ("env_steps", "prompt_tokens", "prefill_positions", "update_alone", "update_tree_packed"):
        print(f"per leaf {key:<20} independent {per_leaf['independent'][key]:9.1f}  tree {per_leaf['tree'][key]:9.1f}  "
              f"({ratios[key]:.2f}x)")


if __name__ == "__main__":
    main()

"""Tree-update benchmark: the PPO update of a real recipe on a real rollout with each shared prompt
prefix computed once (tree-packed rows, the trainer's default) against every row packed alone
(``ppo.share_prefixes`` off), in one process.

1. Plays one real rollout of the recipe (``--config``, default the SmolLM2 TextWorldExpress recipe,
   ``--groups`` x ``--group-size`` rollouts) with our sampler and the checkpoint, keeping every
   ``PolicyResponse``: the update's rows are exactly those an iteration packs (``--save-rows FILE``
   keeps them, ``--rows FILE`` reads them back instead of playing). The advantages are seeded normal
   draws (the update's cost does not depend on their values).
2. Counts the positions the update computes with the rows alone and with trees of 1, 2, 3, 4 and 8
   shared levels (``prefix_tree``; numpy only), so the depth the trainer uses can be checked.
3. Runs one PPO epoch of the recipe's step (``build_train_step``) over those rows from the same
   parameters and the same shuffled mini-batches, in rotating order per round (the first round
   compiles and is not timed): ``alone``, every row packed alone; ``shared``, tree-packed, every layer
   per mini-batch; and, when the recipe trains only its top layers, ``trunk``: the trainer's update,
   the frozen layers once over all rows (``milegpo_jax.train.trunk``, its time included) and only
   the trained layers per tree-packed mini-batch. ``--prefix-order`` adds ``prefix``, tree-packed
   with ``ppo.row_order="prefix"`` (mini-batches cut from the rows' prefix order: another update).
4. Checks that every layout gives the update ``alone`` gives: every mini-batch's loss and metrics,
   and the parameters after the epoch, agree to float32 tolerance.

Positions are counted per layer (``layer_positions``): a layout computes each of its packed
positions in every layer, except ``trunk``, whose frozen layers see the trunk pass's positions only.
Ends with one JSON line ``{"bench": "tree_update", "speedup": ..., "speedup_trunk": ..., "alone_s":
..., "shared_s": ..., "trunk_s": ..., "positions_alone": ..., "position_cut": ..., "layer_position_cut_trunk":
..., "padded_*": ..., "positions_by_depth": {...}, "max_metric_gap": ..., "max_param_gap": ..., ...}``.
``--peak-memory LAYOUT`` runs one epoch of one layout alone and reports the process's peak resident
memory instead (``{"bench": "tree_update", "layout": ..., "peak_rss_gb": ...}``).
Run: ``python -m experiments.bench.tree_update --checkpoint DIR [--rounds 2] [--groups 4 --group-size 8]``
(``DIR``: the converted SmolLM2 checkpoint, docs/results/real-llm.md). ``--smoke``: the same in
miniature (the demo's recipe, one round; without ``--checkpoint`` on a tiny random policy).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from experiments.bench.lm_head import load_policy, recipe_arguments, rollout_rows, update_gaps, with_smoke_policy
from experiments.bench.sampler_rollout import SMOKE_RECIPE, checkpoint_problem

DEPTHS = (1, 2, 3, 4, 8)


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python -m experiments.bench.tree_update", description=__doc__.split("\n\n")[0])
    recipe_arguments(parser, groups=4, group_size=8)  # the recipe's own 4 x 8
    parser.add_argument("--rows", help="read the update's rows from this .npz (written by --save-rows) instead of playing")
    parser.add_argument("--save-rows", help="write the rollout's rows to this .npz")
    parser.add_argument("--prefix-order", action="store_true", help="also time the tree-packed update in prefix order")
    parser.add_argument("--trainable-layers", type=int, default=None,
                        help="train the top N layers (default: the recipe's optim.trainable_layers; --smoke: 1)")
    parser.add_argument("--peak-memory", choices=("alone", "shared", "trunk", "prefix"),
                        help="run one epoch of this layout only and report the process's peak resident memory")
    parser.add_argument("--smoke", action="store_true", help="a miniature run, to check the code path")
    if parser.parse_known_args(argv)[0].smoke:
        parser.set_defaults(config=SMOKE_RECIPE, groups=1, group_size=2, rounds=1, trainable_layers=1)
    args = parser.parse_args(argv)
    if args.trainable_layers is not None and args.trainable_layers < 0:
        parser.error("--trainable-layers must be >= 0")
    for name in ("groups", "group_size", "rounds"):
        if not 1 <= getattr(args, name) <= 1024:
            parser.error(f"--{name.replace('_', '-')} must be in 1..1024")
    if args.checkpoint is None and not args.smoke:
        parser.error("--checkpoint is required (or --smoke, for a tiny random policy)")
    problem = (args.checkpoint and checkpoint_problem(args.checkpoint)
               or (args.rows and not Path(args.rows).is_file() and f"--rows {args.rows}: no such file")
               or (not Path(args.config).is_file() and f"--config {args.config}: no such file"))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    return args


def save_rows(rows, path: str) -> None:
    """The rows' tokens and fields as one .npz (each row's arrays concatenated, with their lengths)."""
    lengths = np.asarray([len(t) for t in rows.tokens], np.int64)
    arrays = {"lengths": lengths, "tokens": np.concatenate(rows.tokens)}
    arrays.update({f"field_{name}": np.concatenate(values) for name, values in rows.fields.items()})
    np.savez_compressed(path, **arrays)


def load_rows(path: str):
    """``save_rows``'s file back as ``Rows``."""
    from milegpo_jax.train.packing import Rows

    with np.load(path) as data:
        lengths = data["lengths"]
        tokens = tuple(np.split(data["tokens"], np.cumsum(lengths)[:-1]))
        fields = {key[len("field_"):]: tuple(np.split(data[key], np.cumsum(lengths - 1)[:-1]))
                  for key in data.files if key.startswith("field_")}
    return Rows(tokens, fields)


def positions_by_depth(rows, capacity: int, minibatch_rows: int, seed: int) -> dict[str, int]:
    """Positions one epoch's mini-batches compute with rows alone (depth 0) and with trees of each depth."""
    from milegpo_jax.train.packing import Head, Sharing, pack, sequences_needed
    from milegpo_jax.train.step import PPOLoss

    head = Head.for_rows(rows, PPOLoss.weight_key, capacity)
    order = np.random.default_rng(seed).permutation(len(rows))
    figures = {}
    for depth in (0,) + DEPTHS:
        sharing = Sharing(max_depth=depth)
        total = 0
        for start in range(0, len(rows), minibatch_rows):
            pick = order[start : start + minibatch_rows]
            packed = pack(rows, pick, capacity, sequences_needed(rows, pick, capacity, head, sharing), 0, head, sharing)
            total += packed.positions_computed
        figures[str(depth)] = total
    return figures


def main(argv: list[str] | None = None) -> dict:
    return with_smoke_policy(_parse(argv), run)


def run(args) -> dict:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from milegpo_jax.train.ppo import UpdateStats, place_on_default_device, ppo_epoch, sequence_capacity
    from milegpo_jax.train.step import build_train_step, jit_train_step, update_sharing
    from milegpo_jax.train.trunk import trunk_states

    layers_flag = () if args.trainable_layers is None else (f"optim.trainable_layers={args.trainable_layers}",)
    config, runtime, model, tokenizer = load_policy(args, layers_flag)
    rows = load_rows(args.rows) if args.rows else rollout_rows(config, model, tokenizer, args.seed)
    if args.save_rows:
        save_rows(rows, args.save_rows)
    capacity = sequence_capacity(rows)
    by_depth = positions_by_depth(rows, capacity, config.ppo.minibatch_rows, args.seed)
    print(f"{len(rows)} rows, capacity {capacity}: positions computed by tree depth {by_depth}", flush=True)
    graphdef, start_params = nnx.split(model)
    step = build_train_step(graphdef, runtime, config.ppo_loss_config(), config.optimizer_config())
    jitted = jit_train_step(step)
    tree, layers = update_sharing(model, capacity), model.config.num_layers
    frozen = layers - config.optim.trainable_layers if config.optim.trainable_layers else 0
    # (sharing, row order, frozen trunk once)
    layouts = {"alone": (update_sharing(model, capacity, enabled=False), "shuffled", False),
               "shared": (tree, "shuffled", False)}
    if frozen:
        layouts["trunk"] = (tree, "shuffled", True)
    if args.prefix_order or args.peak_memory == "prefix":
        layouts["prefix"] = (tree, "prefix", False)

    def update(sharing, row_order, with_trunk):
        params = jax.tree.map(jnp.copy, start_params)
        stats, pad_id = UpdateStats(), tokenizer.pad_token_id
        trunk = None
        if with_trunk:
            trunk = trunk_states(nnx.merge(graphdef, params), rows, layers=frozen, capacity=capacity,
                                 max_sequences=config.ppo.microbatch_rows, pad_id=pad_id,
                                 place=place_on_default_device, sharing=sharing)
        params, _, history = ppo_epoch(
            jitted, params, step.tx.init(params), rows, minibatch_rows=config.ppo.minibatch_rows,
            microbatch_rows=config.ppo.microbatch_rows, capacity=capacity, rng=np.random.default_rng(args.seed),
            pad_id=pad_id, place=place_on_default_device, stats=stats, sharing=sharing, row_order=row_order,
            trunk=trunk,
        )
        trunk_positions = 0 if trunk is None else trunk.positions_computed
        mini_batch_layers = layers if trunk is None else layers - frozen  # the trunk pass ran the frozen ones
        layer_positions = trunk_positions * frozen + stats.computed_tokens * mini_batch_layers
        return jax.block_until_ready(params), history, stats, layer_positions, trunk_positions

    if args.peak_memory:  # one layout alone in this process: its peak resident memory
        update(*layouts[args.peak_memory])
        figures = {"bench": "tree_update", "layout": args.peak_memory, "rows": len(rows),
                   "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)}
        print(json.dumps(figures))
        return figures
    times = {name: [] for name in layouts}
    results = {}
    names = list(layouts)
    for round_index in range(args.rounds + 1):  # round 0 compiles
        turn = round_index % len(names)
        for name in names[turn:] + names[:turn]:  # each first in turn
            start = time.perf_counter()
            results[name] = update(*layouts[name])
            if round_index:
                times[name].append(time.perf_counter() - start)
        print(f"round {round_index}{' (compiles)' if not round_index else ''}: "
              f"{', '.join(f'{n} {times[n][-1]:.1f} s' for n in names) if round_index else 'done'}", flush=True)
    params_old, history_old, stats_old, layer_positions_old, _ = results["alone"]
    old_s = statistics.median(times["alone"])
    figures = {"bench": "tree_update", "rows": len(rows), "positions_alone": stats_old.computed_tokens,
               "padded_alone": stats_old.total_tokens, "alone_s": round(old_s, 3)}
    gaps = []
    for name in names[1:]:
        params_new, history_new, stats_new, layer_positions_new, _ = results[name]
        gaps.append(update_gaps(history_new, history_old, params_new, params_old))
        seconds = statistics.median(times[name])
        suffix = "" if name == "shared" else f"_{name}"  # the shared layout's ratios keep their first names
        figures.update({
            f"positions_{name}": stats_new.computed_tokens,
            f"position_cut{suffix}": round(stats_old.computed_tokens / stats_new.computed_tokens, 3),
            f"layer_position_cut{suffix}": round(layer_positions_old / layer_positions_new, 3),
            f"padded_{name}": stats_new.total_tokens,
            f"{name}_s": round(seconds, 3),
            f"speedup{suffix}": round(old_s / seconds, 3),
        })
        print(f"{name}: {stats_new.computed_tokens} positions per trained layer against {stats_old.computed_tokens} "
              f"alone, {layer_positions_old / layer_positions_new:.2f}x fewer over all layers; "
              f"{seconds:.2f} s against {old_s:.2f} s ({old_s / seconds:.2f}x)")
    if "trunk" in results:
        figures.update({"positions_trunk_pass": results["trunk"][4], "frozen_layers": frozen})
    figures.update({
        "positions_by_depth": by_depth,
        "capacity": capacity,
        "tree_capacity": tree.capacity(capacity),
        "max_metric_gap": float(f"{max(g[0] for g in gaps):.3g}"),
        "max_param_gap": float(f"{max(g[1] for g in gaps):.3g}"),
        "trainable_layers": config.optim.trainable_layers,
        "rounds": args.rounds,
        "devices": f"{jax.device_count()} x {jax.devices()[0].device_kind}",
    })
    print(f"largest metric gap {figures['max_metric_gap']:.2g}, parameter gap {figures['max_param_gap']:.2g}")
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()

"""The command line of ``python -m experiments.aot``: arguments, the run over the requested programs,
the printed table and the JSON line, and the exit status."""

from __future__ import annotations

import argparse
import json
import math
import sys

from experiments.aot.programs import model_config, runtime_options, sampler_programs, train_program
from experiments.aot.topologies import (EXIT_DOES_NOT_FIT, EXIT_USAGE, GIB, TOPOLOGY_EXAMPLES, AotError, hbm_gib,
                                        setup_libtpu)

WHAT = ("train", "prefill", "decode")


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    from milegpo_jax.config import split_config_flags  # imports no jax

    overrides, rest = split_config_flags(sys.argv[1:] if argv is None else argv)
    import experiments.aot as package  # its docstring's first line describes the tool

    # prog: the usage line names the tool as it did when it was one file, aot.py
    parser = argparse.ArgumentParser(prog="aot.py", description=package.__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="experiments/configs/NAME.py[:arg]")
    parser.add_argument("--topology", required=True, help=f"TPU topology, e.g. {', '.join(TOPOLOGY_EXAMPLES)}")
    parser.add_argument("--model", help="model preset (overrides the config's shape), e.g. qwen2.5-7b")
    parser.add_argument("--what", default=",".join(WHAT), help=f"comma-separated subset of {','.join(WHAT)}")
    parser.add_argument("--mesh", help="data,fsdp,tensor sizes (one may be -1), e.g. 1,-1,4; default: config.mesh")
    parser.add_argument("--dtype", default="bfloat16", help="weights and compute dtype, or 'config' for the config's")
    parser.add_argument("--logits-chunk", type=int, default=None,
                        help="LM-head positions per chunk in the PPO loss (default: the config's ppo.logits_chunk)")
    parser.add_argument("--no-cost", action="store_true", help="leave out the train step's and prefill's FLOPs and roofline")
    parser.add_argument("--shared-factor", type=float, default=0.0, metavar="R",
                        help="also compile the train step on the same rows tree-packed, their prompts sharing R-fold "
                             "(rows-alone positions per position computed; experiments.bench.tree_update measures it)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    return parser.parse_args(rest), overrides


def mesh_config(text: str | None, default):
    from milegpo_jax.parallel import MeshConfig

    if text is None:
        return default
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise AotError(f"--mesh {text!r}: expected three integers data,fsdp,tensor, e.g. 1,-1,4") from None
    if len(sizes) != 3:
        raise AotError(f"--mesh {text!r}: expected three sizes data,fsdp,tensor")
    return MeshConfig(*sizes)


def run(args, overrides) -> tuple[dict, bool]:
    import jax
    from jax.experimental import topologies

    from experiments.train import build_config
    from milegpo_jax.config import ConfigError
    from milegpo_jax.models import num_params
    from milegpo_jax.models.attention import check_attention_impl
    from milegpo_jax.models.model_config import ModelConfigError
    from milegpo_jax.parallel import ShardingError, make_mesh

    what = [w.strip() for w in args.what.split(",") if w.strip()]
    unknown = sorted(set(what) - set(WHAT))
    if unknown or not what:
        raise AotError(f"--what {args.what!r}: choose from {', '.join(WHAT)}")
    if args.shared_factor and not (math.isfinite(args.shared_factor) and 1 <= args.shared_factor <= 64):
        raise AotError(f"--shared-factor {args.shared_factor}: must be a number in 1..64 (rows-alone positions per position computed)")
    generation, hbm_chip_gib = hbm_gib(args.topology)
    hbm = hbm_chip_gib * GIB
    try:
        config = build_config(args.config, overrides)
        model_cfg, source = model_config(config, args.model, args.dtype)
        check_attention_impl(model_cfg.attention_impl, "tpu")
    except (ConfigError, ModelConfigError, ValueError) as error:
        raise AotError(str(error)) from None
    try:
        topology = topologies.get_topology_desc(platform="tpu", topology_name=args.topology)
    except (RuntimeError, ValueError) as error:
        raise AotError(f"--topology {args.topology!r}: {' '.join(str(error).split())[:300]}") from None
    devices = list(topology.devices)
    try:
        mesh = make_mesh(mesh_config(args.mesh, config.mesh), devices=devices)
    except ShardingError as error:
        raise AotError(str(error)) from None
    kind = devices[0].device_kind
    mesh_text = " x ".join(f"{name} {size}" for name, size in mesh.shape.items())
    print(f"topology {args.topology}: {len(devices)} x {kind}, {hbm_chip_gib} GiB HBM each; mesh {mesh_text}")
    count = num_params(model_cfg)
    size = f"{count / 1e9:.2f} B" if count >= 1e8 else f"{count / 1e6:.2f} M"
    print(f"model: {source}; {size} parameters, weights {model_cfg.param_dtype}, compute {model_cfg.compute_dtype}, "
          f"remat {model_cfg.remat}, scan_layers {model_cfg.scan_layers}, attention {model_cfg.attention_impl}")

    reports = []
    if "train" in what:
        for factor in (0.0, args.shared_factor) if args.shared_factor else (0.0,):
            reports.append(train_program(config, model_cfg, mesh, hbm, runtime_options(config, model_cfg, args),
                                         generation, cost=not args.no_cost, shared_factor=factor))
    if "prefill" in what or "decode" in what:
        reports += sampler_programs(config, model_cfg, mesh, hbm, set(what), generation, cost=not args.no_cost)

    failed = print_reports(reports, hbm, generation, f"(topology {args.topology}, mesh {mesh_text})")
    result = {
        "topology": args.topology,
        "device_kind": kind,
        "chips": len(devices),
        "hbm_gib": hbm_chip_gib,
        "mesh": dict(mesh.shape),
        "model": source,
        "params": count,
        "param_dtype": model_cfg.param_dtype,
        "programs": [r.as_dict(hbm) for r in reports],
        "fits": not failed,
        "jax": jax.__version__,
    }
    return result, not failed


def print_reports(reports, hbm: int, generation: str, where: str) -> list:
    """Prints the per-chip table (with each row's shapes and cost) and an error line for each program
    that does not fit; returns those programs."""
    print("per chip, GiB:")
    print(f"{'program':10s} {'args':>7s} {'outputs':>7s} {'aliased':>7s} {'temps':>7s} {'code':>7s} {'total':>7s} / HBM  compile_s")
    for report in reports:
        print(report.line(hbm))
        attention = f"; attention {report.attention}" if report.attention else ""
        print(f"{'':10s} ({report.shapes}{attention})")
        if report.cost:
            c = report.cost
            passes = f"{c.get('passes')} pass{'' if c.get('passes') == 1 else 'es'}"
            traffic = (f"{c['traffic_bytes'] / GIB:.1f} GiB of HBM traffic in {passes} over the weights"
                       if "passes" in c else f"{c['xla_bytes'] / GIB:.1f} GiB of HBM traffic, loop bodies once")
            print(f"{'':10s} per chip and {'call' if 'passes' in c else 'step'}: {c['flops'] / 1e12:.1f} TFLOP "
                  f"(XLA counts {c['xla_flops'] / 1e12:.1f}; {traffic}); at least "
                  f"{c['roofline_s']:.2f} s on {generation} (compute {c['compute_s']:.2f} s, memory "
                  f"{c['memory_s']:.2f} s); MFU at most {c['mfu_bound']:.0%}")
    failed = [r for r in reports if not r.fits(hbm)]
    for report in failed:
        reason = report.error or (f"needs {report.total / GIB:.2f} GiB per chip, "
                                  f"{(report.total - hbm) / GIB:.2f} GiB more than the {hbm // GIB} GiB of HBM")
        print(f"error: {report.what} does not fit a {generation} chip: {reason} {where}; "
              f"use more chips, another mesh, fewer rows or shorter sequences"
              f"{' or a smaller --logits-chunk' if report.what == 'train' else ''}",
              file=sys.stderr)
    return failed


def main(argv: list[str] | None = None) -> dict:
    from milegpo_jax.config import ConfigError  # imports no jax

    try:  # the flags first: --help and a bad flag need no compiler
        args, overrides = parse_args(argv)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    setup_libtpu()  # before anything imports jax
    try:
        result, fits = run(args, overrides)
    except (AotError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    if args.json:
        print(json.dumps(result))
    if not fits:
        sys.exit(EXIT_DOES_NOT_FIT)
    return result

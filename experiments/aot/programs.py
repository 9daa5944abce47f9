"""Ahead-of-time compilation for a TPU topology on a CPU host: does a configuration fit the chips?

    python -m experiments.aot --config experiments/configs/alfworld.py --topology v5e:4x4 [--config.a.b=value ...]
    python -m experiments.aot --config experiments/configs/alfworld.py --topology v5p:2x2x2 --model qwen2.5-7b

The TPU compiler that ships with ``jax[tpu]`` (the ``libtpu`` wheel) compiles for a topology
description (``jax.experimental.topologies``) without any TPU attached. This lowers and compiles, with
the mesh and logical-axis rules of ``milegpo_jax.parallel``:

* ``train``: the trainer's own PPO step (``milegpo_jax.train.step.build_train_step``: gradients of the
  PPO loss over the largest mini-batch the trainer can form, ``ppo.minibatch_rows / ppo.microbatch_rows``
  micro-batches of ``ppo.microbatch_rows`` packed sequences of the longest row's bucket, then clipping +
  AdamW), parameters by the ``train`` rules, parameters and optimizer state donated;
* ``prefill`` / ``decode``: the sampler's two jitted functions (``milegpo_jax.sampling.sampler``) with the
  shapes ``milegpo_jax.sampling.plan.plan_generation`` gives one rollout batch
  (``env.groups_per_iteration * env.group_size`` prompts of ``sampling.max_prompt_tokens`` tokens,
  ``sampling.max_new_tokens`` new ones), parameters by the ``sample`` rules;

and prints each program's per-chip memory (``compiled.memory_analysis()``: arguments, outputs,
temporaries, generated code) against the chip's HBM; with ``model.remat=offload`` also the temporaries
the program keeps in the host's memory instead. Exit status 0 when everything fits, 1 when a
program does not (the message says which and by how much), 2 for bad arguments or a missing libtpu.

The model shape comes from ``--model PRESET``, else ``model.preset``, else the ``config.json`` of
``model.hf_checkpoint``, else ``model.architecture``, else the preset that ``model.name`` names
("Qwen2.5-1.5B-Instruct" -> ``qwen2.5-1.5b``). Weights and activations are bf16 unless ``--dtype config``
(the config's ``model.param_dtype`` / ``model.compute_dtype``).

libtpu: a ``pip install "jax[tpu]==0.10.2"`` environment has it; otherwise ``experiments/bootstrap.sh``
installs the wheel into ``.libtpu/`` (``$MILEGPO_LIBTPU_DIR`` overrides the folder), which is put on
``sys.path`` here before jax is imported (jax picks its plugins at import).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3
LIBTPU_VERSION = "0.0.42.1"  # the libtpu wheel jax[tpu]==0.10.2 pins

# HBM per chip in GiB, from the public Cloud TPU system-architecture pages (https://cloud.google.com/tpu/docs/v4,
# .../v5e, .../v5p, .../v6e: "HBM2 capacity" / "HBM capacity" per chip). The pages write GB; the TPU compiler's
# own out-of-memory message ("exceeds available HBM (15.75G)" on v5e, a little reserved) shows they are GiB.
HBM_GIB = {"v4": 32, "v5e": 16, "v5p": 95, "v6e": 32}
# Peak dense bf16 FLOP/s and HBM bandwidth (bytes/s) per chip, from the same pages ("Peak compute per
# chip (bf16)", "HBM bandwidth"): the roofline of a step.
PEAK = {"v5e": (197e12, 819e9), "v5p": (459e12, 2765e9), "v6e": (918e12, 1640e9)}
WHAT = ("train", "prefill", "decode")


@dataclasses.dataclass(frozen=True)
class TopologyRule:
    dims: int
    example: str
    shapes: tuple[tuple[int, ...], ...] | None = None  # the published slice shapes (2-D generations)
    max_side: int = 0  # 3-D generations: the largest side and chip count of a slice
    max_chips: int = 0


# Slice shapes from the Cloud TPU docs (cloud.google.com/tpu/docs/{v5e,v5p,v6e}, "supported
# configurations"): v5e and v6e come in fixed 2-D shapes up to 16x16; v5p is a 3-D torus whose sides
# are 1, 2 or multiples of 4 (up to 8,960 chips in a 16x20x28 pod).
_PLANE = ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16))
TOPOLOGY_RULES = {
    "v5e": TopologyRule(2, "v5e:4x4", shapes=_PLANE),
    "v5p": TopologyRule(3, "v5p:2x2x2", max_side=28, max_chips=8960),
    "v6e": TopologyRule(2, "v6e:2x2", shapes=_PLANE),
}
TOPOLOGY_EXAMPLES = ("v5e:4x4", "v5p:2x2x2", "v6e:2x2")
# Known generations this tool cannot compile for, and why
UNSUPPORTED = {
    "v4": "libtpu describes a v4 slice with one device per TensorCore, and jax builds meshes for TPU v4 "
          "and later only with one device per chip (megacore), so no mesh can be made; use v5e, v5p or v6e",
}
EXIT_DOES_NOT_FIT = 1
EXIT_USAGE = 2


class AotError(Exception):
    """A bad request (topology, model, mesh): printed, exit status 2."""


# ------------------------------------------------------------------------------------------ libtpu


def setup_libtpu() -> str:
    """Makes ``import libtpu`` work before jax is imported; returns where libtpu comes from."""
    if "jax" in sys.modules:  # too late: jax has chosen its plugins
        print("aot: warning: jax was imported before the libtpu set-up", file=sys.stderr)
    # Compiling for a topology needs no TPU: stay on CPU unless told otherwise, and tell libtpu it is not
    # on a TPU VM so that it neither queries the metadata server nor warns about the missing host names.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # libtpu otherwise takes a lockfile of its own in the temp folder, and a second compiling process (another aot run, a test)
    # fails with "Internal error when accessing libtpu multi-process lockfile"; nothing here opens a TPU.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    if importlib.util.find_spec("libtpu") is not None:
        return "installed"
    directory = os.environ.get("MILEGPO_LIBTPU_DIR") or str(ROOT / ".libtpu")
    sys.path.insert(0, directory)
    importlib.invalidate_caches()
    if importlib.util.find_spec("libtpu") is None:
        print(
            f"aot: error: libtpu (the TPU compiler) is not installed and not in {directory}. Either "
            f'`pip install "jax[tpu]==0.10.2"` (libtpu=={LIBTPU_VERSION}) or run `source experiments/bootstrap.sh`, '
            f"which installs it into {ROOT / '.libtpu'} (set MILEGPO_LIBTPU_DIR to use another folder)",
            file=sys.stderr,
        )
        sys.exit(EXIT_USAGE)
    return directory


# ------------------------------------------------------------------------------------------ arguments


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    from milegpo_jax.config import split_config_flags  # imports no jax

    overrides, rest = split_config_flags(sys.argv[1:] if argv is None else argv)
    # prog: the usage line names the tool as it did when it was one file, aot.py
    parser = argparse.ArgumentParser(prog="aot.py", description=__doc__.split("\n\n")[0])
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


def hbm_gib(topology: str) -> tuple[str, int]:
    generation = check_topology(topology)[0]
    return generation, HBM_GIB[generation]


def check_topology(topology: str) -> tuple[str, tuple[int, ...]]:
    """``(generation, chip grid)`` of a topology name that ``TOPOLOGY_RULES`` allows, else AotError
    (checked before libtpu sees it: libtpu aborts the process on a grid it cannot build)."""
    match = re.fullmatch(r"([a-z0-9]+):(\d+(?:x\d+)*)", topology.strip().lower())
    if not match:
        raise AotError(f"--topology {topology!r}: expected GENERATION:AxB[xC], e.g. {', '.join(TOPOLOGY_EXAMPLES)}")
    generation, grid = match.group(1), tuple(int(n) for n in match.group(2).split("x"))
    if generation in UNSUPPORTED:
        raise AotError(f"--topology {topology!r}: not supported: {UNSUPPORTED[generation]}")
    if generation not in TOPOLOGY_RULES:
        raise AotError(f"--topology {topology!r}: unknown TPU generation {generation!r}; known: {', '.join(TOPOLOGY_RULES)}")
    rule = TOPOLOGY_RULES[generation]
    if len(grid) != rule.dims:
        raise AotError(f"--topology {topology!r}: {generation} slices are {rule.dims}-D grids, e.g. {rule.example}")
    if rule.shapes is not None and grid not in rule.shapes:
        shapes = ", ".join("x".join(map(str, shape)) for shape in rule.shapes)
        raise AotError(f"--topology {topology!r}: {generation} slices come in {shapes}")
    if rule.shapes is None:
        chips = math.prod(grid)
        bad = [n for n in grid if not (n in (1, 2) or n % 4 == 0) or n > rule.max_side]
        if bad or chips > rule.max_chips:
            raise AotError(f"--topology {topology!r}: {generation} grids have sides of 1, 2 or a multiple of 4 up to "
                           f"{rule.max_side}, at most {rule.max_chips} chips, e.g. {rule.example}")
    return generation, grid


def preset_for_name(name: str) -> str | None:
    """``"Qwen2.5-1.5B-Instruct"`` -> ``"qwen2.5-1.5b"`` when that preset exists."""
    from milegpo_jax.models.model_config import PRESETS

    key = name.lower().removesuffix("-instruct")
    return key if key in PRESETS else None


def model_config(config, model: str | None, dtype: str):
    """The ``ModelConfig`` to compile and a phrase saying where its shape came from: the shape with every
    runtime option of the run (remat, scan, attention block and kernel) applied as the trainer's model
    has them, and this command's dtypes."""
    from milegpo_jax.models.runtime import RuntimeOptions

    section = config.model
    dtypes = (section.param_dtype, section.compute_dtype) if dtype == "config" else (dtype, dtype)
    options = dataclasses.replace(RuntimeOptions.from_config(config), param_dtype=dtypes[0], compute_dtype=dtypes[1])
    shape, source = model_shape(config, model)
    return options.apply(shape), source


def model_shape(config, model: str | None):
    """The architecture to compile (``--model``, else the config's source of the policy) and where it came from."""
    from milegpo_jax.models import config_from_hf, preset
    from milegpo_jax.models.model_config import PRESETS

    section = config.model
    if model is not None:
        if model not in PRESETS:
            raise AotError(f"--model {model!r}: unknown preset; available: {', '.join(sorted(PRESETS))}")
        return preset(model), f"preset {model} (--model)"
    if section.preset is not None:
        return preset(section.preset), f"preset {section.preset}"
    if section.hf_checkpoint is not None:
        path = Path(section.hf_checkpoint).expanduser() / "config.json"
        if not path.is_file():
            raise AotError(f"model.hf_checkpoint={section.hf_checkpoint!r}: no config.json there")
        return config_from_hf(json.loads(path.read_text()), source=str(path)), f"{path}"
    if section.architecture is not None:
        arch = section.architecture
        note = "model.architecture"
        vocab = arch.vocab_size
        if not vocab:  # the tokenizer decides at training time; any small vocabulary shows the shape
            vocab = 1024
            note += " (vocab_size 0: 1024 assumed; set --config.model.architecture.vocab_size)"
        return arch.model_config(vocab_size=vocab), note
    guess = preset_for_name(section.name) if section.name else None
    if guess is not None:
        return preset(guess), f"preset {guess} (from model.name {section.name!r})"
    raise AotError(
        "the config names no model shape (model.preset, model.hf_checkpoint, model.architecture are unset): "
        f"pass --model PRESET ({', '.join(sorted(PRESETS))})"
    )


def runtime_options(config, model_cfg, args):
    """The run's ``RuntimeOptions`` with this command's dtypes and ``--logits-chunk``."""
    from milegpo_jax.models.runtime import RuntimeOptions

    chunk = args.logits_chunk if args.logits_chunk is not None else config.ppo.logits_chunk
    return dataclasses.replace(RuntimeOptions.from_config(config), param_dtype=model_cfg.param_dtype,
                               compute_dtype=model_cfg.compute_dtype, logits_chunk=int(chunk))


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


# ------------------------------------------------------------------------------------------ memory


@dataclasses.dataclass
class Report:
    what: str
    shapes: str
    arguments: int = 0
    outputs: int = 0
    aliased: int = 0
    temporaries: int = 0
    host_temporaries: int = 0  # in the host's memory, not HBM: residuals model.remat="offload" moves off the chip
    code: int = 0
    compile_s: float = 0.0
    error: str = ""  # the compiler refused (e.g. out of HBM) or arguments alone exceed HBM
    attention: str = ""  # the form the program's attention takes (train; prefill: a kernel or dense chunks)
    cost: dict = dataclasses.field(default_factory=dict)  # FLOPs, bytes and roofline per chip (train, prefill)

    @property
    def total(self) -> int:
        """Peak per-chip bytes: live arguments + outputs (less what is donated into them) + scratch + code."""
        return self.arguments + self.outputs - self.aliased + self.temporaries + self.code

    def fits(self, hbm: int) -> bool:
        return not self.error and self.total <= hbm

    def line(self, hbm: int) -> str:
        def g(n):
            return f"{n / GIB:7.2f}"

        verdict = "fits" if self.fits(hbm) else "DOES NOT FIT"
        text = (f"{self.what:10s} {g(self.arguments)} {g(self.outputs)} {g(self.aliased)} {g(self.temporaries)} "
                f"{g(self.code)} {g(self.total)} / {hbm / GIB:.0f}  {self.compile_s:6.1f}  {verdict}")
        if self.host_temporaries:
            text += f" (and {self.host_temporaries / GIB:.2f} GiB in host memory)"
        return text + (f": {self.error}" if self.error else "")

    def as_dict(self, hbm: int) -> dict:
        fields = {k: v for k, v in dataclasses.asdict(self).items()}
        fields.update(total=self.total, fits=self.fits(hbm))
        return fields


def per_chip_bytes(tree) -> int:
    """Bytes one device holds of ``ShapeDtypeStruct`` leaves carrying shardings."""
    import jax
    import numpy as np

    total = 0
    for leaf in jax.tree.leaves(tree):
        shape = leaf.sharding.shard_shape(leaf.shape) if leaf.sharding is not None else leaf.shape
        total += math.prod(shape) * np.dtype(leaf.dtype).itemsize
    return total


def compile_program(report: Report, lowered_fn, hbm: int):
    """Lowers and compiles; fills ``report``. Returns the compiled program (None when it failed)."""
    start = time.perf_counter()
    try:
        compiled = lowered_fn().compile()
    except RuntimeError as error:  # XlaRuntimeError; the TPU compiler reports HBM exhaustion as RESOURCE_EXHAUSTED
        message = str(error)
        if "RESOURCE_EXHAUSTED" not in message and "memory" not in message.lower():
            raise
        report.compile_s = time.perf_counter() - start
        report.error = "the TPU compiler ran out of HBM: " + " ".join(message.split())[:400]
        # "... the total memory required for HLO temporaries (16.51G) exceeds available HBM (15.75G)."
        needed = re.search(r"HLO temporaries \(([\d.]+)G\)", message)
        if needed:
            report.temporaries = int(float(needed.group(1)) * GIB)
        return None
    report.compile_s = time.perf_counter() - start
    stats = compiled.memory_analysis()
    report.arguments = stats.argument_size_in_bytes
    report.outputs = stats.output_size_in_bytes
    report.aliased = stats.alias_size_in_bytes
    report.temporaries = stats.temp_size_in_bytes
    report.host_temporaries = stats.host_temp_size_in_bytes
    report.code = stats.generated_code_size_in_bytes
    return compiled


# ------------------------------------------------------------------------------------------ programs


def abstract_params(model_cfg, sharding):
    """(graphdef, params as sharded ShapeDtypeStructs) of the model placed by ``sharding``'s rules."""
    from flax import nnx

    from milegpo_jax.models import abstract_model
    from milegpo_jax.parallel import state_shardings

    model = abstract_model(model_cfg.config, model_cfg.runtime, sharding)  # model.sharding is set: activations are constrained too
    graphdef, state = nnx.split(model)
    shardings = state_shardings(state, sharding)
    return graphdef, with_shardings(state, shardings), shardings


def with_shardings(abstract, shardings):
    """``ShapeDtypeStruct`` leaves of ``abstract`` carrying the matching leaves of ``shardings``."""
    import jax

    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings)


def train_step_program(config, graphdef, runtime):
    """The trainer's PPO step for ``config`` (``build_train_step``) and the largest mini-batch it can
    meet: ``(step, (micro-batches, sequences per micro-batch, positions, LM-head positions))``."""
    from milegpo_jax.train.packing import capacity_for_length, head_width
    from milegpo_jax.train.step import build_train_step

    ppo = config.ppo
    # packed sequences hold the longest possible row: prompt + response - 1 positions, rounded as
    # ppo.sequence_capacity does; at worst every row needs its own sequence. The LM head reads at most
    # head_width positions of each (ppo.ppo_epoch packs within it).
    length = capacity_for_length(config.sampling.max_prompt_tokens + config.sampling.max_new_tokens - 1)
    head = head_width(length, config.sampling.max_new_tokens)
    shape = (ppo.minibatch_rows // ppo.microbatch_rows, ppo.microbatch_rows, length, head)
    return build_train_step(config, graphdef, runtime), shape


def tree_shape(shape, factor: float, form: str):
    """The same mini-batch's rows tree-packed (docs/training.md §3.1) when their prompts share
    ``factor``-fold: ``factor``-fold fewer sequences of the same length, each with ``factor`` times the
    LM-head positions; on a fused kernel each sequence expands to ``factor`` times its positions and a
    micro-batch holds as many sequences as keep its attention slots within the rows-alone one's
    (``packing.sequences_per_micro``). Returns (micro-batches, sequences, positions, LM-head
    positions, tree levels, expanded slots)."""
    from milegpo_jax.models.attention import KERNEL_BLOCK, KERNEL_PLATFORMS
    from milegpo_jax.train.packing import sequences_per_micro
    from milegpo_jax.train.prefix_tree import MAX_DEPTH

    micro, rows, length, head = shape
    sequences = max(1, math.ceil(micro * rows / factor))
    expanded = KERNEL_BLOCK * math.ceil(factor * length / KERNEL_BLOCK) if form in KERNEL_PLATFORMS else 0
    per_micro = min(sequences_per_micro(rows, length, expanded), sequences)
    head = min(length, KERNEL_BLOCK * math.ceil(head * factor / KERNEL_BLOCK))
    return math.ceil(sequences / per_micro), per_micro, length, head, MAX_DEPTH, expanded


def jitted_with_arguments(step, params, param_shardings, sharding, shape):
    """(the jitted ``step``, its abstract arguments) for batches of ``shape`` (micro-batches, sequences,
    positions, LM-head positions[, tree levels, expanded slots]), parameters and optimizer state placed
    and donated as the trainer does."""
    from milegpo_jax.train.step import batch_shapes, jit_train_step, train_step_shardings

    _, opt_shardings, abstract_opt = train_step_shardings(step, params, sharding)
    opt_state = with_shardings(abstract_opt, opt_shardings)
    micro, rows, length, head, *tree = shape
    batch = batch_shapes(step.loss.keys, micro, rows, length, head, sharding, *tree)
    return jit_train_step(step, param_shardings, opt_shardings), (params, opt_state, batch)


def attention_flops(model_cfg, form: str, sequences: int, length: int) -> float:
    """The attention matmuls one train step computes over ``sequences`` packed sequences, by form.

    One unit is a query's dot products with ``length`` keys, ``2 * length * head_dim`` FLOPs, per head,
    layer and position. The scores and the weighted values are one unit each forward; the backward pass
    takes 4 (XLA's dense and blocked forms) or 7 (the kernels recompute the scores: dq 3, dk/dv 4); remat
    recomputes the forward (2 more). ``blocks`` and the kernels skip the block pairs above the
    diagonal: ``(n + 1) / (2 n)`` of the square for ``n`` blocks."""
    from milegpo_jax.models.attention import KERNEL_PLATFORMS, kernel_tile

    remat = 2 if model_cfg.remat != "none" else 0
    if form in KERNEL_PLATFORMS:
        passes, block = 2 + 7 + remat, kernel_tile(length)
    else:
        passes, block = 2 + 4 + remat, model_cfg.attention_block if form == "blocks" else length
    n = length // block
    unit = 2.0 * length * model_cfg.head_dim * model_cfg.num_heads * model_cfg.num_layers * sequences * length
    return unit * passes * (n + 1) / (2 * n)


def train_cost(compiled, model_cfg, form: str, shape, chips: int, generation: str) -> dict:
    """FLOPs per chip and step, a lower bound on the step's time on ``generation`` and the MFU bound.

    ``compiled.cost_analysis()`` counts a loop's body once (checked on the TPU compiler: a 10-step
    ``lax.scan`` of a matmul reports one matmul). The step loops over micro-batches, scanned layers and
    LM-head chunks, and the TPU compiler turns sharded matmuls into loops of its own, so its FLOPs and
    bytes (``xla_flops``, ``xla_bytes``) are lower bounds; a kernel's FLOPs are not in them at all.
    The FLOPs are therefore counted from the model: ``(6 + 2 remat) N`` per trained position for the
    decoder, ``6`` times the LM head's parameters at each of its ``head`` positions, plus
    ``attention_flops``. ``roofline_s`` is ``max(FLOPs / peak, xla_bytes / bandwidth)``, a lower bound on
    the step's time; ``mfu_bound`` is the PaLM model FLOPs (``experiments.bench.device.train_flops``,
    as the device benchmark's MFU) over ``peak * roofline_s``, an upper bound on its MFU."""
    from experiments.bench.device import matmul_params, train_flops
    from milegpo_jax.models import num_params

    micro, rows, length, head, *tree = shape
    attended = tree[1] if tree and tree[1] else length  # a kernel attends over a tree's expanded slots
    sequences = micro * rows
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    xla_flops, xla_bytes = float(analysis.get("flops", 0.0)), float(analysis.get("bytes accessed", 0.0))
    params = num_params(model_cfg)
    head_params = model_cfg.vocab_size * model_cfg.hidden_size  # the LM head runs at `head` positions only
    body = (6 + (2 if model_cfg.remat != "none" else 0)) * (matmul_params(model_cfg, params) - head_params)
    weights = body * sequences * length + 6 * head_params * sequences * head
    flops = (weights + attention_flops(model_cfg, form, sequences, attended)) / chips
    model_flops = sum(train_flops(model_cfg, params, sequences, length, head)) / chips
    peak_flops, bandwidth = PEAK[generation]
    roofline_s = max(flops / peak_flops, xla_bytes / bandwidth)
    return {"flops": flops, "model_flops": model_flops, "xla_flops": xla_flops, "xla_bytes": xla_bytes,
            "compute_s": flops / peak_flops, "memory_s": xla_bytes / bandwidth, "roofline_s": roofline_s,
            "mfu_bound": model_flops / (peak_flops * roofline_s)}


def prefill_cost(compiled, model_cfg, form: str, batch: int, bucket: int, chunk: int, cache_slots: int,
                 weight_bytes: int, cache_bytes: int, chips: int, generation: str) -> dict:
    """FLOPs and HBM traffic per chip of one prefill call, a lower bound on its time and the MFU bound.

    Counted from the model, as ``train_cost`` (XLA's figures count the chunks' loop body once):
    ``2 N`` per prompt position for the decoder, the LM head at each row's last position, and the
    attention: the dense form scores every chunk against all ``cache_slots``; a kernel (one pass) the
    block pairs on or below the diagonal of the prompt. The traffic counts what every pass must read:
    the weights (``weight_bytes`` per chip, replicated by the ``sample`` rules) and the KV cache's slots
    (``cache_bytes``), once per chunk for the dense form, once for a kernel, plus the cache's write."""
    from experiments.bench.device import matmul_params
    from milegpo_jax.models import num_params
    from milegpo_jax.models.attention import KERNEL_PLATFORMS, kernel_tile

    head_params = model_cfg.vocab_size * model_cfg.hidden_size
    positions = batch * bucket
    decoder = 2.0 * (matmul_params(model_cfg, num_params(model_cfg)) - head_params) * positions
    head = 2.0 * head_params * batch
    # a query's scores and weighted values against one key: 4 * head_dim FLOPs per head and layer
    unit = 4.0 * model_cfg.head_dim * model_cfg.num_heads * model_cfg.num_layers * positions
    if form in KERNEL_PLATFORMS:
        passes, n = 1, bucket // kernel_tile(bucket)
        attention = unit * bucket * (n + 1) / (2 * n)
    else:
        passes = -(-bucket // chunk)
        attention = unit * cache_slots
    flops = (decoder + head + attention) / chips
    traffic = passes * (weight_bytes + cache_bytes) + cache_bytes
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    peak_flops, bandwidth = PEAK[generation]
    roofline_s = max(flops / peak_flops, traffic / bandwidth)
    return {"flops": flops, "model_flops": (decoder + head) / chips, "passes": passes,
            "xla_flops": float(analysis.get("flops", 0.0)), "xla_bytes": float(analysis.get("bytes accessed", 0.0)),
            "traffic_bytes": float(traffic), "compute_s": flops / peak_flops, "memory_s": traffic / bandwidth,
            "roofline_s": roofline_s, "mfu_bound": (decoder + head) / chips / (peak_flops * roofline_s)}


def train_program(config, model_cfg, mesh, hbm: int, runtime, generation: str = "", cost: bool = False,
                  shared_factor: float = 0.0) -> Report:
    """The train step's report; with ``shared_factor`` the same rows tree-packed (``tree_shape``)."""
    from milegpo_jax.models.attention import choose_attention
    from milegpo_jax.parallel import logical_sharding

    sharding = logical_sharding(mesh, "train")
    graphdef, params, param_shardings = abstract_params(model_cfg, sharding)
    step, shape = train_step_program(config, graphdef, runtime)
    form = choose_attention(model_cfg.attention_impl, "tpu", shape[2], model_cfg.attention_block)
    if shared_factor:
        shape = tree_shape(shape, shared_factor, form)
    micro, rows, length, head, *tree = shape
    jitted, (params, opt_state, batch) = jitted_with_arguments(step, params, param_shardings, sharding, shape)
    what = f"{micro} micro-batches x {rows} sequences x {length} tokens ({head} in the LM head)"
    if shared_factor:
        what += f", tree-packed {shared_factor:g}-fold{f', {tree[1]} expanded slots' if tree[1] else ''}"
    report = Report("train-tree" if shared_factor else "train", what)
    report.attention = form
    # A lower bound without compiling: parameters, optimizer state and the summed gradients (parameter-sized)
    # are all alive at the update.
    state_bytes = per_chip_bytes((params, opt_state)) + per_chip_bytes(params)
    if state_bytes > hbm:
        report.arguments = per_chip_bytes((params, opt_state, batch))
        report.error = (f"parameters, optimizer state and gradients alone take {state_bytes / GIB:.2f} GiB per chip "
                        "(not compiled)")
        return report
    compiled = compile_program(report, lambda: jitted.lower(params, opt_state, batch), hbm)
    if compiled is None:
        report.arguments = per_chip_bytes((params, opt_state, batch))
    elif cost:
        report.cost = train_cost(compiled, model_cfg, report.attention, shape, mesh.size, generation)
    return report


def sampler_programs(config, model_cfg, mesh, hbm: int, what: set[str], generation: str = "",
                     cost: bool = False) -> list[Report]:
    import functools

    import jax
    import numpy as np

    from flax import nnx

    from milegpo_jax.models.attention import choose_cache_attention
    from milegpo_jax.parallel import logical_sharding
    from milegpo_jax.sampling.config import SamplingConfig
    from milegpo_jax.sampling.plan import plan_generation
    from milegpo_jax.sampling.sampler import Controls, decode, prefill
    from milegpo_jax.sampling.stopping import build_stop_table

    sharding = logical_sharding(mesh, "sample")
    graphdef, params, _ = abstract_params(model_cfg, sharding)
    sampling = config.sampling
    budget = sampling.max_new_tokens
    # as the trainer's SamplerPolicy: the cache holds the longest prompt plus the budget
    rollout = SamplingConfig(max_new_tokens=budget, max_cache_len=sampling.max_prompt_tokens + budget,
                             temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k)
    rows = config.env.groups_per_iteration * config.env.group_size
    plan = plan_generation(rows, sampling.max_prompt_tokens, rollout, rollout.max_cache_len)
    batch, bucket, switches = plan.batch, plan.bucket, plan.switches

    def struct(shape, dtype, axes):
        return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding.named(axes, shape))

    eos = model_cfg.eos_token_id if model_cfg.eos_token_id is not None else 0
    eos_ids = eos if isinstance(eos, tuple) else (eos,)
    # stop strings ("</action>") become a few short token sequences; their ids do not change the shapes
    stops = build_stop_table(eos_ids, [(1, 2, 3, 4), (5, 6, 7), (8, 9, 10)])
    key = jax.eval_shape(lambda: jax.random.key(0))
    controls = Controls(
        temperature=struct((), np.float32, ()),
        top_p=struct((), np.float32, ()),
        stops=jax.tree.map(lambda x: struct(x.shape, x.dtype, (None,) * x.ndim), stops),
        row_budgets=struct((batch,), np.int32, ("batch",)),
        key=jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=sharding.named(())),
    )
    ids = struct((batch, bucket), np.int32, ("batch", "seq"))
    shapes = f"{batch} prompts x {bucket} tokens + {budget} new (cache {bucket + budget})"
    reports = []
    prefill_report = Report("prefill", shapes)
    compiled = compile_program(
        prefill_report,
        lambda: prefill.lower(params, ids, ids, controls, graphdef=graphdef, switches=switches),
        hbm,
    )
    # the form the prefill's attention takes (the sampler's one pass by a kernel, or dense chunks)
    prefill_report.attention = choose_cache_attention(model_cfg.attention_impl, "tpu", bucket, 0)
    if compiled is None:
        prefill_report.arguments = per_chip_bytes((params, ids, ids, controls))
    elif cost:
        cache = jax.eval_shape(lambda: nnx.merge(graphdef, params).init_cache(batch, plan.cache_len))
        cache_bytes = per_chip_bytes(with_shardings(cache, compiled.output_shardings.cache))
        prefill_report.cost = prefill_cost(compiled, model_cfg, prefill_report.attention, batch, bucket,
                                           switches.prefill_chunk, plan.cache_len, per_chip_bytes(params),
                                           cache_bytes, mesh.size, generation)
    if "prefill" in what:
        reports.append(prefill_report)
    if "decode" in what:
        decode_report = Report("decode", shapes)
        if compiled is None:
            decode_report.error = "not compiled: the prefill that makes its input did not compile"
        else:
            abstract_state = jax.eval_shape(
                functools.partial(prefill, graphdef=graphdef, switches=switches), params, ids, ids, controls
            )
            state = with_shardings(abstract_state, compiled.output_shardings)
            if compile_program(
                decode_report,
                lambda: decode.lower(params, state, controls, graphdef=graphdef, switches=switches),
                hbm,
            ) is None:
                decode_report.arguments = per_chip_bytes((params, state, controls))
        reports.append(decode_report)
    return reports


# ------------------------------------------------------------------------------------------ main


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
                                  f"{(report.total - hbm) / GIB:.2f} GiB more than the {hbm_chip_gib} GiB of HBM")
        print(f"error: {report.what} does not fit a {generation} chip: {reason} "
              f"(topology {args.topology}, mesh {mesh_text}); "
              f"use more chips, another mesh, fewer rows or shorter sequences"
              f"{' or a smaller --logits-chunk' if report.what == 'train' else ''}",
              file=sys.stderr)
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


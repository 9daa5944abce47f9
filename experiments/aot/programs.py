"""The programs ``experiments.aot`` compiles: the model shape a config names, the trainer's PPO step over
its largest mini-batch (also tree-packed), and the sampler's prefill and decode, each lowered with
abstract, sharded arguments and compiled into a ``Report``."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from experiments.aot.cost import prefill_cost, train_cost
from experiments.aot.memory import Report, compile_program, per_chip_bytes
from experiments.aot.topologies import GIB, AotError


def preset_for_name(name: str) -> str | None:
    """``"Qwen2.5-1.5B-Instruct"`` -> ``"qwen2.5-1.5b"`` when that preset exists."""
    from milegpo_jax.models.model_config import PRESETS

    key = name.lower().removesuffix("-instruct")
    return key if key in PRESETS else None


def model_config(config, model: str | None, dtype: str):
    """The ``ModelConfig`` to compile and a phrase saying where its shape came from: the shape with every
    runtime option of the run (remat, scan, attention block and kernel) applied as the trainer's model
    has them, and this command's dtypes."""
    section = config.model
    dtypes = (section.param_dtype, section.compute_dtype) if dtype == "config" else (dtype, dtype)
    options = dataclasses.replace(config.runtime_options(), param_dtype=dtypes[0], compute_dtype=dtypes[1])
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
    chunk = args.logits_chunk if args.logits_chunk is not None else config.ppo.logits_chunk
    return dataclasses.replace(config.runtime_options(), param_dtype=model_cfg.param_dtype,
                               compute_dtype=model_cfg.compute_dtype, logits_chunk=int(chunk))


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
    return build_train_step(graphdef, runtime, config.ppo_loss_config(), config.optimizer_config()), shape


def tree_shape(shape, factor: float, form: str, quantum: int = 1):
    """The same mini-batch's rows tree-packed (docs/training.md §3.1) when their prompts share
    ``factor``-fold: ``factor`` times fewer positions in all, the same response positions in the LM
    head; on a fused kernel the sequences keep the rows' length (``train.step.update_sharing``) and each
    expands to ``factor`` times its positions, elsewhere they are ``Sharing.span`` times as long; a
    micro-batch holds as many sequences as keep its positions and attention slots within the rows-alone
    one's (``packing.sequences_per_micro``, a multiple of ``quantum``, the batch shards). Returns
    (micro-batches, sequences, positions, LM-head positions, tree levels, expanded slots)."""
    from milegpo_jax.models.attention import KERNEL_BLOCK, KERNEL_PLATFORMS
    from milegpo_jax.train.packing import Sharing, sequences_per_micro
    from milegpo_jax.train.prefix_tree import MAX_DEPTH

    micro, rows, base, head = shape
    kernel = form in KERNEL_PLATFORMS
    length = base if kernel else Sharing().capacity(base)
    sequences = max(1, math.ceil(micro * rows * base / (factor * length)))
    expanded = KERNEL_BLOCK * math.ceil(factor * length / KERNEL_BLOCK) if kernel else 0
    per_micro = sequences_per_micro(rows, base, max(length, expanded), quantum)
    per_micro = min(per_micro, -(-sequences // quantum) * quantum)
    head = min(length, KERNEL_BLOCK * math.ceil(head * factor * length / base / KERNEL_BLOCK))
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
        shape = tree_shape(shape, shared_factor, form, mesh.shape["data"] * mesh.shape["fsdp"])
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

    from milegpo_jax.models.attention import KERNEL_BLOCK, choose_cache_attention
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
    plan = plan_generation(rows, sampling.max_prompt_tokens, rollout, rollout.max_cache_len, KERNEL_BLOCK)  # TPU: kernel blocks
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

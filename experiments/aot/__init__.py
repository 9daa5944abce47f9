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

The modules: ``topologies`` (the chips, slice shapes, libtpu set-up), ``memory`` (per-chip memory of a
compiled program), ``cost`` (FLOPs and roofline), ``programs`` (what is compiled), ``cli`` (arguments,
run, printing). Every public name is importable from here; nothing here imports jax.
"""

from experiments.aot.cli import WHAT, main, mesh_config, parse_args, print_reports, run
from experiments.aot.cost import attention_flops, prefill_cost, train_cost
from experiments.aot.memory import Report, compile_program, per_chip_bytes
from experiments.aot.programs import (abstract_params, jitted_with_arguments, model_config, model_shape,
                                      preset_for_name, runtime_options, sampler_programs, train_program,
                                      train_step_program, tree_shape, with_shardings)
from experiments.aot.topologies import (EXIT_DOES_NOT_FIT, EXIT_USAGE, GIB, HBM_GIB, LIBTPU_VERSION, PEAK, ROOT,
                                        TOPOLOGY_EXAMPLES, TOPOLOGY_RULES, UNSUPPORTED, AotError, TopologyRule,
                                        check_topology, hbm_gib, setup_libtpu)

__all__ = [
    "EXIT_DOES_NOT_FIT", "EXIT_USAGE", "GIB", "HBM_GIB", "LIBTPU_VERSION", "PEAK", "ROOT", "TOPOLOGY_EXAMPLES",
    "TOPOLOGY_RULES", "UNSUPPORTED", "WHAT", "AotError", "Report", "TopologyRule", "abstract_params", "attention_flops",
    "check_topology", "compile_program", "hbm_gib", "jitted_with_arguments", "main", "mesh_config", "model_config",
    "model_shape", "parse_args", "per_chip_bytes", "prefill_cost", "preset_for_name", "print_reports", "run",
    "runtime_options", "sampler_programs", "setup_libtpu", "train_cost", "train_program", "train_step_program",
    "tree_shape", "with_shardings",
]

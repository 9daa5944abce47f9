"""Runtime options reach every model the trainer builds, and change how it runs, not what it learns:
one iteration with scanned, fully rematerialised layers ends with the parameters of one without."""

from __future__ import annotations

import shutil

import jax
import numpy as np
import pytest
from flax import nnx

from experiments.train import build_config
from milegpo_jax.config import ModelSection
from milegpo_jax.models import ModelConfigError, preset
from milegpo_jax.models.runtime import ModelSpec, RuntimeOptions
from milegpo_jax.train.trainer import Trainer

TINY = [
    "model.architecture.hidden_size=32",
    "model.architecture.intermediate_size=64",
    "model.architecture.num_layers=2",
    "env.groups_per_iteration=2",
    "env.group_size=2",
    "env.max_env_steps=3",
    "env.history_length=0",
    "env.eval_tasks_per_split.eval_id=1",  # (0 would mean the whole split at the last iteration)
    "sampling.max_new_tokens=8",
    "sft.episodes=2",
    "sft.epochs=1",
    "sft.batch_rows=4",
    "ppo.kl_coef=0.05",  # a reference model too
    "ppo.minibatch_rows=8",
    "ppo.microbatch_rows=4",
    "run.iterations=1",
    "run.eval_every=0",
    "run.eval_before_training=false",
    "logging.progress_bar=false",
]


def test_options_come_from_the_config_and_are_checked():
    config = build_config("experiments/configs/demo.py", ["model.remat=full", "model.scan_layers=true",
                                                          "ppo.logits_chunk=16", "model.attention_block=64"])
    runtime = config.runtime_options()
    assert runtime == RuntimeOptions(param_dtype="float32", compute_dtype="float32", remat="full", scan_layers=True,
                                     attention_block=64, logits_chunk=16)
    assert runtime.chunk_size == 16
    assert build_config("experiments/configs/demo.py", ["model.attention_impl=xla"]).runtime_options() \
        .attention_impl == "xla"
    assert build_config("experiments/configs/demo.py", []).runtime_options().attention_block == 128
    assert RuntimeOptions(logits_chunk=0).chunk_size is None
    with pytest.raises(ModelConfigError, match="remat"):
        RuntimeOptions(remat="some")
    with pytest.raises(ModelConfigError, match="attention_block"):
        RuntimeOptions(attention_block=-1)
    with pytest.raises(ModelConfigError, match="attention_impl"):
        RuntimeOptions(attention_impl="flash")


def test_one_default_for_each_option():
    """The config's model section takes RuntimeOptions' fields and defaults (ppo.logits_chunk aside)."""
    section = ModelSection()
    defaults = RuntimeOptions()
    for name in ("param_dtype", "compute_dtype", "remat", "scan_layers", "attention_block", "attention_impl"):
        assert getattr(section, name) == getattr(defaults, name), name
    assert defaults.attention_block == 128


def test_apply_pairs_an_architecture_with_the_options():
    options = RuntimeOptions(remat="full", compute_dtype="bfloat16")
    spec = options.apply(preset("qwen2.5-0.5b"))
    assert spec == ModelSpec(preset("qwen2.5-0.5b"), options)
    assert (spec.num_layers, spec.remat, spec.compute_dtype) == (24, "full", "bfloat16")  # read through
    assert RuntimeOptions().apply(spec) == ModelSpec(preset("qwen2.5-0.5b"), RuntimeOptions())  # replaced
    with pytest.raises(AttributeError, match="dtype"):
        spec.dtype  # noqa: B018  (the old spelling of the compute dtype is gone)


@pytest.mark.slow
def test_scanned_rematerialised_iteration_equals_the_plain_one(tmp_path):
    def run(workdir, *overrides):
        trainer = Trainer(build_config("experiments/configs/demo.py", [*TINY, *overrides]), workdir)
        trainer.run()
        return trainer

    plain = run(tmp_path / "plain", "model.scan_layers=false", "model.remat=none")
    # the same warm start (the expert demonstrations are not yet reproducible across runs)
    shutil.copytree(tmp_path / "plain" / "warm_start", tmp_path / "scanned" / "warm_start")
    scanned = run(tmp_path / "scanned", "model.scan_layers=true", "model.remat=full", "ppo.logits_chunk=8")
    for model in (scanned.model, scanned.reference):
        assert model.runtime.scan_layers and model.runtime.remat == "full"
    assert not plain.model.runtime.scan_layers

    def flat(trainer):
        state = nnx.to_flat_state(nnx.state(trainer.model, nnx.Param))
        return {tuple(str(p) for p in path): np.asarray(v.get_value()) for path, v in state}

    plain_params, scanned_params = flat(plain), flat(scanned)
    compared = off = 0
    for path, value in plain_params.items():
        if path[0] == "layers":  # unrolled: layers/<i>/...; scanned: layers/... stacked over [layers, ...]
            value, other = value, scanned_params[("layers", *path[2:])][int(path[1])]
        else:
            other = scanned_params[path]
        # One Adam step moves a weight by up to lr (1e-3) whatever the gradient's size, so fp32 rounding
        # of a near-zero gradient can move a few weights differently (measured: 1 of 3,648 embedding
        # entries by 1.4e-4). Every weight stays within one step; all but a handful within 5 % of one.
        difference = np.abs(value - other)
        assert difference.max() <= 1e-3, "/".join(path)
        off += int((difference > 5e-5).sum())
        compared += value.size
    assert compared == sum(v.size for v in scanned_params.values())
    assert off <= max(2, compared // 1000), f"{off} of {compared} weights differ by more than 5e-5"
    ids = jax.numpy.asarray(np.arange(1, 17, dtype=np.int32)[None] % plain.model.config.vocab_size)
    moved = np.abs(np.asarray(plain.model(ids)) - np.asarray(plain.reference(ids))).max()
    assert moved > 1e-4  # the update did change the policy (so equal parameters mean equal updates)

"""experiments.aot: ahead-of-time compilation for a TPU topology on this CPU host (no TPU needed).

Each case runs ``python -m experiments.aot`` in a fresh interpreter (jax picks its plugins at import,
and libtpu must be set up before that). Needs libtpu: experiments/bootstrap.sh installs it into .libtpu/
(or a ``pip install "jax[tpu]==0.10.2"`` environment has it); without it these tests skip.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBTPU_DIR = Path(os.environ.get("MILEGPO_LIBTPU_DIR") or ROOT / ".libtpu")
HAVE_LIBTPU = (LIBTPU_DIR / "libtpu").is_dir() or importlib.util.find_spec("libtpu") is not None
needs_libtpu = pytest.mark.skipif(
    not HAVE_LIBTPU,
    reason=f"libtpu is not installed (not importable, not in {LIBTPU_DIR}): run `source experiments/bootstrap.sh` "
    "(installs it into .libtpu/) or `pip install \"jax[tpu]==0.10.2\"`",
)

# A tiny Qwen2 (the demo's architecture with a small vocabulary) and small rollout/PPO shapes: each
# program compiles in seconds.
TINY = [
    "--config", "experiments/configs/demo.py",
    "--config.model.architecture.vocab_size=256",
    "--config.model.architecture.hidden_size=64",
    "--config.model.architecture.intermediate_size=128",
    "--config.sampling.max_prompt_tokens=32",
    "--config.sampling.max_new_tokens=8",
    "--config.env.groups_per_iteration=2",
    "--config.env.group_size=4",
    "--config.ppo.minibatch_rows=8",
    "--config.ppo.microbatch_rows=4",
]


def run_aot(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    environment = {**os.environ, "JAX_PLATFORMS": "cpu", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "experiments.aot", *args], check=False, cwd=ROOT, env=environment,
        capture_output=True, text=True, timeout=timeout,
    )


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@needs_libtpu
def test_tiny_model_compiles_for_a_v5e_slice_and_reports_memory_per_chip():
    result = run_aot(*TINY, "--topology", "v5e:2x2", "--what", "train,prefill,decode", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 x TPU v5 lite, 16 GiB HBM each" in result.stdout
    assert "per chip, GiB" in result.stdout
    report = last_json(result.stdout)
    assert report["chips"] == 4 and report["hbm_gib"] == 16 and report["fits"]
    assert report["mesh"] == {"data": 1, "fsdp": 4, "tensor": 1}  # the demo config's mesh: fsdp over all chips
    programs = {p["what"]: p for p in report["programs"]}
    assert set(programs) == {"train", "prefill", "decode"}
    for program in programs.values():
        assert program["fits"] and not program["error"]
        assert 0 < program["total"] < 16 * 2**30
        assert program["arguments"] > 0 and program["code"] > 0
    # params and optimizer state are donated, so the updated ones reuse their buffers; decode updates its state in place
    assert programs["train"]["aliased"] > 0 and programs["decode"]["aliased"] > 0
    assert programs["prefill"]["shapes"].startswith("8 prompts x 32 tokens + 8 new")


@needs_libtpu
def test_a_model_that_cannot_fit_fails_with_a_clear_message():
    # Qwen2.5-7B with fp32 weights and Adam moments over 4 chips: ~28 GiB of state per 16 GiB chip.
    result = run_aot(
        "--config", "experiments/configs/alfworld.py", "--model", "qwen2.5-7b", "--dtype", "float32",
        "--topology", "v5e:2x2", "--what", "train", "--json",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error: train does not fit a v5e chip" in result.stderr
    assert "optimizer state" in result.stderr and "GiB per chip" in result.stderr
    report = last_json(result.stdout)
    assert not report["fits"] and report["programs"][0]["what"] == "train"


@needs_libtpu
def test_bad_requests_exit_2():
    unknown_generation = run_aot(*TINY, "--topology", "v9z:2x2")
    assert unknown_generation.returncode == 2 and "unknown TPU generation" in unknown_generation.stderr
    bad_mesh = run_aot(*TINY, "--topology", "v5e:2x2", "--mesh", "1,3,1", "--what", "prefill")
    assert bad_mesh.returncode == 2 and "needs 3 devices, 4 available" in bad_mesh.stderr


def test_missing_libtpu_says_how_to_install_it(tmp_path):
    if importlib.util.find_spec("libtpu") is not None:
        pytest.skip("libtpu is installed in this environment itself; the fallback folder is not consulted")
    result = run_aot(*TINY, "--topology", "v5e:2x2", env={"MILEGPO_LIBTPU_DIR": str(tmp_path)}, timeout=60)
    assert result.returncode == 2
    assert 'pip install "jax[tpu]==0.10.2"' in result.stderr and "bootstrap.sh" in result.stderr


def test_the_compiled_train_step_is_the_trainers_ppo_update():
    """milegpo_jax.train.step (what `aot --what train` compiles) = ppo.ppo_update on one mini-batch (CPU)."""
    import jax
    import numpy as np
    from flax import nnx

    from milegpo_jax.config import OptimSection
    from milegpo_jax.models import ModelConfig, init_model
    from milegpo_jax.train.loss import PPOLossConfig
    from milegpo_jax.train.optim import make_optimizer
    from milegpo_jax.train.ppo import ppo_update
    from milegpo_jax.train.step import TrainStep, jit_train_step

    config = ModelConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=4, num_kv_heads=2)
    rows, length = 8, 12
    data = np.random.default_rng(0)
    mask = (np.arange(length)[None] < data.integers(6, length + 1, rows)[:, None]).astype(np.int32)
    batch = {
        "inputs": data.integers(0, 64, (rows, length)).astype(np.int32),
        "targets": data.integers(0, 64, (rows, length)).astype(np.int32),
        "attention_mask": mask,
        "response_mask": (mask * (np.arange(length)[None] >= 3)).astype(np.float32),
        "old_logprobs": -data.uniform(2.0, 6.0, (rows, length)).astype(np.float32),
        "advantages": data.normal(size=rows).astype(np.float32),
    }
    ref = batch["old_logprobs"] + data.normal(scale=0.1, size=(rows, length)).astype(np.float32)
    optim = OptimSection(learning_rate=1e-2, grad_clip_norm=1.0, weight_decay=0.01)
    loss_config = PPOLossConfig(kl_coef=0.05, entropy_coef=0.01)

    model = init_model(config, seed=1)
    graphdef, params = nnx.split(nnx.clone(model))
    optimizer = nnx.Optimizer(model, make_optimizer(optim), wrt=nnx.Param)
    history = ppo_update(model, optimizer, batch, ref, loss_config, minibatch_rows=rows, microbatch_rows=4,
                         rng=np.random.default_rng(0))

    step = TrainStep(graphdef, make_optimizer(optim), loss_config, microbatch_rows=4)
    params, _, metrics = jit_train_step(step)(params, step.tx.init(params), {**batch, "ref_logprobs": ref})

    np.testing.assert_allclose(float(metrics["loss"]), history[0]["loss"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(metrics["grad_norm"]), history[0]["grad_norm"], rtol=1e-4)
    expected = jax.tree.leaves(nnx.state(model, nnx.Param))
    for got, want in zip(jax.tree.leaves(params), expected, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=2e-5)  # Adam: ~lr * 1e-3

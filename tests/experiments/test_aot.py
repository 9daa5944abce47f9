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
    assert programs["train"]["host_temporaries"] == 0  # remat "none": nothing is offloaded
    assert programs["prefill"]["shapes"].startswith("8 prompts x 32 tokens + 8 new")
    # the step's FLOPs per chip and its time floor on v5e (197 TFLOP/s, 819 GB/s); no remat: 6 N per position
    cost = programs["train"]["cost"]
    assert programs["train"]["attention"] == "xla"  # 64 positions: not a whole number of kernel blocks
    assert cost["flops"] >= cost["model_flops"] > 0 and cost["xla_flops"] > 0 and cost["xla_bytes"] > 0
    assert cost["roofline_s"] == max(cost["flops"] / 197e12, cost["xla_bytes"] / 819e9)
    assert 0 < cost["mfu_bound"] <= 1
    # the prefill: a 32-position bucket is less than a kernel block, so the dense form over the cache's
    # slots, here in one chunk (the sampler's 2,048 prefill tokens over 8 rows cover the bucket)
    prefill = programs["prefill"]
    assert prefill["attention"] == "xla" and prefill["cost"]["passes"] == 1
    assert prefill["cost"]["roofline_s"] >= prefill["cost"]["compute_s"] > 0


@needs_libtpu
def test_the_prefill_runs_splash_in_one_pass():
    """A prompt bucket of whole kernel blocks: the compiled prefill calls the Splash kernel on the TPU
    and reads the weights once, where the dense form reads them once per chunk (docs/models.md §7.1)."""
    shape = [*TINY, "--config.sampling.max_prompt_tokens=256", "--config.env.groups_per_iteration=8",
             "--topology", "v5e:2x2", "--what", "prefill", "--json"]
    reports = {}
    for attention in ("auto", "xla"):
        result = run_aot(*shape, f"--config.model.attention_impl={attention}")
        assert result.returncode == 0, result.stdout + result.stderr
        reports[attention] = last_json(result.stdout)["programs"][0]
    fused, dense = reports["auto"], reports["xla"]
    assert fused["attention"] == "splash" and dense["attention"] == "xla"
    # 32 rows: the sampler's 2,048 prefill tokens per chunk are 64 per row, 4 chunks of the 256 bucket
    assert fused["cost"]["passes"] == 1 and dense["cost"]["passes"] == 4
    assert fused["cost"]["traffic_bytes"] < dense["cost"]["traffic_bytes"] / 2
    # the same decoder FLOPs; the kernel scores the prompt's causal half, the dense form all 264 cache slots
    assert fused["cost"]["model_flops"] == dense["cost"]["model_flops"]
    assert fused["cost"]["flops"] < dense["cost"]["flops"]


@needs_libtpu
def test_offloaded_remat_keeps_the_layer_inputs_in_host_memory():
    """model.remat=offload: the TPU program keeps the scanned layers' inputs in the host's memory
    (docs/models.md §7.2), reported beside the HBM figures."""
    result = run_aot(*TINY, "--topology", "v5e:2x2", "--what", "train", "--no-cost", "--json",
                     "--config.model.remat=offload", "--config.model.scan_layers=true")
    assert result.returncode == 0, result.stdout + result.stderr
    train = last_json(result.stdout)["programs"][0]
    # at least the stacked layer inputs of one micro-batch on a chip: layers x rows x positions x hidden, bf16
    assert train["shapes"].startswith("2 micro-batches x 4 sequences x 64 tokens")
    layers, rows_per_chip, length, hidden, bf16 = 2, 4 // 4, 64, 64, 2  # rows over fsdp 4
    assert train["host_temporaries"] >= layers * rows_per_chip * length * hidden * bf16, train
    assert "GiB in host memory" in result.stdout


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
    gpu_kernel = run_aot(*TINY, "--topology", "v5e:2x2", "--config.model.attention_impl=gpu_flash")
    assert gpu_kernel.returncode == 2, gpu_kernel.stderr
    assert gpu_kernel.stderr.strip() == ("error: model.attention_impl='gpu_flash' runs on GPU only; this run's devices "
                                         "are TPU (choose auto, xla, blocks or splash)")


def test_missing_libtpu_says_how_to_install_it(tmp_path):
    if importlib.util.find_spec("libtpu") is not None:
        pytest.skip("libtpu is installed in this environment itself; the fallback folder is not consulted")
    result = run_aot(*TINY, "--topology", "v5e:2x2", env={"MILEGPO_LIBTPU_DIR": str(tmp_path)}, timeout=60)
    assert result.returncode == 2
    assert 'pip install "jax[tpu]==0.10.2"' in result.stderr and "bootstrap.sh" in result.stderr


def test_help_needs_no_libtpu(tmp_path):
    result = run_aot("--help", env={"MILEGPO_LIBTPU_DIR": str(tmp_path)}, timeout=60)
    assert result.returncode == 0 and "--topology" in result.stdout and not result.stderr, result.stderr
    missing = run_aot("--config", "experiments/configs/demo.py", env={"MILEGPO_LIBTPU_DIR": str(tmp_path)}, timeout=60)
    assert missing.returncode == 2 and "--topology" in missing.stderr and "libtpu" not in missing.stderr


@needs_libtpu
@pytest.mark.parametrize(
    ("topology", "message"),
    [
        ("v4:2x2x2", "not supported"),  # was an AssertionError traceback with exit 1 ("does not fit")
        ("v5e:1000x1000", "v5e slices come in"),  # libtpu aborted (SIGABRT) after 30 s
        ("v5e:3x3", "v5e slices come in"),
        ("v5p:3x3x3", "sides of 1, 2 or a multiple of 4"),
        ("v5e:4x4x4", "2-D grids"),
        ("v5e", "expected GENERATION:AxB"),
    ],
)
def test_bad_topologies_are_refused_before_compiling(topology, message):
    result = run_aot(*TINY, "--topology", topology, "--what", "prefill", timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --topology") and message in lines[0], result.stderr


def test_every_topology_the_help_names_is_accepted():
    from experiments.aot import TOPOLOGY_EXAMPLES, TOPOLOGY_RULES, check_topology

    for name in (*TOPOLOGY_EXAMPLES, *(rule.example for rule in TOPOLOGY_RULES.values())):
        generation, grid = check_topology(name)
        assert len(grid) == TOPOLOGY_RULES[generation].dims


@pytest.mark.parametrize("attention", ["auto", "splash"])
def test_aot_compiles_the_trainers_own_train_step(attention):
    """The PPO step the trainer builds for a config and the one `aot --what train` compiles for it lower
    to the same HLO (CPU, no mesh), with the default attention and the kernel (128 positions: a kernel's whole block)."""
    import argparse

    import jax
    from flax import nnx

    from experiments.aot import model_config, runtime_options, train_step_program
    from experiments.train import build_config
    from milegpo_jax.models import abstract_model
    from milegpo_jax.train.step import batch_shapes, build_train_step, jit_train_step

    flags = [flag.removeprefix("--config.") for flag in TINY[2:]]
    config = build_config("experiments/configs/demo.py", [*flags, "ppo.logits_chunk=8", "sampling.max_prompt_tokens=121",
                                                          f"model.attention_impl={attention}"])
    model_cfg, _ = model_config(config, None, "config")
    # every runtime option of the run reaches the compiled model, as load_pretrained(runtime=...) gives the trainer's
    assert config.runtime_options().apply(model_cfg) == model_cfg
    assert model_cfg.attention_impl == attention and model_cfg.attention_block == config.model.attention_block
    graphdef, params = nnx.split(abstract_model(model_cfg.config, model_cfg.runtime))
    args = argparse.Namespace(logits_chunk=None)
    compiled, (micro, rows, length, head) = train_step_program(config, graphdef, runtime_options(config, model_cfg, args))
    trainers = build_train_step(graphdef, config.runtime_options(), config.ppo_loss_config(), config.optimizer_config())
    assert compiled.loss == trainers.loss and compiled.graphdef == trainers.graphdef
    batch = batch_shapes(trainers.loss.keys, micro, rows, length, head)
    opt_state = jax.eval_shape(trainers.tx.init, params)

    def hlo(step):
        return jit_train_step(step).lower(params, opt_state, batch).as_text()

    assert hlo(compiled) == hlo(trainers)
    assert length == 128 and head == 32  # a quarter of the positions (more than the longest response, 8)
    if attention == "splash":  # the kernel is in the program (here in Pallas's interpreter)
        assert "splash" in jax.jit(lambda p: nnx.merge(graphdef, p)(jax.numpy.ones((1, 128), "int32"))).lower(
            params).as_text()
    assert (micro, rows) == (config.ppo.minibatch_rows // config.ppo.microbatch_rows, config.ppo.microbatch_rows)


def test_attention_flops_by_form():
    """The attention count of the roofline: dense is the full square; blocks and kernels skip the
    blocks above the diagonal; the kernels' backward recomputes the scores."""
    from experiments.aot import attention_flops
    from milegpo_jax.models import RuntimeOptions, preset

    runtime = RuntimeOptions(remat="none", attention_block=128)
    cfg = runtime.apply(preset("qwen2.5-1.5b"))
    unit = 2.0 * 1024 * cfg.head_dim * cfg.num_heads * cfg.num_layers * 1024  # one sequence of 1024
    assert attention_flops(cfg, "xla", 1, 1024) == unit * 6
    assert attention_flops(cfg, "blocks", 1, 1024) == unit * 6 * 9 / 16  # 8 blocks: 36 of 64 pairs
    assert attention_flops(cfg, "splash", 1, 1024) == unit * 9 * 3 / 4  # 2 tiles of 512: 3 of 4 pairs
    assert attention_flops(runtime.replace(remat="full").apply(cfg), "xla", 1, 1024) == unit * 8


def test_aot_and_the_device_bench_read_one_chip_table():
    """Each generation aot compiles for has its HBM and peaks in experiments/chips.py, the entry the device
    benchmark finds for that chip's device_kind."""
    from experiments.aot import HBM_GIB, PEAK, TOPOLOGY_RULES
    from experiments.chips import TPU_CHIPS, device_spec

    kinds = {"v5e": "TPU v5 lite", "v5p": "TPU v5", "v6e": "TPU v6 lite"}  # as jax names the devices
    assert set(kinds) == set(TOPOLOGY_RULES)
    for generation, kind in kinds.items():
        chip = device_spec(kind)
        assert chip is TPU_CHIPS[generation] and HBM_GIB[generation] == chip.hbm_gib > 0
        assert PEAK[generation] == (chip.peak_tflops * 1e12, chip.bandwidth_gbs * 1e9)

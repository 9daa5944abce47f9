"""The paper's credit ablation grid x seeds (docs/credit.md §5.9; paper §4.3, Table 3).

Six estimators, everything else as in the config the sweep runs on:

* ``milegpo``             full MileGPO (MD + RCS + PCC);
* ``milegpo-no-pcc``      w/o PCC: reliability-calibrated shaping only (stage rcs);
* ``milegpo-no-pcc-rcs``  w/o PCC and RCS: uniform milestone discovery (stage md);
* ``graphgpo``, ``gigpo``, ``grpo``  the baselines, with their verl-agent recipe defaults.

    python -m experiments.sweep --sweep experiments/sweeps/ablation.py \
        --config experiments/configs/alfworld.py --workdir-root runs/ablation --seeds 0,1,2 \
        --config.model.hf_checkpoint=/path/to/Qwen2.5-1.5B-Instruct [--dry-run]
"""

from collections.abc import Sequence
from typing import Any

VARIANTS: dict[str, dict[str, Any]] = {
    "milegpo": {"credit.estimator": "milegpo", "credit.stage": "full"},
    "milegpo-no-pcc": {"credit.estimator": "milegpo", "credit.stage": "rcs"},
    "milegpo-no-pcc-rcs": {"credit.estimator": "milegpo", "credit.stage": "md"},
    "graphgpo": {"credit.estimator": "graphgpo", "credit.stage": None},
    "gigpo": {"credit.estimator": "gigpo", "credit.stage": None},
    "grpo": {"credit.estimator": "grpo", "credit.stage": None},
}
DEFAULT_SEEDS = (0, 1, 2)


def get_sweep(seeds: Sequence[int] = DEFAULT_SEEDS) -> list[dict[str, Any]]:
    return [
        {**overrides, "run.seed": int(seed), "run.name": f"{variant}-seed{seed}"}
        for variant, overrides in VARIANTS.items()
        for seed in seeds
    ]

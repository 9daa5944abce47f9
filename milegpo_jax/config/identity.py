"""A run's identity: the plain dict of a ``TrainConfig``, its hash, the changes between two
(``milegpo_jax.changes``), and what a warm start depends on.

Fields a run may change without invalidating its checkpoints (iteration budget, logging, mesh,
server placement, checkpoint cadence) are left out of ``config_hash``; see ``HASH_EXCLUDED``. A
resumed run must match its checkpoint's hash (``milegpo_jax.train.checkpoint``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from milegpo_jax.config.checks import plain
from milegpo_jax.config.credit import credit_identity
from milegpo_jax.config.schema import TrainConfig

# Options added after the shipped configs' hashes were pinned, with their defaults: they enter
# config_hash only when set to something else, so runs from before they existed still resume.
HASHED_WHEN_SET = {
    "ppo.row_order": "shuffled",
    "sampling.prefix_sharing": False,
    "optim.trainable_layers": 0,
    "env.branching": {"roots": 0, "branches": 1, "fork_at": "uniform"},  # tree rollouts off
    "sampling.eval_greedy": False,
    "sft.skip_repeated_prompts": False,
}

# Dotted paths (or whole sections) that do not enter config_hash: changing them on resume is safe.
HASH_EXCLUDED = (
    "run.name",
    "run.iterations",
    "run.eval_every",
    "run.eval_before_training",
    "run.save_every",
    "run.keep_checkpoints",
    "run.allow_config_change",
    "env.num_servers",
    "env.python",
    "env.step_timeout_s",
    "env.reset_timeout_s",
    "ppo.logits_chunk",  # memory layout only: the same log-probs either way
    "ppo.share_prefixes",  # likewise: shared prompt prefixes give the same log-probs up to rounding
    "model.attention_block",  # the order of the attention sums only: the same log-probs up to rounding
    "model.attention_impl",  # likewise: dense, blocks or a fused kernel compute the same attention
    "mesh",
    "logging",
    "distributed",
)


def _thaw(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _thaw(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    return plain(value)


def to_dict(config: TrainConfig) -> dict[str, Any]:
    """Plain nested dict (JSON-serialisable) of a TrainConfig; ``load_config`` reads it back."""
    return _thaw(config)


def config_identity(config: TrainConfig) -> dict[str, Any]:
    """What ``config_hash`` covers: ``to_dict`` less ``HASH_EXCLUDED`` (and ``HASHED_WHEN_SET`` options
    at their defaults), the credit section as the options set (``credit.credit_identity``) with the
    recipe resolved."""
    data = to_dict(config)
    data["credit"] = credit_identity(config.credit, config.credit_recipe)
    for path in HASH_EXCLUDED:
        *parents, leaf = path.split(".")
        node = data
        for part in parents:
            node = node[part]
        node.pop(leaf)
    _drop_unset(data)
    return data


def _drop_unset(data: dict[str, Any]) -> None:
    """Removes the ``HASHED_WHEN_SET`` options that are at their defaults from ``to_dict``'s ``data``."""
    for path, default in HASHED_WHEN_SET.items():
        section, leaf = path.split(".")
        if data[section][leaf] == default:
            data[section].pop(leaf)


def config_hash(config: TrainConfig) -> str:
    """Stable 16-hex digest of the fields that define a run's trajectory (not iterations, logging,
    mesh, server placement or checkpoint cadence): a resumed run must match it."""
    text = json.dumps(config_identity(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def warm_start_inputs(config: TrainConfig) -> dict[str, Any]:
    """Every config value a warm start depends on (model, SFT, the env text it is built from, the
    seed): its record (``train.warm_start``), which a run's config must match before the first
    checkpoint."""
    data = to_dict(config)
    _drop_unset(data)  # warm starts built before an SFT option existed stay valid
    env = data["env"]
    # remat and scan_layers change how the model runs, not what it computes: a warm start serves both
    model = {key: value for key, value in data["model"].items() if key not in ("remat", "scan_layers")}
    return {
        "model": model,
        "sft": data["sft"],
        "env": {key: env[key] for key in ("name", "options", "train_split", "history_length")},
        "run": {"seed": data["run"]["seed"]},
    }

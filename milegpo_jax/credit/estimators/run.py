"""Runs the registered estimators: ``advantages = f(batch, cfg)`` as jitted jnp programs.

Each estimator maps a padded ``CreditBatch`` ([G, K, T] step arrays, [G, N] node arrays) and a frozen
``CreditConfig`` to advantages [G, K, T] (float32, or float64 with ``precision``), exactly 0 on
padded steps. Which program runs, at which level, and which host structure it needs come from its
``EstimatorSpec`` (``credit/registry.py``, docs/credit-implementation.md §4): a group-level program is written for
one group and vmapped over G; a batch-level one (MVPO's success EMA) sees every group.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from milegpo_jax.credit import registry
from milegpo_jax.credit.batch import CreditBatch
from milegpo_jax.credit.config import CreditConfig
from milegpo_jax.credit.estimators.milegpo import MileGPOTerms, milegpo_group_terms
from milegpo_jax.credit.graph import float_dtype
from milegpo_jax.credit.planes import PackedBatch, unpack

# Every program, imported once here (a program imported at trace time would be imported from
# whichever checkout sys.path names then; experiments/bench/credit_versions.py holds two).
PROGRAMS = {spec.name: registry.load(spec.program) for spec in registry.SPECS}


def _as_arrays(batch: CreditBatch) -> CreditBatch:
    return batch._replace(reward=jnp.asarray(batch.reward, float_dtype()))


def _batch_terms(batch: CreditBatch, cfg: CreditConfig, ema_prev: jax.Array) -> dict[str, jax.Array]:
    """Every intermediate of ``cfg.estimator``; "ema_new" is MVPO's success EMA (passed through for the rest)."""
    program = PROGRAMS[cfg.estimator]
    if registry.spec_of(cfg.estimator).level == "batch":
        return program(_as_arrays(batch), cfg, ema_prev)
    return {**jax.vmap(lambda group: program(group, cfg))(_as_arrays(batch)), "ema_new": ema_prev}


def _named(batch: CreditBatch | PackedBatch) -> CreditBatch:
    """The named batch inside a program, whichever form the call was given (a Python choice at trace time)."""
    return unpack(batch) if isinstance(batch, PackedBatch) else batch


# The jitted programs take the named batch as it leaves the host passes (an argument per field), or
# one packed into planes (``planes.py``) for a batch kept on the device; each form compiles once.
@functools.partial(jax.jit, static_argnums=1)
def _jit_estimator_terms(batch: CreditBatch | PackedBatch, cfg: CreditConfig, ema_prev: jax.Array) -> dict[str, jax.Array]:
    return _batch_terms(_named(batch), cfg, ema_prev)


@functools.partial(jax.jit, static_argnums=1)
def _jit_advantages(batch: CreditBatch | PackedBatch, cfg: CreditConfig, ema_prev: jax.Array) -> tuple[jax.Array, jax.Array]:
    batch = _named(batch)
    terms = _batch_terms(batch, cfg, ema_prev)  # XLA prunes the unused intermediates
    return jnp.where(batch.step_mask, terms["advantage"], 0.0), terms["ema_new"]


@functools.partial(jax.jit, static_argnums=1)
def _jit_milegpo_terms(batch: CreditBatch | PackedBatch, cfg: CreditConfig) -> MileGPOTerms:
    return jax.vmap(lambda group: milegpo_group_terms(group, cfg))(_as_arrays(_named(batch)))


def _in_precision(jitted, carries_ema=True, outputs=lambda out: out, program_of=lambda cfg: cfg.estimator):
    """Runs ``jitted(batch, cfg[, ema_prev])`` in cfg.precision: float64 needs JAX's x64 mode, scoped
    to the call. ``ema_prev`` (MVPO's success EMA, m_0 = 0) enters as an array of the working float
    type, so that a new value never retraces. A batch without a host part the program of
    ``program_of(cfg)`` reads (its spec's ``reads``) is refused.

    A host batch goes in with its named fields, unstacked: stacking them into planes cost more (about
    0.2 ms after other work, docs/credit-implementation.md §1.1) than the extra arguments of the call."""

    @functools.wraps(jitted)
    def run(batch: CreditBatch | PackedBatch, cfg: CreditConfig, ema_prev: float = 0.0):
        lacking = registry.host_parts(program_of(cfg)) - batch.parts
        if lacking:
            raise ValueError(f"{cfg.estimator}: the batch was built without its host parts {', '.join(sorted(lacking))}")
        dtype = np.float64 if cfg.precision == "float64" else np.float32
        args = (batch, cfg, np.asarray(ema_prev, dtype)) if carries_ema else (batch, cfg)
        if cfg.precision == "float64":
            with jax.enable_x64(True):
                return outputs(jitted(*args))
        return outputs(jitted(*args))

    run.clear_cache = jitted.clear_cache
    run._cache_size = jitted._cache_size
    return run


estimator_terms = _in_precision(_jit_estimator_terms)
estimator_terms.__doc__ = """Every intermediate of ``cfg.estimator`` ([G, K, T] rows, [G, N] nodes), incl. "advantage"."""
estimate_advantages = _in_precision(_jit_advantages, outputs=lambda out: out[0])
estimate_advantages.__doc__ = """[G, K, T] advantages of ``cfg.estimator`` (cfg.precision); exactly 0 on padded rows."""
advantages_and_ema = _in_precision(_jit_advantages)
advantages_and_ema.__doc__ = """([G, K, T] advantages, MVPO's updated success EMA) from ``ema_prev``; the same
compiled function as ``estimate_advantages`` (the EMA passes through unchanged for other estimators)."""
milegpo_terms = _in_precision(_jit_milegpo_terms, carries_ema=False, program_of=lambda cfg: "milegpo")
milegpo_terms.__doc__ = """Every MileGPO intermediate, [G, ...] (diagnostics, tests, replay tables)."""

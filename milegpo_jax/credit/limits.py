"""What the credit tools check before computing: reward magnitudes and the memory a batch will take.

Rewards: the batch stores them as float32 (``batch.build_batch``), so a reward beyond float32's range
(1e300 is finite in float64) would silently become infinity. The estimators also form sums and squares
of episode returns (group means and standard deviations); to keep those finite, a trajectory's summed
absolute reward may be at most ``RETURN_LIMITS[precision]``: 1e18 in float32 (squares ~1e36, well
below float32's 3.4e38 even summed over a group), 1e150 in float64.

Memory: the padded shapes follow from the rollouts alone (``bucketed_shape`` mirrors ``build_batch``'s
bucketing without allocating anything), and XLA's own memory analysis of the compiled estimator for
those shapes says how many bytes it needs; the host's share (``host_bytes``: the batch's numpy arrays,
the diagnostics' per-row arrays and pair blocks, the advantages as Python lists and JSON text) is
added. A run above the limit is refused before any array exists. Compiling for that analysis costs
seconds, so it runs only when a cheap upper estimate (``rough_bytes``: 32 bytes per node pair per
group plus per-row and per-edge terms; generous since the estimators keep edge statistics per
distinct edge rather than in [N, N] matrices) comes within a factor of ``EXACT_CHECK_MARGIN`` of the
limit. Not counted: the interpreter, the JAX runtime and compilation, about 0.5 GB whatever the input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from milegpo_jax.credit.config import CreditConfig
from milegpo_jax.credit.rollouts import Group, RolloutFormatError
from milegpo_jax.shapes import bucket_size

FLOAT32_MAX = float(np.finfo(np.float32).max)
RETURN_LIMITS = {"float32": 1e18, "float64": 1e150}
DEFAULT_MAX_MEMORY_BYTES = 4 * 1024**3
EXACT_CHECK_MARGIN = 8


class CreditLimitError(ValueError):
    """Input the credit tools refuse to compute on (one line naming the place)."""


def check_reward_range(groups: Sequence[Group], precision: str) -> None:
    limit = RETURN_LIMITS[precision]
    for g, group in enumerate(groups):
        for k, trajectory in enumerate(group.trajectories):
            total = 0.0
            for t, step in enumerate(trajectory.steps):
                if abs(step.reward) > FLOAT32_MAX:
                    raise RolloutFormatError(
                        f"groups[{g}].trajectories[{k}].steps[{t}].reward: {step.reward:g} is beyond float32's range (±3.4e38)"
                    )
                total += abs(step.reward)
            if total > limit:
                hint = " (try --set precision=float64)" if precision == "float32" else ""
                raise RolloutFormatError(
                    f"groups[{g}].trajectories[{k}]: summed |reward| {total:g} exceeds {limit:g}, "
                    f"where {precision} sums and squares of returns lose their meaning{hint}"
                )


def bucketed_shape(groups: Sequence[Group]) -> tuple[int, int, int, int, int]:
    """(G, K, T, N, E) of the padded batch ``build_batch`` would make, without building it."""
    nodes = edges = 0
    for group in groups:
        states, transitions = set(), set()
        for trajectory in group.trajectories:
            final = len(trajectory.steps) - 1 if trajectory.succeeded else len(trajectory.steps)
            for t, step in enumerate(trajectory.steps):
                states.add(step.state)
                if t != final:
                    states.add(step.next_state)
                transitions.add((step.state, step.next_state if t != final else None))  # None: the sink
        nodes, edges = max(nodes, len(states) + 1), max(edges, len(transitions))  # + the success sink
    sizes = (len(groups), max(len(g.trajectories) for g in groups),
             max(len(t.steps) for g in groups for t in g.trajectories), nodes, edges)
    return tuple(bucket_size(size, minimum) for size, minimum in zip(sizes, (1, 1, 8, 8, 8)))


def abstract_batch(shape: tuple[int, int, int, int, int]):
    """The packed batch of ``shape`` with every host part, as shapes only (for ``memory_analysis``)."""
    import jax

    from milegpo_jax.credit.passes import ALL_PARTS
    from milegpo_jax.credit.planes import PLANES, PackedBatch, plane_fields

    G, K, T, N, E = shape
    count = {plane: len(plane_fields(plane, ALL_PARTS)) for plane in PLANES}
    return PackedBatch(
        step_ints=jax.ShapeDtypeStruct((G, count["step_ints"], K, T), np.int32),
        step_flags=jax.ShapeDtypeStruct((G, count["step_flags"], K, T), bool),
        reward=jax.ShapeDtypeStruct((G, K, T), np.float32), traj_mask=jax.ShapeDtypeStruct((G, K), bool),
        last_state=jax.ShapeDtypeStruct((G, K), np.int32),
        node_ints=jax.ShapeDtypeStruct((G, count["node_ints"], N), np.int32),
        edge_ends=jax.ShapeDtypeStruct((G, count["edge_ends"], E), np.int32), edge_mask=jax.ShapeDtypeStruct((G, E), bool),
        parts=ALL_PARTS,
    )


def estimated_bytes(shape: tuple[int, int, int, int, int], cfg: CreditConfig, with_diagnostics: bool) -> int:
    """Peak bytes of the credit computation for ``shape``: host arrays plus XLA's compiled footprint
    (arguments, outputs and temporaries) of the largest program run, from ``memory_analysis``."""
    import jax

    from milegpo_jax.credit.estimators import estimate_advantages, milegpo_terms

    host = host_bytes(shape, with_diagnostics)
    programs = [lambda batch: estimate_advantages(batch, cfg)]
    if with_diagnostics:
        terms_cfg = cfg if cfg.estimator == "milegpo" else dataclasses.replace(cfg, estimator="milegpo")
        programs.append(lambda batch: milegpo_terms(batch, terms_cfg))
    peak = 0
    for program in programs:
        with jax.enable_x64(cfg.precision == "float64"):
            analysis = jax.jit(program).lower(abstract_batch(shape)).compile().memory_analysis()
        if analysis is None:  # a backend without the analysis: count the arguments and outputs only
            continue
        peak = max(peak, analysis.argument_size_in_bytes + analysis.output_size_in_bytes + analysis.temp_size_in_bytes)
    return host + peak


# Host bytes per padded step row: the diagnostics' flattened per-row arrays (~16 of 8 bytes), and the
# advantages as Python floats in nested lists plus their JSON text (measured ~60 bytes, counted 4x).
DIAGNOSTICS_ROW_BYTES = 128
OUTPUT_ROW_BYTES = 256
# Live bytes per pair cell of one diagnostics block (4 bool matrices, 3 float64 ones while the shaped
# return gap is formed); the blocks are at most ``diagnostics.PAIR_BLOCK_CELLS`` cells.
DIAGNOSTICS_CELL_BYTES = 48


def host_bytes(shape: tuple[int, int, int, int, int], with_diagnostics: bool) -> int:
    """Bytes the host allocates for one credit computation of ``shape``, outside XLA's programs."""
    from milegpo_jax.credit.diagnostics import PAIR_BLOCK_CELLS

    G, K, T, N, E = shape
    rows = G * K * T
    total = rows * (7 * 4 + 5 + 4) + G * K * 8 + G * N * 12 + G * E * 9  # build_batch's numpy arrays
    total += rows * OUTPUT_ROW_BYTES
    if with_diagnostics:  # pairs are compared within a group, one block at a time
        total += rows * DIAGNOSTICS_ROW_BYTES + min(PAIR_BLOCK_CELLS, (K * T) ** 2) * DIAGNOSTICS_CELL_BYTES
    return total


def rough_bytes(shape: tuple[int, int, int, int, int], with_diagnostics: bool = True) -> int:
    """A cheap over-estimate of ``estimated_bytes`` (node-pair matrices dominate; see the docstring)."""
    G, K, T, N, E = shape
    return G * (32 * N * N + 8 * K * T * N + 72 * K * T + 32 * E + 4096) + host_bytes(shape, with_diagnostics)


def check_memory(groups: Sequence[Group], cfg: CreditConfig, max_bytes: int, with_diagnostics: bool = True) -> None:
    shape = bucketed_shape(groups)
    if rough_bytes(shape, with_diagnostics) * EXACT_CHECK_MARGIN <= max_bytes:
        return
    needed = estimated_bytes(shape, cfg, with_diagnostics)
    if needed > max_bytes:
        G, K, T, N, _ = shape
        raise CreditLimitError(
            f"input: the padded batch ({G} groups x {K} trajectories x {T} steps, {N} states per group) needs about "
            f"{needed / 1024**3:.3g} GiB, above the limit of {max_bytes / 1024**3:.3g} GiB (raise it with --max-memory-gb)"
        )

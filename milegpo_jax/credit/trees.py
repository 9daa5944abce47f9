"""Credit over tree groups (docs/credit-implementation.md §5): from the advantages of the leaves' steps to one
advantage per recorded step.

A tree group's leaves reach the estimators as whole trajectories from the root, so a step that k
leaves share appears k times in the columns, each copy scored with its own leaf's future. The update
trains on every recorded step once; this module folds the copies into one value per recorded step.
"""

from __future__ import annotations

import numpy as np


def mean_per_step(values: np.ndarray, step_of: np.ndarray) -> np.ndarray:
    """For every recorded step j, the mean of ``values[i]`` over the entries with ``step_of[i] == j``
    (every j in 0..max must have one). A step of one leaf keeps its value exactly (x / 1)."""
    step_of = np.asarray(step_of, np.int64)
    counts = np.bincount(step_of)
    if counts.size and not counts.all():
        raise ValueError(f"tree credit: recorded step {int(np.argmin(counts))} has no leaf through it")
    return np.bincount(step_of, weights=np.asarray(values, np.float64), minlength=counts.size) / counts

"""Per-iteration metrics: ``metrics.jsonl`` plus TensorBoard event files, and a progress bar.

``MetricsLogger(workdir, start_iteration)`` appends one JSON object per ``log`` call to
``WORKDIR/metrics.jsonl`` (``{"iteration": i, "wall_time": t, "<name>": value, ...}``; nested dicts
flatten to ``"a/b"`` names; non-finite numbers become null) and flushes it, so a killed run loses at
most the line being written. TensorBoard scalars go to ``WORKDIR/tensorboard/`` (tensorboardX).

Resume consistency: the logger is told how many iterations the restored checkpoint holds
(``start_iteration``). Lines of later iterations -- logged by the previous process after its last
checkpoint, and about to be logged again -- are dropped from ``metrics.jsonl``, and TensorBoard is
told to discard its events from ``start_iteration + 1`` on (``purge_step``). A fresh start
(``start_iteration=0``) empties both. Log iteration ``i`` before saving its checkpoint, so a crash
between the two never leaves a checkpoint without its metrics line.

Only JAX process 0 writes; on the others every method is a no-op.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Self

import jax
import numpy as np

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


def _scalar(name: str, value: Any) -> Any:
    """A JSON value for one metric: Python/NumPy/JAX numbers and 0-d arrays, bools, strings, None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (jax.Array, np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.size != 1:
            raise TypeError(f"metric {name!r} has shape {array.shape}; log scalars (reduce it first)")
        value = array.reshape(()).item()
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else None
    raise TypeError(f"metric {name!r}: cannot log {type(value).__name__} {value!r}")


def flatten_metrics(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"ppo": {"kl": x}}`` -> ``{"ppo/kl": x}`` with every value made JSON-ready."""
    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_metrics(value, name + "/"))
        else:
            flat[name] = _scalar(name, value)
    return flat


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Records of a ``metrics.jsonl`` (or of ``DIR/metrics.jsonl``); a torn last line is skipped."""
    return [record for _, record in read_metrics_lines(path)]


def read_metrics_lines(path: str | os.PathLike) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of a ``metrics.jsonl`` (or of ``DIR/metrics.jsonl``); a torn last line
    is skipped. A line that is not UTF-8, not JSON (before the last) or not a JSON object is a
    ``ValueError`` naming ``file:line``."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_FILE
    records = []
    with open(path, "rb") as file:
        lines = file.read().splitlines()
    for number, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:  # the logger writes ASCII, so even a torn line decodes
            raise ValueError(f"{path}:{number}: not UTF-8 (byte {error.start})") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # cut off mid-write by a kill
                continue
            raise ValueError(f"{path}:{number}: not JSON: {line[:80]!r}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: not a JSON object: {line[:80]!r}")
        records.append((number, record))
    return records


def _truncate(path: Path, keep_through: int) -> int:
    """Rewrites ``path`` without records of iterations > ``keep_through``; returns how many went."""
    if not path.exists():
        return 0
    records = read_metrics(path)
    kept = [r for r in records if int(r.get("iteration", 0)) <= keep_through]
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as file:
        file.writelines(json.dumps(record) + "\n" for record in kept)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)  # atomic: a crash leaves the old file or the new one
    return len(records) - len(kept)


class MetricsLogger:
    def __init__(
        self,
        workdir: str | os.PathLike,
        start_iteration: int = 0,
        *,
        tensorboard: bool = True,
        enabled: bool | None = None,
    ):
        """start_iteration: iterations already done (the restored checkpoint's; 0 when fresh).
        enabled: default ``jax.process_index() == 0``."""
        self.enabled = jax.process_index() == 0 if enabled is None else enabled
        self.workdir = Path(workdir)
        self.path = self.workdir / METRICS_FILE
        self._file = None
        self._writer = None
        if not self.enabled:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        if start_iteration == 0:
            self.path.unlink(missing_ok=True)
        else:
            dropped = _truncate(self.path, start_iteration)
            if dropped:
                warnings.warn(
                    f"{self.path}: dropped {dropped} record(s) after iteration {start_iteration} "
                    "(logged after the checkpoint this run resumes from)",
                    RuntimeWarning,
                    stacklevel=2,
                )
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 -- appended to until close()
        if tensorboard:
            from tensorboardX import SummaryWriter

            # purge_step: TensorBoard hides this directory's earlier events at steps >= it
            self._writer = SummaryWriter(str(self.workdir / TENSORBOARD_DIR), purge_step=start_iteration + 1 if start_iteration else 0)

    def log(self, iteration: int, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Writes one record for ``iteration`` (several per iteration are fine, e.g. train and eval)
        and returns it."""
        record = {"iteration": int(iteration), "wall_time": time.time(), **flatten_metrics(metrics)}
        if not self.enabled:
            return record
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._writer is not None:
            for name, value in record.items():
                if name in ("iteration", "wall_time") or value is None or isinstance(value, str):
                    continue
                self._writer.add_scalar(name, float(value), global_step=iteration, walltime=record["wall_time"])
            self._writer.flush()
        return record

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ProgressBar:
    """A tqdm bar over iterations showing a few metrics; silent when disabled or not process 0."""

    def __init__(
        self,
        total: int,
        initial: int = 0,
        *,
        keys: Iterable[str] = ("train/success_rate", "train/reward_mean", "ppo/kl", "time/iteration_s"),
        enabled: bool = True,
        description: str = "train",
    ):
        from tqdm.auto import tqdm

        self.keys = tuple(keys)
        self._bar = tqdm(
            total=total,
            initial=initial,
            desc=description,
            unit="it",
            dynamic_ncols=True,
            disable=not enabled or jax.process_index() != 0,
        )

    def update(self, record: Mapping[str, Any]) -> None:
        """Advances one iteration and shows ``keys`` of ``record`` (a ``MetricsLogger.log`` result)."""
        shown = {key.rsplit("/", 1)[-1]: record[key] for key in self.keys if record.get(key) is not None}
        self._bar.set_postfix({k: f"{v:.4g}" if isinstance(v, float) else v for k, v in shown.items()}, refresh=False)
        self._bar.update(1)

    def write(self, message: str) -> None:
        """Prints a line without breaking the bar."""
        self._bar.write(message)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

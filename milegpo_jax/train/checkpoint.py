"""Checkpoints of a training run (orbax-checkpoint 0.12.8 ``CheckpointManager``), with resume.

One checkpoint per saved iteration under ``WORKDIR/checkpoints/<iteration>/``, two items:

* ``state``: the array pytree (NNX params as ``nnx.state(model, nnx.Param)``, optax state, the PRNG
  key -- typed keys round-trip as typed keys -- and any other arrays or Python scalars);
* ``meta``: JSON with the iteration, the config hash and config, the best validation metric so far,
  and the trainer's own ``extra`` (task cursor, env seeds, counters).

The trainer's side::

    ckpt = Checkpointer(workdir, config_hash(config), keep=config.run.keep_checkpoints,
                        config=config_identity(config), allow_config_change=config.run.allow_config_change)
    restored = ckpt.restore(abstract_state)      # None: fresh start
    if restored is not None:
        state, meta = restored                   # meta.iteration iterations are done
    ...
    ckpt.save(iteration, state, {"task_cursor": c, "env_seeds": s}, eval_metric=success_or_None)
    ...
    ckpt.close()                                 # waits for the last async save

Saves are asynchronous: ``save`` returns once the arrays are copied off the device (so donating them
to the next step is safe) and writes in the background; the next save, ``wait`` or ``close`` waits for
it. Kept: the latest ``keep`` checkpoints plus the one with the best ``eval_metric`` (ties go to the
newer). ``restore`` takes the newest checkpoint that reads back; newer ones that do not (a run killed
mid-write on a filesystem without atomic renames, truncated or deleted files) are moved to
``WORKDIR/checkpoints.corrupt/`` with a warning, because the resumed run will write those iterations
again. If no checkpoint reads back, it raises rather than silently starting over. A checkpoint written
under a different config hash is refused (``ConfigMismatchError``, listing what changed) unless
``allow_config_change``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import shutil
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, Self

import jax
import orbax.checkpoint as ocp
from orbax.checkpoint.checkpoint_managers import preservation_policy as preservation

from milegpo_jax.changes import describe_changes

CHECKPOINT_DIR = "checkpoints"
CORRUPT_DIR = "checkpoints.corrupt"
META_FORMAT = 1
_METRIC_KEY = "eval_metric"

log = logging.getLogger(__name__)


class CheckpointError(RuntimeError):
    """The work directory's checkpoints cannot be used."""


class ConfigMismatchError(CheckpointError):
    """The checkpoint to resume was written under a different config hash."""


class CheckpointWriteError(CheckpointError):
    """A save failed (disk full, no permission); its unfinished directory has been removed."""


@dataclasses.dataclass(frozen=True)
class CheckpointMeta:
    iteration: int  # iterations completed when the state was saved
    config_hash: str
    best_metric: float | None  # best eval_metric over this run up to `iteration`
    best_iteration: int | None
    eval_metric: float | None  # the one saved with this checkpoint, if it was evaluated
    extra: Mapping[str, Any]  # the trainer's JSON (task cursor, env seeds, ...)
    config: Mapping[str, Any] | None = None  # config_identity at save time, for change reports


class Restored(NamedTuple):
    state: Any
    meta: CheckpointMeta


class _NoMetricWarningFilter(logging.Filter):
    """orbax warns on every save without metrics once best tracking is on; most saves have none."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "did not provide metrics" not in record.getMessage()


logging.getLogger("absl").addFilter(_NoMetricWarningFilter())


class _QuietSaveErrors(logging.Filter):
    """While a save is awaited, orbax's own error logs (a traceback per background thread) are
    dropped: the failure is raised once, as one line, by ``save_now``."""

    def __init__(self):
        super().__init__()
        self.active = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.active and record.levelno >= logging.ERROR and "orbax" in record.pathname)


_QUIET_SAVES = _QuietSaveErrors()
logging.getLogger("absl").addFilter(_QUIET_SAVES)


def abstract_like(tree: Any) -> Any:
    """Shape/dtype/sharding skeleton of a concrete state, for ``restore`` (non-arrays pass through)."""
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)


class Checkpointer:
    def __init__(
        self,
        workdir: str | os.PathLike,
        config_hash: str,
        *,
        keep: int = 2,
        best_mode: str = "max",
        config: Mapping[str, Any] | None = None,
        allow_config_change: bool = False,
        async_save: bool = True,
    ):
        """workdir: the run's directory (checkpoints go to ``workdir/checkpoints``).
        config_hash / config: ``milegpo_jax.config.config_hash`` / ``config_identity`` of this run.
        keep: latest checkpoints kept (the best one is kept in addition); best_mode: "max" or "min".
        """
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        if best_mode not in ("max", "min"):
            raise ValueError(f"best_mode must be 'max' or 'min', got {best_mode!r}")
        self.workdir = Path(workdir).expanduser().absolute()
        self.directory = self.workdir / CHECKPOINT_DIR
        self.config_hash = config_hash
        self.config = dict(config) if config is not None else None
        self.allow_config_change = allow_config_change
        self.best_mode = best_mode
        self.best_metric: float | None = None
        self.best_iteration: int | None = None
        policy = preservation.AnyPreservationPolicy(
            [
                preservation.LatestN(keep),
                preservation.BestN(
                    get_metric_fn=lambda metrics: metrics[_METRIC_KEY],
                    reverse=best_mode == "min",
                    n=1,
                    keep_checkpoints_without_metrics=False,
                ),
            ]
        )
        options = ocp.CheckpointManagerOptions(
            create=True,
            cleanup_tmp_directories=True,  # remove the temp dirs of saves killed midway
            enable_async_checkpointing=async_save,
            preservation_policy=policy,
            # best_fn is what makes orbax write the metrics to disk, so the best checkpoint is still
            # known (and kept) after a restart; preservation itself follows `policy`
            best_fn=lambda metrics: metrics[_METRIC_KEY],
            best_mode=best_mode,
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    # ------------------------------------------------------------------ queries

    @property
    def iterations(self) -> list[int]:
        """Iterations with a checkpoint, ascending (including one still being written)."""
        return sorted(self._manager.all_steps())

    @property
    def latest_iteration(self) -> int | None:
        return self._manager.latest_step()

    # ------------------------------------------------------------------ restore

    def restore(self, abstract_state: Any, *, iteration: int | None = None) -> Restored | None:
        """The newest readable checkpoint as ``(state, meta)``, or None when there is none.

        ``abstract_state`` has the state's tree structure with ``jax.ShapeDtypeStruct`` leaves (give
        them a ``sharding`` to restore straight into it; ``abstract_like`` makes one from a
        concrete state). With ``iteration``, exactly that checkpoint (e.g. ``best_iteration``),
        without falling back.
        """
        self.wait()
        if iteration is not None:
            if iteration not in self._manager.all_steps():
                raise CheckpointError(f"no checkpoint of iteration {iteration} in {self.directory}")
            try:
                return self._restore_step(iteration, abstract_state)
            except ConfigMismatchError:
                raise
            except Exception as error:
                raise CheckpointError(f"checkpoint of iteration {iteration} in {self.directory}: {error}") from error
        failures: list[tuple[int, Exception]] = []
        for step in sorted(self._manager.all_steps(), reverse=True):
            try:
                restored = self._restore_step(step, abstract_state)
            except ConfigMismatchError:
                raise
            except Exception as error:  # noqa: BLE001 -- corruption surfaces as any error type; try the one before
                failures.append((step, error))
                continue
            if failures:
                self._quarantine([s for s, _ in failures])
                details = "; ".join(f"iteration {s}: {_short(e)}" for s, e in failures)
                message = (
                    f"newest checkpoint(s) in {self.directory} could not be read ({details}); "
                    f"moved to {self.workdir / CORRUPT_DIR}; resuming from iteration {step}"
                )
                warnings.warn(message, RuntimeWarning, stacklevel=2)
                log.warning(message)
            return restored
        if failures:
            details = "\n".join(f"  iteration {s}: {_short(e)}" for s, e in failures)
            raise CheckpointError(
                f"no checkpoint in {self.directory} could be read:\n{details}\n"
                "If the state's structure changed (model or optimizer), restore with the old code; "
                f"to start afresh, use a new --workdir or move {self.directory} away."
            )
        return None

    def _restore_step(self, step: int, abstract_state: Any) -> Restored:
        raw_meta = self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta
        meta = _parse_meta(raw_meta, step)
        self._check_config(meta, step)
        abstract = jax.tree.map(_as_abstract, abstract_state)
        restored = self._manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract)))
        self.best_metric, self.best_iteration = meta.best_metric, meta.best_iteration
        return Restored(restored.state, meta)

    def _check_config(self, meta: CheckpointMeta, step: int) -> None:
        if meta.config_hash == self.config_hash:
            return
        changes = describe_changes(meta.config, self.config) if meta.config is not None and self.config is not None else []
        listed = ("; changed: " + ", ".join(changes)) if changes else ""
        message = (
            f"the checkpoint of iteration {step} in {self.directory} was written under config hash "
            f"{meta.config_hash}, this run's is {self.config_hash}{listed}. Resume with the original config, "
            "use a new --workdir, or pass --config.run.allow_config_change=true to continue with the new one"
        )
        if not self.allow_config_change:
            raise ConfigMismatchError(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        log.warning(message)

    def _quarantine(self, steps: list[int]) -> None:
        """Moves unreadable step directories out of orbax's sight (the run will save those
        iterations again, and orbax refuses to overwrite a step)."""
        if jax.process_index() == 0:
            target = self.workdir / CORRUPT_DIR
            target.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            for step in steps:
                source = self.directory / str(step)
                if source.exists():
                    shutil.move(str(source), str(target / f"{step}-{stamp}"))
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("milegpo_checkpoint_quarantine")
        self._manager.reload()

    # ------------------------------------------------------------------ save

    def save(
        self,
        iteration: int,
        state: Any,
        extra: Mapping[str, Any] | None = None,
        *,
        eval_metric: float | None = None,
    ) -> bool:
        """Starts an asynchronous save of ``state`` after ``iteration`` completed iterations.

        ``extra``: JSON-serialisable trainer state (task cursor, env seeds, ...). ``eval_metric``:
        the validation metric measured at this iteration, if any; the best such checkpoint is kept.
        Returns False (and saves nothing) when this iteration already has a checkpoint.
        """
        if iteration in self._manager.all_steps():
            return False
        if eval_metric is not None:
            eval_metric = float(eval_metric)
            if not math.isfinite(eval_metric):
                warnings.warn(f"eval_metric={eval_metric} at iteration {iteration} is not finite; not ranked", RuntimeWarning, stacklevel=2)
                eval_metric = None
        if eval_metric is not None and (self.best_metric is None or self._at_least_as_good(eval_metric, self.best_metric)):
            self.best_metric, self.best_iteration = eval_metric, iteration
        meta = {
            "format": META_FORMAT,
            "iteration": iteration,
            "config_hash": self.config_hash,
            "config": self.config,
            "best_metric": self.best_metric,
            "best_iteration": self.best_iteration,
            "eval_metric": eval_metric,
            "extra": dict(extra or {}),
            "saved_unix_s": time.time(),
        }
        return self._manager.save(
            iteration,
            args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)),
            metrics={_METRIC_KEY: eval_metric} if eval_metric is not None else None,
            force=True,  # the trainer decides when to save
        )

    def save_now(
        self,
        iteration: int,
        state: Any,
        extra: Mapping[str, Any] | None = None,
        *,
        eval_metric: float | None = None,
    ) -> None:
        """Saves and waits until it is on disk. A checkpoint already written for ``iteration``
        counts: only the wait happens then. A failed write raises ``CheckpointWriteError`` (one
        line) after removing what it left behind."""
        _QUIET_SAVES.active = True
        try:
            self.save(iteration, state, extra, eval_metric=eval_metric)
            self.wait()
            _QUIET_SAVES.active = False
        except Exception as error:  # orbax wraps the OSError of a full disk in its own types
            self._failed = True  # (the filter stays on: late background threads repeat the failure)
            self._remove_unfinished(iteration)
            reason = _root_cause(error)
            raise CheckpointWriteError(
                f"could not write the checkpoint of iteration {iteration} to {self.directory}: {reason}"
            ) from None

    def _remove_unfinished(self, iteration: int) -> None:
        try:  # let background writes of the failed save end first, or they recreate what is removed
            self._manager.wait_until_finished()
        except Exception:  # noqa: BLE001 - the same failure, already being reported
            pass
        # the failed save's temporary directory, or its final one if the failure came after the rename
        for path in [self.directory / str(iteration), *self.directory.glob(f"{iteration}.orbax-checkpoint-tmp*")]:
            shutil.rmtree(path, ignore_errors=True)
        try:
            self._manager.reload()
        except Exception:  # noqa: BLE001 - the manager is only re-read for its step list
            pass

    def _at_least_as_good(self, value: float, best: float) -> bool:
        # ties go to the newer checkpoint, as orbax's BestN keeps the newer of equals
        return value >= best if self.best_mode == "max" else value <= best

    def wait(self) -> None:
        """Blocks until any save in progress is committed; raises if it failed."""
        self._manager.wait_until_finished()
        self._manager.check_for_errors()

    def close(self) -> None:
        if getattr(self, "_failed", False):  # already reported by save_now; do not raise it twice
            try:
                self._manager.close()
            except Exception:  # noqa: BLE001
                pass
            return
        self._manager.wait_until_finished()
        self._manager.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _as_abstract(leaf: Any) -> Any:
    if isinstance(leaf, jax.Array):
        return ocp.utils.to_shape_dtype_struct(leaf)
    return leaf


def _parse_meta(raw: Any, step: int) -> CheckpointMeta:
    if not isinstance(raw, Mapping) or raw.get("format") != META_FORMAT:
        raise CheckpointError(f"iteration {step}: metadata is not a milegpo checkpoint's (format {META_FORMAT})")
    try:
        return CheckpointMeta(
            iteration=int(raw["iteration"]),
            config_hash=str(raw["config_hash"]),
            best_metric=raw["best_metric"],
            best_iteration=raw["best_iteration"],
            eval_metric=raw["eval_metric"],
            extra=raw["extra"],
            config=raw.get("config"),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"iteration {step}: malformed metadata ({error!r})") from None


def _root_cause(error: BaseException) -> str:
    """The innermost cause of a (chained) exception, in one line: an OSError's strerror and file."""
    seen = set()
    while id(error) not in seen:
        seen.add(id(error))
        inner = error.__cause__ or error.__context__
        if inner is None:
            break
        error = inner
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}" + (f" ({error.filename})" if error.filename else "")
    text = " ".join(str(error).split())
    code = re.search(r"os_error_code='?(\d+)", text)  # tensorstore's form of an OSError
    if code:
        return f"{os.strerror(int(code.group(1)))} ({type(error).__name__}: {text[:160]}...)"
    return " ".join(_short(error).split())


def _short(error: Exception, limit: int = 300) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= limit else text[:limit] + "..."

"""Credit road of this checkout against an older one, side by side in one process.

Machines are noisy and this 2-core VM has slow phases of minutes, so a change's speed is measured
against the code before it in the same process: both checkouts are imported (each with its own
modules, swapped in before each of its calls), each builds the benchmark's batches
(``experiments/bench/credit.py``) and runs the trainer's credit road (``RolloutBatch.credit_columns``
+ ``compute_credit``), and the two alternate for ``--rounds`` rounds, each call after a run of the
plain-Python reference (the cold case the trainer meets). Before timing, every case asserts that
both give the same per-row advantages on every seed's batch (``--atol``: at most that far apart, for
a change that rounds differently; the largest difference is reported). Ends with one JSON line: per
case the median road in ms of each side, the ratio baseline / this checkout and the difference.

Run: ``git worktree add ../base <commit>`` (or ``git archive <commit> | tar -x -C DIR``) then
``python -m experiments.bench.credit_versions --baseline ../base [--cases milegpo/full mvpo]``. The run
compiles its numba functions into a private cache (``NUMBA_CACHE_DIR``, unless set): the two checkouts'
cached code clashed in one process otherwise ("'descr' is NULL").
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_PACKAGES = ("milegpo_jax", "experiments", "envs_bridge")
_HERE = Path(__file__).resolve().parents[2]


def _own_modules() -> dict:
    return {name: module for name, module in sys.modules.items() if name.split(".")[0] in _PACKAGES}


class Checkout:
    """One checkout's credit modules, imported under their usual names and kept aside."""

    def __init__(self, root: Path):
        for name in _own_modules():
            del sys.modules[name]
        sys.path.insert(0, str(root))
        try:
            self.bench = importlib.import_module("experiments.bench.credit")
            self.config = importlib.import_module("milegpo_jax.credit.config")
            self.synthetic = importlib.import_module("milegpo_jax.credit.testing.synthetic")
            self.reference = importlib.import_module("milegpo_jax.credit.testing.reference")
            # programs imported lazily at trace time would come from whichever checkout sys.path names
            # then: an older checkout's family module is imported here (a newer one imports every
            # program with its estimators package)
            importlib.import_module("milegpo_jax.credit.estimators")
            if (root / "milegpo_jax" / "credit" / "family.py").is_file():
                importlib.import_module("milegpo_jax.credit.family")
        finally:
            sys.path.remove(str(root))
        self.modules = _own_modules()

    def use(self) -> None:
        """Puts this checkout's modules back, so that imports made at call time find its own."""
        sys.modules.update(self.modules)


def _advantages(road_output) -> np.ndarray:
    """The per-step advantages of a checkout's ``_trainer_road`` (an older checkout returns ``(order, advantages)``)."""
    return road_output[1] if isinstance(road_output, tuple) else road_output


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the older code")
    parser.add_argument("--cases", nargs="*", default=None, help="estimator names as the credit bench prints them")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--atol", type=float, default=0.0, help="largest allowed |difference| of an advantage")
    args = parser.parse_args(argv)
    if not (args.baseline / "experiments" / "bench" / "credit.py").is_file():
        print(f"--baseline {args.baseline}: no experiments/bench/credit.py there", file=sys.stderr)
        raise SystemExit(2)

    # Both checkouts' numba functions share names and would share cached machine code, which can clash
    # in one process ("'descr' is NULL"): this run compiles into a cache of its own unless told otherwise.
    if "NUMBA_CACHE_DIR" not in os.environ:
        os.environ["NUMBA_CACHE_DIR"] = cache = tempfile.mkdtemp(prefix="credit_versions_numba_")
        atexit.register(shutil.rmtree, cache, True)
    sides = {"baseline": Checkout(args.baseline.resolve()), "current": Checkout(_HERE)}
    batches = {}
    for side, checkout in sides.items():
        checkout.use()
        batches[side] = []
        for seed in args.seeds:
            groups = checkout.bench.with_first_visit_milestones(checkout.synthetic.alfworld_like_rollouts(16, 8, 50, seed=seed))
            batches[side].append((groups, checkout.bench.as_collected(groups)[0]))
    cases = [(e, s, e if s is None else f"{e}/{s}") for e, s in sides["current"].bench.CASES]
    if args.cases:
        unknown = set(args.cases) - {name for *_, name in cases}
        if unknown:
            print(f"--cases: unknown {sorted(unknown)}", file=sys.stderr)
            raise SystemExit(2)
        cases = [case for case in cases if case[2] in args.cases]

    figures = {}
    for estimator, stage, name in cases:
        configs, outputs = {}, {}
        for side, checkout in sides.items():
            checkout.use()
            configs[side] = checkout.config.make_credit_config(estimator, stage=stage)
            outputs[side] = [_advantages(checkout.bench._trainer_road(collected, configs[side]))
                             for _, collected in batches[side]]
        difference = 0.0
        for seed, old, new in zip(args.seeds, outputs["baseline"], outputs["current"]):
            gap = float(np.abs(old - new).max(initial=0.0)) if old.shape == new.shape else None
            if gap is None or not gap <= args.atol:  # a NaN gap is refused too
                why = "shapes differ" if gap is None else f"max {gap:.3g}"
                raise SystemExit(f"{name}: the advantages differ on seed {seed} ({why}, --atol {args.atol})")
            difference = max(difference, gap)
        times = {side: [] for side in sides}
        for r in range(args.rounds):
            for side in ("baseline", "current") if r % 2 == 0 else ("current", "baseline"):
                checkout, (groups, collected) = sides[side], batches[side][0]
                checkout.use()
                checkout.reference.compute_advantages(groups, configs[side])
                start = time.perf_counter()
                checkout.bench._trainer_road(collected, configs[side])
                times[side].append(time.perf_counter() - start)
        medians = {side: 1000.0 * statistics.median(values) for side, values in times.items()}
        figures[name] = {**{f"{side}_ms": round(ms, 3) for side, ms in medians.items()},
                         "ratio": round(medians["baseline"] / medians["current"], 3), "max_difference": difference}
        print(f"{name:<16}baseline {medians['baseline']:7.2f} ms   current {medians['current']:7.2f} ms   "
              f"ratio {figures[name]['ratio']:.3f}   max difference {difference:.2g}", flush=True)
    same = all(f["max_difference"] == 0.0 for f in figures.values())
    summary = {"bench": "credit_versions", "baseline": str(args.baseline), "rounds": args.rounds,
               "seeds": args.seeds, "atol": args.atol, "same_advantages": same, "per_estimator": figures}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()

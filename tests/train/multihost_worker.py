"""One process of a 2-process ``jax.distributed`` training run on CPU (run by test_multihost.py).

    python tests/train/multihost_worker.py WORKDIR PROCESS_ID COORDINATOR_PORT [--config.x=y ...]

Trains through the real entry point's steps (config, distributed start-up, Trainer.run), then writes
the full value of every parameter as this process sees it to ``WORKDIR/params-<process>.npz``.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def main() -> None:
    workdir, process_id, port, *overrides = sys.argv[1:]
    from experiments.train import build_config
    from milegpo_jax import multihost

    config = build_config("experiments/configs/demo.py", [
        *overrides, f"distributed.coordinator_address=localhost:{port}", "distributed.num_processes=2",
        f"distributed.process_id={process_id}",
    ])
    d = config.distributed
    multihost.initialize(d.coordinator_address, d.num_processes, d.process_id)

    import jax
    from flax import nnx

    from milegpo_jax.train.trainer import Trainer

    def parameters():
        leaves = jax.tree_util.tree_leaves_with_path(nnx.to_pure_dict(nnx.state(trainer.model, nnx.Param)))
        return {jax.tree_util.keystr(path): leaf for path, leaf in leaves}

    trainer = Trainer(config, workdir)
    before = {name: multihost.to_host(leaf) for name, leaf in parameters().items()}
    summary = trainer.run()
    after = parameters()
    np.savez(f"{workdir}/params-{process_id}.npz", **{name: multihost.to_host(leaf) for name, leaf in after.items()})
    report = {
        "process_index": jax.process_index(),
        "process_count": jax.process_count(),
        "device_count": jax.device_count(),
        "parameters_spanning_hosts": sum(not leaf.is_fully_addressable for leaf in after.values()),
        "changed": sum(not np.array_equal(before[n], multihost.to_host(leaf)) for n, leaf in after.items()),
        "resumed_from": summary["resumed_from"],
    }
    print("WORKER " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()

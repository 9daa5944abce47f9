"""Training configs: each module defines ``get_config(arg=None)`` returning an ``ml_collections.ConfigDict``.

Run one with ``python -m experiments.train --config experiments/configs/NAME.py[:ARG] --workdir DIR
[--config.a.b=value ...]``; ``milegpo_jax.config.load_config`` checks it. Each file sets only what
differs: ``base`` what the paper's shared training recipe changes from the schema's defaults, the
environment files what differs from ``base``.
"""

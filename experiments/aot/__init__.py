"""Ahead-of-time compilation for a TPU topology on a CPU host (``python -m experiments.aot``)."""

from experiments.aot.programs import *  # noqa: F401,F403  (split into modules in the next commit)

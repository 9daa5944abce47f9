"""``python -m experiments.aot``: the command line (experiments/aot/cli.py)."""

from experiments.aot import main

main()

"""``python -m experiments.arena`` (the command line lives in cli.py, where spawned workers can import it)."""

import sys

from experiments.arena.cli import main

sys.exit(main())

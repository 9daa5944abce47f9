"""``python -m experiments.arena [study | summarize] ...`` (the commands live in cli.py, study.py and
summary.py, where spawned workers can import them)."""

import sys

from experiments.arena import cli, study, summary

COMMANDS = {"study": study.main, "summarize": summary.main}

if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
    sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))
sys.exit(cli.main())

"""``python -m experiments.arena [study | summarize | family | compare | uniform] ...`` (the commands live in cli.py,
study.py, summary.py, family_report.py, compare.py and uniform.py, where spawned workers can import them)."""

import sys

from experiments.arena import cli, compare, family_report, study, summary, uniform

COMMANDS = {"study": study.main, "summarize": summary.main, "family": family_report.main, "compare": compare.main,
            "uniform": uniform.main}

if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
    sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]))
sys.exit(cli.main())

"""``python -m milegpo_jax.credit``: the credit CLI (``credit/cli.py``) with the config's parser for
``--set key=value``, the one text parser of every command line (docs/training.md §1). Only this entry
point joins the two: the credit package itself imports no config (docs/architecture.md §3)."""

import sys

from milegpo_jax.config import parse_credit_options
from milegpo_jax.credit import cli


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, parse_credit_options)


if __name__ == "__main__":
    sys.exit(main())

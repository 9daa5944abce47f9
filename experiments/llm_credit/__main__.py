"""``python -m experiments.llm_credit {setting,run,summarize} ...`` (docs/results/llm-credit.md)."""

import sys

COMMANDS = ("setting", "run", "summarize")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python -m experiments.llm_credit {{{','.join(COMMANDS)}}} ...", file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "setting":
        from experiments.llm_credit.setting import main as run
    elif command == "run":
        from experiments.llm_credit.study import main as run
    else:
        from experiments.llm_credit.summarize import main as run
    return run(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

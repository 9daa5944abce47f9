"""Per-task outcomes of an evaluation, logged so that two evaluations can be paired (pure).

An evaluation plays the fixed ordered task list ``0 .. n-1`` of each eval split, one episode per task
and eval seed (``Trainer.evaluate``), so task i of one evaluation -- before and after training, or of
two runs -- is the same game. Its outcomes are kept as one string per (split, eval seed, mode), one
character per task in list order: ``1`` won, ``0`` lost, ``x`` aborted (its env server failed). A
string is a scalar to the metrics logger, so it lands in ``metrics.jsonl`` beside the rates and is
dropped and rewritten with them on resume (docs/training.md §7).
"""

from __future__ import annotations

from collections.abc import Sequence

OUTCOMES_PREFIX = "outcomes/"  # outside eval/: readers of eval/* expect numbers (experiments/report.py)
WON, LOST, ABORTED = "1", "0", "x"


def outcome_string(episodes: Sequence, tasks: int) -> str:
    """The outcomes of a one-rollout-per-task batch (``EpisodeSummary``s whose ``group`` is the
    task's position in the list) as one character per task."""
    if sorted(e.group for e in episodes) != list(range(tasks)):
        raise ValueError(f"an evaluation batch holds one episode per task: groups 0..{tasks - 1}")
    by_task = {e.group: e for e in episodes}
    return "".join(ABORTED if by_task[t].aborted else WON if by_task[t].won else LOST for t in range(tasks))


def outcome_key(split: str, eval_seed: int, greedy: bool = False) -> str:
    return f"{OUTCOMES_PREFIX}{'greedy/' if greedy else ''}{split}/seed{eval_seed}"


def parse_outcomes(text: str) -> list[bool | None]:
    """``outcome_string``'s characters back as won / lost / None (aborted)."""
    table = {WON: True, LOST: False, ABORTED: None}
    if not isinstance(text, str) or any(c not in table for c in text):
        raise ValueError(f"not an outcome string (characters 1, 0, x): {text!r}")
    return [table[c] for c in text]

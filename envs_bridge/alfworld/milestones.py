"""BEACON's ALFWorld milestones (docs/credit-family.md): the game's expert plan, matched in order.

The milestone list of a game is its walkthrough (the winning action sequence the adapter exposes).
A pointer starts at the first action; a step whose action is similar enough to the pending one
(``difflib`` ratio >= the threshold) completes it and moves the pointer on: at most one milestone
per step, none after the list is done. This is BEACON's ``match_milestones`` run online, step by step.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

# BEACON's ALFWorld run script (recipe "alfworld"); its function default is 0.85.
MATCH_THRESHOLD = 0.95


class WalkthroughMilestones:
    """Flags, step by step, the actions that complete the next milestone of ``plan``."""

    def __init__(self, plan: Sequence[str] | None, threshold: float = MATCH_THRESHOLD):
        self.plan = [action.strip().lower() for action in plan or ()]
        self.threshold = threshold
        self.done = 0  # milestones completed so far

    def observe(self, action: str) -> bool:
        """True when ``action`` completes the pending milestone."""
        if self.done >= len(self.plan):
            return False
        ratio = difflib.SequenceMatcher(None, action.strip().lower(), self.plan[self.done]).ratio()
        if ratio >= self.threshold:
            self.done += 1
            return True
        return False

"""A tree group's shape and its rules, without jax or numpy (docs/training.md, "Tree rollouts"):
``TreeShape`` is declared and checked here, once. The config's ``env.branching`` section
(``config/sections.py``) and the arena's ``--branching`` flag (``experiments/arena/inputs.py``) build it
to check their values; ``branching.py`` and ``tree_collector.py`` play the trees it describes.
"""

from __future__ import annotations

import dataclasses

from milegpo_jax.suggest import suggestion

FORK_RULES = ("uniform", "first_visit")  # branching.py's GroupTree implements them


def check_forks(branches: int, fork_at: str) -> None:
    """The fork rules alone (``branches``, ``fork_at``): what a config checks even while trees are off.
    A failure is a ValueError whose message starts with the field's name."""
    if not branches >= 1:
        raise ValueError(f"branches={branches}: must be >= 1 (forks made at a fork point)")
    if fork_at not in FORK_RULES:
        raise ValueError(f"fork_at={fork_at!r}: must be one of {', '.join(FORK_RULES)}{suggestion(str(fork_at), FORK_RULES)}")


@dataclasses.dataclass(frozen=True)
class TreeShape:
    """The branching options the collector needs (config: ``env.branching`` with K = ``env.group_size``)."""

    roots: int  # episodes started from the task's start
    branches: int  # forks made at each fork point (the parent goes on as well)
    fork_at: str  # one of FORK_RULES
    leaves: int  # K: the group's budget

    def __post_init__(self):
        if not self.roots >= 1:
            raise ValueError(f"roots={self.roots}: must be >= 1 (episodes started from the task's start)")
        if not self.roots < self.leaves:
            raise ValueError(f"roots={self.roots}: must be < leaves={self.leaves} (K, the group size: env.group_size, "
                             "--group-size): a budget of K leaves holds the roots and at least one fork")
        check_forks(self.branches, self.fork_at)

    @staticmethod
    def from_config(branching, group_size: int) -> TreeShape | None:
        """The shape of ``env.branching`` (config/sections.py ``BranchingSection``), None when it is off."""
        if not branching.enabled:
            return None
        return TreeShape(branching.roots, branching.branches, branching.fork_at, group_size)


__all__ = ["FORK_RULES", "TreeShape", "check_forks"]

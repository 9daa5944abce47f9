"""``Group`` records (the credit engine's) as the collector hands them over: the rows and episodes of
a ``RolloutBatch`` in lockstep order (turn by turn, every env of the plan in order), for tests and the
credit benchmark. It lives here, not in ``credit/testing``, because credit imports nothing of rollout/."""

from __future__ import annotations

from milegpo_jax.credit.rollouts import Group
from milegpo_jax.rollout.collector import EpisodeSummary, PolicyResponse, StepRow

# Credit never reads the policy's tokens: one placeholder response serves every row.
PLACEHOLDER_RESPONSE = PolicyResponse((1,), (2,), (0.0,), "")


def lockstep_rows(
    groups: list[Group], aborted: frozenset = frozenset()
) -> tuple[tuple[StepRow, ...], tuple[EpisodeSummary, ...]]:
    """``(rows, episodes)`` of ``groups``: rows sorted by (turn, group, rollout) as ``collect``
    appends them; ``aborted`` names the (group, rollout) episodes whose env failed."""
    rows = sorted(
        (
            StepRow(g, k, t, PLACEHOLDER_RESPONSE, s.state, s.action, s.next_state, s.reward, s.valid, s.milestone)
            for g, group in enumerate(groups)
            for k, traj in enumerate(group.trajectories)
            for t, s in enumerate(traj.steps)
        ),
        key=lambda row: (row.t, row.group, row.trajectory),
    )
    episodes = tuple(
        EpisodeSummary(g, k, traj.succeeded, len(traj.steps), (g, k) in aborted, float(traj.succeeded))
        for g, group in enumerate(groups)
        for k, traj in enumerate(group.trajectories)
    )
    return tuple(rows), episodes

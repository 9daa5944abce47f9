"""The lockstep multi-turn rollout loop: env pool <-> policy, one row per (group, rollout, step).

Per turn every active environment gets a fresh prompt (template + the last ``history_length``
observation/action pairs, docs/environments.md §6.1), the policy answers all of them in one batched call,
the responses are projected to env actions with their validity flags (§6.2) and the pool steps every
env at once. An episode ends when the env says done or after ``max_steps`` turns (a failure). Episodes
whose server failed are ABORTED: counted, and left out of training and of the credit groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from envs_bridge.client import EnvPool
from envs_bridge.groups import GroupPlan
from milegpo_jax.credit.rollouts import Group, Step, Trajectory
from milegpo_jax.rollout.prompts import HistoryEntry, build_prompt, project_actions


@dataclasses.dataclass(frozen=True)
class PolicyResponse:
    """The policy's answer to one prompt, as the rollout keeps it (a ``StepRow`` trains on it).

    The sampler returns a ``GenerationBatch`` (padded arrays of a whole batch), each row of which
    becomes a ``TextCompletion`` at text level; ``SamplerPolicy`` turns those into these records.
    """

    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]  # generated tokens, including the end-of-turn token if produced
    logprobs: tuple[float, ...]  # behaviour log-probabilities of response_ids (temperature 1)
    text: str  # the decoded response


class Policy(Protocol):
    def generate(self, prompts: Sequence[str], *, temperature: float, seed: int) -> list[PolicyResponse]:
        """Answers each user prompt (chat-templated by the policy)."""


def _milestone_flag(info: dict) -> bool | None:
    """The env's BEACON milestone flag of a step, None where the env does not detect milestones."""
    flag = info.get("milestone_achieved")
    return None if flag is None else bool(flag)


@dataclasses.dataclass(frozen=True)
class StepRow:
    group: int
    trajectory: int  # rollout index k within the group
    t: int
    response: PolicyResponse
    state: str  # canonical state key before the action
    action: str  # projected env action
    next_state: str
    reward: float  # env reward x reward_scale
    valid: bool  # format validity of the response
    milestone: bool | None = None  # BEACON: the env's info["milestone_achieved"]; None if it reports none


@dataclasses.dataclass(frozen=True)
class EpisodeSummary:
    group: int
    trajectory: int
    won: bool
    steps: int
    aborted: bool
    score: float
    task_type: str | None = None  # the env's info["task_type"] at reset (ALFWorld's six types), if any


@dataclasses.dataclass(frozen=True)
class RolloutBatch:
    rows: tuple[StepRow, ...]
    episodes: tuple[EpisodeSummary, ...]

    def training_rows(self) -> list[StepRow]:
        """Rows of the episodes that were not aborted, in (group, trajectory, t) order."""
        aborted = {(e.group, e.trajectory) for e in self.episodes if e.aborted}
        return sorted(
            (row for row in self.rows if (row.group, row.trajectory) not in aborted),
            key=lambda row: (row.group, row.trajectory, row.t),
        )

    def credit_groups(self) -> tuple[list[Group], list[list[list[StepRow]]]]:
        """Credit-engine groups (aborted episodes dropped, empty groups skipped) and, aligned with them,
        the rows of every step, so advantages map back to rows."""
        by_episode: dict[tuple[int, int], list[StepRow]] = {}
        for row in self.training_rows():
            by_episode.setdefault((row.group, row.trajectory), []).append(row)
        groups, aligned = [], []
        for g in sorted({group for group, _ in by_episode}):
            episodes = [rows for (group, _), rows in sorted(by_episode.items()) if group == g]
            trajectories = tuple(
                Trajectory(tuple(Step(r.state, r.action, r.next_state, r.reward, r.valid, r.milestone) for r in rows))
                for rows in episodes
            )
            groups.append(Group(trajectories))
            aligned.append(episodes)
        return groups, aligned

    def metrics(self) -> dict[str, float]:
        finished = [e for e in self.episodes if not e.aborted]
        rows = self.training_rows()
        return {
            "success_rate": sum(e.won for e in finished) / max(len(finished), 1),
            "score": sum(e.score for e in finished) / max(len(finished), 1),
            "episode_length": sum(e.steps for e in finished) / max(len(finished), 1),
            "invalid_action_rate": sum(not r.valid for r in rows) / max(len(rows), 1),
            "episodes": float(len(self.episodes)),
            "aborted_episodes": float(len(self.episodes) - len(finished)),
            "steps": float(len(rows)),
        }

    def success_by_task_type(self) -> dict[str, float]:
        """Success rate of the finished episodes of each task type the env reports (empty when none)."""
        by_type: dict[str, list[bool]] = {}
        for e in self.episodes:
            if not e.aborted and e.task_type is not None:
                by_type.setdefault(str(e.task_type), []).append(e.won)
        return {task_type: sum(won) / len(won) for task_type, won in sorted(by_type.items())}


def merge_host_batches(batches: Sequence[RolloutBatch]) -> RolloutBatch:
    """One batch from the batches every host played for its share of a plan.

    Host ``h`` of ``H`` played the plan's groups ``h, h + H, h + 2H, ...`` (``multihost.host_share``) as
    its groups ``0, 1, 2, ...``; the merged batch numbers them back to their place in the plan.
    """
    hosts = len(batches)
    rows, episodes = [], []
    for host, batch in enumerate(batches):
        rows += [dataclasses.replace(r, group=host + r.group * hosts) for r in batch.rows]
        episodes += [dataclasses.replace(e, group=host + e.group * hosts) for e in batch.episodes]
    return RolloutBatch(tuple(rows), tuple(episodes))


def merge_passes(batches: Sequence[RolloutBatch]) -> RolloutBatch:
    """One batch from consecutive passes over disjoint task lists (their groups numbered on)."""
    if len(batches) == 1:
        return batches[0]
    rows, episodes, offset = [], [], 0
    for batch in batches:
        rows += [dataclasses.replace(r, group=r.group + offset) for r in batch.rows]
        episodes += [dataclasses.replace(e, group=e.group + offset) for e in batch.episodes]
        offset += 1 + max((e.group for e in batch.episodes), default=-1)
    return RolloutBatch(tuple(rows), tuple(episodes))


def collect(
    pool: EnvPool,
    policy: Policy,
    plan: GroupPlan,
    *,
    env: str,
    max_steps: int,
    history_length: int,
    temperature: float,
    seed: int,
    reward_scale: float = 1.0,
    on_turn: Callable[[int, int], None] | None = None,
) -> RolloutBatch:
    """Plays every env of ``plan`` to the end (lockstep); ``on_turn(turn, active_envs)`` reports progress."""
    replies = pool.reset_groups(plan)
    size = plan.group_size
    current = [reply.result for reply in replies]
    task_types = [None if reply.aborted else reply.result.info.get("task_type") for reply in replies]
    aborted = [reply.aborted for reply in replies]
    active = [not reply.aborted for reply in replies]
    history: list[list[HistoryEntry]] = [[] for _ in replies]
    won = [False] * len(replies)
    score = [0.0] * len(replies)
    steps = [0] * len(replies)
    rows: list[StepRow] = []
    for turn in range(max_steps):
        indices = [i for i, is_active in enumerate(active) if is_active]
        if not indices:
            break
        if on_turn is not None:
            on_turn(turn, len(indices))
        prompts = [
            build_prompt(
                env,
                current[i].observation,
                current[i].admissible_actions,
                task=current[i].task,
                history=history[i][-history_length:] if history_length > 0 else (),
                history_length=history_length,
            )
            for i in indices
        ]
        responses = policy.generate(prompts, temperature=temperature, seed=(seed + turn) % 2**31)
        actions, valids = project_actions([r.text for r in responses], env)
        step_replies = pool.step(actions, env_indices=indices)
        for i, response, action, valid, reply in zip(indices, responses, actions, valids, step_replies):
            if reply.aborted:
                aborted[i], active[i] = True, False
                continue
            result = reply.result
            rows.append(
                StepRow(
                    group=i // size,
                    trajectory=i % size,
                    t=steps[i],
                    response=response,
                    state=current[i].state_key,
                    action=action,
                    next_state=result.state_key,
                    reward=result.reward * reward_scale,
                    valid=valid,
                    milestone=_milestone_flag(result.info),
                )
            )
            history[i].append(HistoryEntry(current[i].observation, action))
            current[i] = result
            steps[i] += 1
            won[i], score[i] = result.won, result.score
            if result.done:
                active[i] = False
    episodes = tuple(
        EpisodeSummary(i // size, i % size, won[i], steps[i], aborted[i], score[i], task_types[i])
        for i in range(len(replies))
    )
    return RolloutBatch(tuple(rows), episodes)

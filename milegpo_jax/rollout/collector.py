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

import numpy as np

from envs_bridge.client import EnvPool
from envs_bridge.groups import GroupPlan
from milegpo_jax.credit.columns import RecordedSteps, RolloutColumns, StepRecorder
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


def _record(recorder: StepRecorder, row: StepRow) -> None:
    recorder.record(
        row.group, row.trajectory, row.t, row.state, row.action, row.next_state, row.reward, row.valid, row.milestone
    )


def record_rows(rows: Sequence[StepRow]) -> RecordedSteps:
    """The recording ``collect`` makes as it plays, for rows assembled otherwise (tests, tools)."""
    recorder = StepRecorder()
    for row in rows:
        _record(recorder, row)
    return recorder.finish()


@dataclasses.dataclass(frozen=True)
class RolloutBatch:
    rows: tuple[StepRow, ...]
    episodes: tuple[EpisodeSummary, ...]
    # the rows' credit fields, state keys and actions interned per group as the collector recorded them
    # (credit/columns.py); recorded from ``rows`` when not given
    recorded: RecordedSteps | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.recorded is None:
            object.__setattr__(self, "recorded", record_rows(self.rows))
        elif len(self.recorded) != len(self.rows):
            raise ValueError(f"rollout batch: {len(self.recorded)} recorded steps for {len(self.rows)} rows")

    def _aborted(self) -> set[tuple[int, int]]:
        return {(e.group, e.trajectory) for e in self.episodes if e.aborted}

    def training_rows(self) -> list[StepRow]:
        """Rows of the episodes that were not aborted, in (group, trajectory, t) order."""
        return self.rows_in(self.recorded.training_order(self._aborted()))

    def rows_in(self, order: np.ndarray) -> list[StepRow]:
        """``rows[order[0]], rows[order[1]], ...`` (e.g. the order ``credit_columns`` returns)."""
        return np.fromiter(self.rows, object, len(self.rows))[order].tolist()

    def aligned_rows(self) -> list[list[list[StepRow]]]:
        """Rows per credit group, per trajectory, per step (aborted episodes dropped, empty groups skipped)."""
        columns, order = self.credit_columns()
        rows = self.rows_in(order)
        ends = np.cumsum(columns.lengths).tolist()
        trajectories = [rows[begin:end] for begin, end in zip([0, *ends[:-1]], ends)]
        group_ends = np.cumsum(columns.group_sizes).tolist()
        return [trajectories[begin:end] for begin, end in zip([0, *group_ends[:-1]], group_ends)]

    def credit_groups(self) -> tuple[list[Group], list[list[list[StepRow]]]]:
        """Credit-engine groups and, aligned with them, the rows of every step, so advantages map back to rows."""
        aligned = self.aligned_rows()
        groups = [
            Group(tuple(
                Trajectory(tuple(Step(r.state, r.action, r.next_state, r.reward, r.valid, r.milestone) for r in rows))
                for rows in episodes
            ))
            for episodes in aligned
        ]
        return groups, aligned

    def credit_columns(self) -> tuple[RolloutColumns, np.ndarray]:
        """The credit groups as the pre-interned step columns of the recording (credit/columns.py: the
        same padded batch, without touching a string or a record per step) and their order: entry i of
        the columns, and of a ``CreditResult.step_advantages``, is the step of ``rows[order[i]]``
        (``rows_in(order)``; the credit road itself touches no row record, docs/credit.md §10.1)."""
        return self.recorded.columns(self._aborted())

    def metrics(self) -> dict[str, float]:
        finished = [e for e in self.episodes if not e.aborted]
        valid = self.recorded.valid[self.recorded.training_order(self._aborted())]  # the training rows' flags
        return {
            "success_rate": sum(e.won for e in finished) / max(len(finished), 1),
            "score": sum(e.score for e in finished) / max(len(finished), 1),
            "episode_length": sum(e.steps for e in finished) / max(len(finished), 1),
            "invalid_action_rate": float(np.count_nonzero(~valid)) / max(len(valid), 1),
            "episodes": float(len(self.episodes)),
            "aborted_episodes": float(len(self.episodes) - len(finished)),
            "steps": float(len(valid)),
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
    rows, episodes, recorded = [], [], []
    for host, batch in enumerate(batches):
        rows += [dataclasses.replace(r, group=host + r.group * hosts) for r in batch.rows]
        episodes += [dataclasses.replace(e, group=host + e.group * hosts) for e in batch.episodes]
        recorded.append(batch.recorded.regrouped(lambda group, host=host: host + group * hosts))
    return RolloutBatch(tuple(rows), tuple(episodes), RecordedSteps.concatenate(recorded))


def merge_passes(batches: Sequence[RolloutBatch]) -> RolloutBatch:
    """One batch from consecutive passes over disjoint task lists (their groups numbered on)."""
    if len(batches) == 1:
        return batches[0]
    rows, episodes, recorded, offset = [], [], [], 0
    for batch in batches:
        rows += [dataclasses.replace(r, group=r.group + offset) for r in batch.rows]
        episodes += [dataclasses.replace(e, group=e.group + offset) for e in batch.episodes]
        recorded.append(batch.recorded.regrouped(lambda group, offset=offset: group + offset))
        offset += 1 + max((e.group for e in batch.episodes), default=-1)
    return RolloutBatch(tuple(rows), tuple(episodes), RecordedSteps.concatenate(recorded))


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
    recorder = StepRecorder()  # interns each row's state keys and action as it is recorded
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
            row = StepRow(
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
            rows.append(row)
            _record(recorder, row)
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
    return RolloutBatch(tuple(rows), episodes, recorder.finish())

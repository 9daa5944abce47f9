"""The lockstep multi-turn rollout loop: env pool <-> policy, one recorded step per (group, rollout, step).

Per turn every active environment gets a fresh prompt (template + the last ``history_length``
observation/action pairs, docs/environments.md §6.1), the policy answers all of them in one batched call,
the responses are projected to env actions with their validity flags (§6.2) and the pool steps every
env at once. An episode ends when the env says done or after ``max_steps`` turns (a failure). Episodes
whose server failed are ABORTED: counted, and left out of training and of the credit groups.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from envs_bridge.base import StepResult
from envs_bridge.client import EnvPool, EnvReply
from envs_bridge.groups import GroupPlan
from milegpo_jax.credit.columns import MILESTONE_FLAGS, RecordedSteps, RolloutColumns, StepRecorder
from milegpo_jax.rollout.branching import TreeShape, leaf_rows, leaves_through_steps
from milegpo_jax.rollout.prompts import HistoryEntry, build_prompt, project_actions


@dataclasses.dataclass(frozen=True)
class PolicyResponse:
    """The policy's answer to one prompt, as the rollout keeps it (the update trains on it).

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


def milestone_flag(info: dict) -> bool | None:
    """The env's BEACON milestone flag of a step, None where the env does not detect milestones."""
    flag = info.get("milestone_achieved")
    return None if flag is None else bool(flag)


@dataclasses.dataclass(frozen=True)
class StepRow:
    """One played step as a record: what ``RolloutBatch.from_rows`` records and ``RolloutBatch.rows`` lists."""

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
    # tree groups (rollout/branching.py): the leaf this one forked from (None: a root) and the steps
    # it shares with it, recorded under the parent; ``steps`` counts from the root
    parent: int | None = None
    fork_step: int = 0


def _record(recorder: StepRecorder, row: StepRow) -> None:
    recorder.record(
        row.group, row.trajectory, row.t, row.state, row.action, row.next_state, row.reward, row.valid, row.milestone
    )


@dataclasses.dataclass(frozen=True)
class RolloutBatch:
    """Every played step once, in the order the collector recorded it: its credit fields (state keys
    and actions interned per group as it was recorded, credit/columns.py) and the policy's response
    to it; and every episode, aborted ones included."""

    steps: RecordedSteps
    responses: tuple[PolicyResponse, ...]  # responses[i] is the answer of recorded step i
    episodes: tuple[EpisodeSummary, ...]

    def __post_init__(self):
        if len(self.steps) != len(self.responses):
            raise ValueError(f"rollout batch: {len(self.responses)} responses for {len(self.steps)} recorded steps")

    @staticmethod
    def from_rows(rows: Sequence[StepRow], episodes: Sequence[EpisodeSummary]) -> RolloutBatch:
        """The batch ``collect`` makes as it plays, for rows assembled otherwise (tests, tools)."""
        recorder = StepRecorder()
        for row in rows:
            _record(recorder, row)
        return RolloutBatch(recorder.finish(), tuple(row.response for row in rows), tuple(episodes))

    @functools.cached_property
    def rows(self) -> tuple[StepRow, ...]:
        """The steps as records, in recording order (for tools that list them; credit and training read
        the columns)."""
        s = self.steps
        return tuple(
            StepRow(group, trajectory, t, response, s.state_names[group][state], s.action_names[group][action],
                    s.state_names[group][next_state], reward, valid, MILESTONE_FLAGS[milestone])
            for group, trajectory, t, response, state, action, next_state, reward, valid, milestone in zip(
                s.group.tolist(), s.trajectory.tolist(), s.t.tolist(), self.responses, s.state.tolist(),
                s.action.tolist(), s.next_state.tolist(), s.reward.tolist(), s.valid.tolist(), s.milestone.tolist(),
            )
        )

    def _aborted(self) -> set[tuple[int, int]]:
        return {(e.group, e.trajectory) for e in self.episodes if e.aborted}

    def credit_columns(self) -> RolloutColumns:
        """The credit input: the steps of the episodes that were not aborted, in (group, trajectory, t)
        order, as the pre-interned columns of the recording (no string or record touched; credit/columns.py)."""
        return self.steps.columns(self._aborted())[0]

    def training_steps(self) -> tuple[RolloutColumns, list[PolicyResponse]]:
        """``credit_columns()`` and the responses of the same steps, aligned: entry i of the columns,
        and of the ``CreditResult.step_advantages`` computed from them, belongs to ``responses[i]``."""
        columns, order = self.steps.columns(self._aborted())
        return columns, np.fromiter(self.responses, object, len(self.responses))[order].tolist()

    def has_trees(self) -> bool:
        """Whether any group of the batch forked (rollout/branching.py)."""
        return any(e.parent is not None for e in self.episodes)

    def _paths(self) -> tuple[np.ndarray, np.ndarray]:
        """``branching.leaf_rows`` of the leaves that were not aborted."""
        leaves: dict[int, dict[int, tuple[int | None, int, int]]] = {}
        for e in self.episodes:
            leaves.setdefault(e.group, {})[e.trajectory] = (e.parent, e.fork_step, e.steps)
        kept = {(e.group, e.trajectory) for e in self.episodes if not e.aborted}
        return leaf_rows(self.steps.group, self.steps.trajectory, self.steps.t, leaves, kept)

    def tree_training_steps(self) -> tuple[RolloutColumns, list[PolicyResponse], np.ndarray | None]:
        """``training_steps()`` for a batch that may hold tree groups (docs/credit-implementation.md §5): the columns
        hold every leaf that was not aborted as a trajectory from the root (a shared step once per leaf
        through it, in (group, leaf, t) order); the responses are those of the recorded steps on these
        paths, each once, in order of first appearance; column entry i is a copy of the step of
        ``responses[step_of[i]]``. Without forks: ``training_steps()`` and ``step_of`` None."""
        if not self.has_trees():
            columns, responses = self.training_steps()
            return columns, responses, None
        rows, leaf = self._paths()
        s = self.steps
        copies = {name: getattr(s, name)[rows] for name in ("group", "t", "state", "next_state", "action", "reward",
                                                            "valid", "milestone")}
        columns, order = dataclasses.replace(s, trajectory=leaf, **copies).columns()
        recorded = rows[order]  # the recorded step of every column entry
        unique, first, inverse = np.unique(recorded, return_index=True, return_inverse=True)
        rank = np.empty(len(unique), np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(unique))
        trained = unique[np.argsort(first, kind="stable")]
        return columns, [self.responses[i] for i in trained.tolist()], rank[inverse]

    def _trained(self) -> np.ndarray:
        """The recorded steps that are trained on: those of episodes not aborted; in a tree, those on the
        path of a leaf not aborted."""
        if self.has_trees():
            return np.unique(self._paths()[0])
        return self.steps.training_order(self._aborted())

    def leaves_per_step(self) -> np.ndarray:
        """For every recorded step, how many leaves of its group pass through it: 1 everywhere for
        independent rollouts, more on the steps a tree group's leaves share (rollout/branching.py)."""
        counts = np.ones(len(self.steps), dtype=np.int64)
        by_group: dict[int, list[EpisodeSummary]] = {}
        for e in self.episodes:
            by_group.setdefault(e.group, []).append(e)
        for group, episodes in by_group.items():
            if all(e.parent is None for e in episodes):
                continue
            leaves = sorted(episodes, key=lambda e: e.trajectory)
            rows = np.flatnonzero(self.steps.group == group)
            counts[rows] = leaves_through_steps(
                self.steps.trajectory[rows], self.steps.t[rows],
                [e.parent for e in leaves], [e.fork_step for e in leaves],
            )
        return counts

    def metrics(self) -> dict[str, float]:
        finished = [e for e in self.episodes if not e.aborted]
        valid = self.steps.valid[self._trained()]  # the training steps' flags
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


def _renumbered(batches: Sequence[RolloutBatch], new_groups: Sequence[Callable[[int], int]]) -> RolloutBatch:
    """One batch of ``batches``, the groups of batch i renumbered by ``new_groups[i]`` (once each)."""
    steps = RecordedSteps.concatenate([batch.steps.regrouped(new) for batch, new in zip(batches, new_groups)])
    responses = tuple(itertools.chain.from_iterable(batch.responses for batch in batches))
    episodes = tuple(
        dataclasses.replace(e, group=new(e.group)) for batch, new in zip(batches, new_groups) for e in batch.episodes
    )
    return RolloutBatch(steps, responses, episodes)


def merge_host_batches(batches: Sequence[RolloutBatch]) -> RolloutBatch:
    """One batch from the batches every host played for its share of a plan.

    Host ``h`` of ``H`` played the plan's groups ``h, h + H, h + 2H, ...`` (``multihost.host_share``) as
    its groups ``0, 1, 2, ...``; the merged batch numbers them back to their place in the plan.
    """
    hosts = len(batches)
    return _renumbered(batches, [lambda group, host=host: host + group * hosts for host in range(hosts)])


def merge_passes(batches: Sequence[RolloutBatch]) -> RolloutBatch:
    """One batch from consecutive passes over disjoint task lists (their groups numbered on)."""
    if len(batches) == 1:
        return batches[0]
    offsets = np.cumsum([0] + [1 + max((e.group for e in batch.episodes), default=-1) for batch in batches[:-1]])
    return _renumbered(batches, [lambda group, offset=int(offset): group + offset for offset in offsets])


def play_turn(
    pool: EnvPool,
    policy: Policy,
    indices: Sequence[int],
    current: Sequence[StepResult],
    history: Sequence[Sequence[HistoryEntry]],
    *,
    env: str,
    history_length: int,
    temperature: float,
    seed: int,
) -> tuple[list[PolicyResponse], list[str], list[bool], list[EnvReply]]:
    """One lockstep turn of envs ``indices``: their prompts, the policy's answers, the projected actions
    with their validity, and the pool's step replies."""
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
    responses = policy.generate(prompts, temperature=temperature, seed=seed)
    actions, valids = project_actions([r.text for r in responses], env)
    return responses, actions, valids, pool.step(actions, env_indices=indices)


@dataclasses.dataclass
class Lanes:
    """The lockstep loop's per-env lists, list[i] for env i (rollout ``i % group_size`` of group
    ``i // group_size``), and the steps recorded so far; ``play_and_record`` updates them in place."""

    group_size: int
    current: list  # each env's last StepResult (None before it starts)
    history: list[list[HistoryEntry]]
    steps: list[int]
    won: list[bool]
    score: list[float]
    aborted: list[bool]
    active: list[bool]
    recorder: StepRecorder = dataclasses.field(default_factory=StepRecorder)  # interns state keys and actions
    responses: list[PolicyResponse] = dataclasses.field(default_factory=list)  # one per recorded step

    def play_and_record(
        self,
        pool: EnvPool,
        policy: Policy,
        turn: int,
        *,
        env: str,
        history_length: int,
        temperature: float,
        seed: int,
        reward_scale: float,
        on_turn: Callable[[int, int], None] | None,
        step_cap: int | None,
    ) -> bool:
        """Plays turn ``turn`` of the active envs and books it; False, playing nothing, when none is active.

        An aborted reply marks its env aborted and inactive and records nothing; any other records the
        step, keeps its response, extends the history and moves the env on. The env goes inactive when
        its episode is done or, with a ``step_cap``, once it has taken ``step_cap`` steps.
        """
        indices = [i for i, is_active in enumerate(self.active) if is_active]
        if not indices:
            return False
        if on_turn is not None:
            on_turn(turn, len(indices))
        current, history, steps, size = self.current, self.history, self.steps, self.group_size
        responses, actions, valids, replies = play_turn(
            pool, policy, indices, current, history, env=env, history_length=history_length,
            temperature=temperature, seed=(seed + turn) % 2**31,
        )
        for i, response, action, valid, reply in zip(indices, responses, actions, valids, replies):
            if reply.aborted:
                self.aborted[i], self.active[i] = True, False
                continue
            result = reply.result
            self.recorder.record(
                i // size, i % size, steps[i], current[i].state_key, action, result.state_key,
                result.reward * reward_scale, valid, milestone_flag(result.info),
            )
            self.responses.append(response)
            history[i].append(HistoryEntry(current[i].observation, action))
            current[i] = result
            steps[i] += 1
            self.won[i], self.score[i] = result.won, result.score
            if result.done or (step_cap is not None and steps[i] >= step_cap):
                self.active[i] = False
        return True


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
    branching: TreeShape | None = None,
) -> RolloutBatch:
    """Plays every env of ``plan`` to the end (lockstep); ``on_turn(turn, active_envs)`` reports progress.
    With ``branching`` every group grows as a tree of K leaves (``tree_collector.py``)."""
    if branching is not None:
        from milegpo_jax.rollout.tree_collector import collect_tree  # it builds on this module

        return collect_tree(
            pool, policy, plan, branching, env=env, max_steps=max_steps, history_length=history_length,
            temperature=temperature, seed=seed, reward_scale=reward_scale, on_turn=on_turn,
        )
    replies = pool.reset_groups(plan)
    size = plan.group_size
    current = [reply.result for reply in replies]
    task_types = [None if reply.aborted else reply.result.info.get("task_type") for reply in replies]
    aborted = [reply.aborted for reply in replies]
    active = [not reply.aborted for reply in replies]
    n = len(replies)
    lanes = Lanes(size, current, [[] for _ in replies], [0] * n, [False] * n, [0.0] * n, aborted, active)
    for turn in range(max_steps):  # the turn loop is the step cap: every episode started at turn 0
        if not lanes.play_and_record(
            pool, policy, turn, env=env, history_length=history_length, temperature=temperature, seed=seed,
            reward_scale=reward_scale, on_turn=on_turn, step_cap=None,
        ):
            break
    episodes = tuple(
        EpisodeSummary(i // size, i % size, lanes.won[i], lanes.steps[i], aborted[i], lanes.score[i], task_types[i])
        for i in range(n)
    )
    return RolloutBatch(lanes.recorder.finish(), tuple(lanes.responses), episodes)

"""Tree rollouts: the lockstep loop of ``collector.py`` with forks (docs/training.md, "Tree rollouts").

Group g's K leaves are the pool's envs g*K .. g*K+K-1, leaf k on env g*K+k, each env used by one leaf
only. The roots reset; at the start of every turn ``branching.GroupTree`` names the trajectories that
fork, and the pool forks them server-side into the next unused envs of the group
(docs/environments.md §7.1): a fork starts with its parent's observation, history and step count, so
its prompt is the parent's. A group whose trajectories have all ended starts its unspent leaves as new
roots. Every step is recorded once, by the leaf that took it; ``EpisodeSummary.parent`` and
``fork_step`` say which steps a leaf shares (``RolloutBatch.leaves_per_step``).
"""

from __future__ import annotations

from collections.abc import Callable

from envs_bridge.client import EnvPool, EnvReply
from envs_bridge.groups import GroupPlan
from milegpo_jax.rollout.branching import GroupTree, TreeShape
from milegpo_jax.rollout.collector import EpisodeSummary, Lanes, Policy, RolloutBatch
from milegpo_jax.rollout.prompts import HistoryEntry


def collect_tree(
    pool: EnvPool,
    policy: Policy,
    plan: GroupPlan,
    shape: TreeShape,
    *,
    env: str,
    max_steps: int,
    history_length: int,
    temperature: float,
    seed: int,
    reward_scale: float = 1.0,
    on_turn: Callable[[int, int], None] | None = None,
) -> RolloutBatch:
    size = plan.group_size
    if shape.leaves != size:
        raise ValueError(f"a tree group has {shape.leaves} leaves, the plan's groups {size}")
    if plan.num_envs > pool.num_envs:
        raise ValueError(f"plan needs {plan.num_envs} envs, the pool has {pool.num_envs}")
    envs = plan.num_envs
    trees = [GroupTree(shape, max_steps, seed, group) for group in range(plan.num_groups)]
    current: list = [None] * envs
    history: list[list[HistoryEntry]] = [[] for _ in range(envs)]
    started, active, aborted = [False] * envs, [False] * envs, [False] * envs
    won, score, steps = [False] * envs, [0.0] * envs, [0] * envs
    task_types: list = [None] * envs
    parent: list[int | None] = [None] * envs
    fork_step = [0] * envs

    def take(replies: list[EnvReply]) -> None:
        for reply in replies:
            i = reply.env_index
            started[i] = True
            if reply.aborted:
                aborted[i] = True
                continue
            current[i], active[i] = reply.result, not reply.result.done
            task_types[i] = task_types[i] if parent[i] is not None else reply.result.info.get("task_type")

    def start_roots(leaves_of: dict[int, list[int]]) -> None:
        indices = [group * size + leaf for group, leaves in sorted(leaves_of.items()) for leaf in leaves]
        if indices:
            groups = [i // size for i in indices]
            take(pool.reset(plan.split, [plan.task_ids[g] for g in groups], [plan.seeds[g] for g in groups], indices))

    start_roots({group: list(range(shape.roots)) for group in range(plan.num_groups)})
    lanes = Lanes(size, current, history, steps, won, score, aborted, active)  # the same lists, shared
    turn = 0
    while True:
        start_roots({
            group: tree.refill() for group, tree in enumerate(trees)
            if tree.remaining and not any(active[group * size : (group + 1) * size])
        })
        sources, targets = [], []
        for group, tree in enumerate(trees):
            base = group * size
            live = [(k, steps[base + k], current[base + k].state_key) for k in range(size) if active[base + k]]
            new = tree.started  # the group's next unused leaf
            for leaf, count in tree.forks(live):
                for _ in range(count):
                    sources.append(base + leaf)
                    targets.append(base + new)
                    new += 1
        if targets:
            for source, target in zip(sources, targets):
                parent[target], fork_step[target] = source % size, steps[source]
                steps[target], history[target] = steps[source], list(history[source])
                task_types[target], score[target] = task_types[source], score[source]
            take(pool.fork(sources, targets))
        # A fork carries its parent's step count, so each leaf is capped at max_steps of its own.
        if not lanes.play_and_record(
            pool, policy, turn, env=env, history_length=history_length, temperature=temperature, seed=seed,
            reward_scale=reward_scale, on_turn=on_turn, step_cap=max_steps,
        ):
            break
        turn += 1
    episodes = tuple(
        EpisodeSummary(i // size, i % size, won[i], steps[i], aborted[i], score[i], task_types[i], parent[i], fork_step[i])
        for i in range(envs)
        if started[i]
    )
    return RolloutBatch(lanes.recorder.finish(), tuple(lanes.responses), episodes)

"""One arena run: a contestant, a seed and a learning rate, from a uniform table to its last iteration.

A run is a pure function of its settings and seed: the training tasks, every rollout's random stream
and the random control's noise are all derived from the seed (``np.random.SeedSequence``), and the
transition cache never changes what an engine would answer.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from experiments.arena.contestants import Contestant, advantages_and_diagnostics
from experiments.arena.play import Episode, TransitionCache, greedy_chooser, sampling_chooser
from experiments.arena.policy import Decision, TabularPolicy
from milegpo_jax.credit.columns import UNRECORDED, KeyInterner, RolloutColumns
from milegpo_jax.rollout.branching import GroupTree, TreeShape, leaf_rows, leaves_through_steps


@dataclasses.dataclass(frozen=True)
class RunSettings:
    groups: int = 16  # G task groups per iteration
    group_size: int = 8  # K rollouts per group
    tasks: int = 16  # the fixed training task set a seed draws (each iteration samples G of them)
    train_tasks: tuple[int, ...] = ()  # given: every seed's training task set (instead of a draw)
    iterations: int = 20
    update: str = "pg"
    ppo_epochs: int = 4
    clip: float = 0.2
    reward_scale: float = 1.0  # env reward -> credit reward (credit wants 10 on success)
    # Tree groups and the env-step budget (docs/arena.md, "Tree groups"); None: off, and left out of
    # arena.json (``recorded``), so the settings of every earlier arena read as before.
    branching: tuple[int, int, str] | None = None  # (roots, branches, fork_at) of rollout/branching.py
    max_env_steps: int | None = None  # the episode cap, which the uniform fork rule draws depths below
    env_steps: int | None = None  # a run plays until its training rollouts spent this many env steps

    def recorded(self) -> dict:
        return {key: value for key, value in dataclasses.asdict(self).items()
                if value is not None or key not in OPTIONAL_SETTINGS}

    def counts_env_steps(self) -> bool:
        """Whether runs record their env steps (and whether they branched): a default run's record stays as before."""
        return self.branching is not None or self.env_steps is not None

    def more(self, iterations: int, env_steps: int) -> bool:
        """Whether a run that has played ``iterations`` spending ``env_steps`` plays another iteration."""
        return iterations < self.iterations if self.env_steps is None else env_steps < self.env_steps

    def finished(self, record: dict) -> bool:
        return not self.more(len(record["success"]), sum(record.get("env_steps") or [0]))


OPTIONAL_SETTINGS = ("branching", "max_env_steps", "env_steps")


def _streams(seed: int, *path: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([seed, *path])


def training_tasks(num_tasks: int, count: int, seed: int) -> list[int]:
    """The seed's fixed training tasks: ``count`` distinct train task ids (fewer when the split is small)."""
    rng = np.random.default_rng(_streams(seed, 0))
    return sorted(int(t) for t in rng.choice(num_tasks, size=min(count, num_tasks), replace=False))


def episodes_to_columns(episodes: list[Episode], group_size: int, reward_scale: float, interner: KeyInterner) -> RolloutColumns:
    """The credit engine's pre-interned step columns (``credit/columns.py``) of consecutive groups of
    ``group_size`` episodes; ``interner`` keeps the run's state and action codes across iterations."""
    before = [node for episode in episodes for node in episode.nodes[:-1]]
    after = [node for episode in episodes for node in episode.nodes[1:]]
    actions = [action for episode in episodes for action in episode.actions]
    states = interner.many([node.state_key for node in before] + [node.state_key for node in after])
    milestones = [UNRECORDED if node.milestone is None else int(node.milestone) for node in after]
    return RolloutColumns(
        state=states[: len(before)],
        next_state=states[len(before) :],
        action=interner.many(actions),
        reward=np.array([node.reward * reward_scale for node in after], np.float64),
        valid=np.ones(len(after), bool),  # the table only picks admissible actions
        milestone=np.array(milestones, np.int8),
        lengths=np.array([len(episode.actions) for episode in episodes], np.int64),
        group_sizes=np.diff([*range(0, len(episodes), group_size), len(episodes)]),
        state_names=interner.names,
    )


def tree_steps(episodes: list[Episode], group_size: int) -> tuple[np.ndarray, list[tuple[int, int, int]], np.ndarray]:
    """A tree batch's recorded steps, each once, as (group, leaf, t) (a leaf records its steps from its
    fork on), and the library's bookkeeping of them (rollout/branching.py): ``step_of[i]``, the
    recorded step that entry i of ``episodes_to_columns`` (every leaf's whole path) copies, and how many
    leaves pass through each recorded step."""
    recorded = [(i // group_size, i % group_size, t) for i, episode in enumerate(episodes)
                for t in range(episode.fork_step, len(episode.actions))]
    group, leaf, t = (np.array(column, np.int64) for column in zip(*recorded))
    trees: dict[int, dict[int, tuple[int | None, int, int]]] = {}
    for i, episode in enumerate(episodes):
        trees.setdefault(i // group_size, {})[i % group_size] = (episode.parent, episode.fork_step, len(episode.actions))
    kept = {(g, k) for g, tree in trees.items() for k in tree}
    step_of, _ = leaf_rows(group, leaf, t, trees, kept)
    through = np.ones(len(recorded), np.int64)
    for g, tree in trees.items():
        rows = np.flatnonzero(group == g)
        through[rows] = leaves_through_steps(leaf[rows], t[rows], [tree[k][0] for k in sorted(tree)], [tree[k][1] for k in sorted(tree)])
    return step_of, recorded, through


def run_once(
    contestant: Contestant,
    seed: int,
    lr: float,
    settings: RunSettings,
    cache: TransitionCache,
    log: Callable[[int, dict], None],
) -> dict:
    """Trains one table; ``log(iteration, metrics)`` receives every iteration's record."""
    policy = TabularPolicy()
    tasks = list(settings.train_tasks) or training_tasks(cache.backend.num_tasks("train"), settings.tasks, seed)
    timing = {"env_s": 0.0, "credit_s": 0.0, "update_s": 0.0}
    curve = []
    ema = 0.0  # MVPO's success EMA, carried from iteration to iteration (the others ignore it)
    interner = KeyInterner()  # state keys and actions -> codes, once per run
    # Padded (steps, nodes, edges) never shrink within a run: batches of a narrowing policy stay in the shape
    # of the first ones instead of compiling a program for every smaller power-of-two bucket.
    shape = (8, 8, 8)  # build_batch's own minima
    tree = None if settings.branching is None else TreeShape(*settings.branching, settings.group_size)
    counts: dict[str, list[int]] = {"env_steps": [], "forks": [], "shared_steps": []}
    iteration = 0
    while settings.more(iteration, sum(counts["env_steps"])):
        iteration += 1
        pick = np.random.default_rng(_streams(seed, 1, iteration))
        chosen = pick.choice(len(tasks), size=settings.groups, replace=settings.groups > len(tasks))
        task_ids = [tasks[int(i)] for i in chosen for _ in range(settings.group_size)]
        rollout_seeds = [_streams(seed, 2, iteration, r) for r in range(len(task_ids))]

        started = time.perf_counter()
        if tree is None:
            episodes = cache.play(task_ids, sampling_chooser(policy, rollout_seeds))
        else:
            tree_seed = int(_streams(seed, 4, iteration).generate_state(1)[0])
            groups = [GroupTree(tree, settings.max_env_steps, tree_seed, g) for g in range(settings.groups)]
            episodes = cache.play_tree(task_ids, groups, sampling_chooser(policy, rollout_seeds))
        greedy = cache.play(tasks, greedy_chooser(policy))
        timing["env_s"] += time.perf_counter() - started

        started = time.perf_counter()
        columns = episodes_to_columns(episodes, settings.group_size, settings.reward_scale, interner)
        noise = np.random.default_rng(_streams(seed, 3, iteration))
        step_of = None
        if tree is not None:
            step_of, recorded, through = tree_steps(episodes, settings.group_size)
        advantages, diagnostics, ema, shape = advantages_and_diagnostics(contestant, columns, noise, ema, shape, step_of)
        timing["credit_s"] += time.perf_counter() - started

        started = time.perf_counter()
        if tree is None:
            decisions = [
                Decision(before.state_key, before.actions, action, advantage)
                for group_index, group_advantages in enumerate(advantages)
                for k, row in enumerate(group_advantages)
                for before, action, advantage in zip(
                    episodes[group_index * settings.group_size + k].nodes, episodes[group_index * settings.group_size + k].actions, row
                )
            ]
            counts["env_steps"].append(sum(len(episode.actions) for episode in episodes))
        else:  # every recorded step once, with the mean of its leaves' advantages (docs/credit-implementation.md §5)
            decisions = []
            for (g, k, t), advantage in zip(recorded, advantages):
                episode = episodes[g * settings.group_size + k]
                decisions.append(Decision(episode.nodes[t].state_key, episode.nodes[t].actions, episode.actions[t], advantage))
            counts["env_steps"].append(len(recorded))
            counts["forks"].append(sum(episode.parent is not None for episode in episodes))
            counts["shared_steps"].append(int((through > 1).sum()))
        policy.update(decisions, lr, settings.update, settings.ppo_epochs, settings.clip)
        timing["update_s"] += time.perf_counter() - started

        success = float(np.mean([episode.won for episode in episodes]))
        curve.append(success)
        log(
            iteration,
            {
                "success_rate": success,
                "greedy_success_rate": float(np.mean([episode.won for episode in greedy])),
                "mean_steps": float(np.mean([len(episode.actions) for episode in episodes])),
                "policy_states": len(policy),
                **{key: values[-1] for key, values in counts.items() if values},
                "credit": diagnostics,
                "time": dict(timing),
                "env": dataclasses.asdict(cache.stats),
            },
        )
    return {"success": curve, "time": timing, **{key: values for key, values in counts.items() if values}}

"""Group rollouts of the tabular policy on a real environment, with an exact transition cache.

Every arena environment is deterministic given (split, task, action history): TextWorldExpress games are
fixed by their fold seed, ALFWorld games by their file, WebShop goals by their index (docs/arena.md).
So the outcome of an action sequence is cached in a trie per task, and a rollout walks the trie for as
long as its actions were seen before. Only a new (history, action) pair touches the engine: the
rollout's environment slot then has to stand at that history, so a slot that is elsewhere is reset and
the cached prefix replayed first. Results are bit-identical to stepping every rollout live (the cache
only skips work whose answer is known); once the policy settles, most steps are cache hits.

Backends: ``AdapterBackend`` steps adapters in this process (fast); ``PoolBackend`` goes through the
``EnvPool`` env servers (needed for ALFWorld, whose engine lives in its own interpreter).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from envs_bridge.base import StepResult


@dataclasses.dataclass
class Node:
    """What the environment showed after one action history (the root: after reset)."""

    state_key: str
    actions: tuple[str, ...]
    reward: float
    done: bool
    won: bool
    milestone: bool | None = None  # the env's BEACON flag for the step that led here (None: not detected)
    children: dict[str, Node] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, result: StepResult) -> Node:
        flag = result.info.get("milestone_achieved")
        return cls(result.state_key, tuple(result.admissible_actions), float(result.reward), result.done, result.won,
                   None if flag is None else bool(flag))


class AdapterBackend:
    """``num_slots`` in-process adapters built by ``make``; calls run one after another."""

    def __init__(self, make: Callable[[], object], num_slots: int):
        self._make, self._adapters = make, []
        self.ensure(num_slots)

    def ensure(self, num_slots: int) -> None:
        while len(self._adapters) < num_slots:
            self._adapters.append(self._make())

    def num_tasks(self, split: str) -> int:
        return self._adapters[0].num_tasks(split)

    def reset(self, slots: Sequence[int], split: str, task_ids: Sequence[int]) -> list[StepResult]:
        return [self._adapters[slot].reset(split, task_id, 0) for slot, task_id in zip(slots, task_ids)]

    def step(self, slots: Sequence[int], actions: Sequence[str]) -> list[StepResult]:
        return [self._adapters[slot].step(action) for slot, action in zip(slots, actions)]

    def close(self) -> None:
        for adapter in self._adapters:
            adapter.close()
        self._adapters = []


class PoolBackend:
    """Slots are the envs of one ``EnvPool``; a batch goes to all its servers at once."""

    def __init__(self, pool):
        self.pool = pool

    def ensure(self, num_slots: int) -> None:
        if num_slots > self.pool.num_envs:
            raise ValueError(f"the env pool holds {self.pool.num_envs} envs, {num_slots} are needed")

    def num_tasks(self, split: str) -> int:
        return self.pool.num_tasks(split)

    def reset(self, slots: Sequence[int], split: str, task_ids: Sequence[int]) -> list[StepResult]:
        return self._results(self.pool.reset(split, list(task_ids), [0] * len(slots), list(slots)))

    def step(self, slots: Sequence[int], actions: Sequence[str]) -> list[StepResult]:
        return self._results(self.pool.step(list(actions), list(slots)))

    @staticmethod
    def _results(replies) -> list[StepResult]:
        for reply in replies:
            if reply.aborted:  # an arena run is a pure function of its seed: it cannot skip an episode
                raise RuntimeError(f"env {reply.env_index} aborted its episode: {reply.error}")
        return [reply.result for reply in replies]

    def close(self) -> None:
        self.pool.close()


@dataclasses.dataclass
class PlayStats:
    engine_steps: int = 0  # steps the engine ran (new transitions and replays)
    engine_resets: int = 0
    policy_steps: int = 0  # steps the policy took (engine steps minus replays, plus cache hits)
    seconds: float = 0.0


@dataclasses.dataclass
class Episode:
    """One rollout: the nodes it passed (root first) and the actions between them."""

    task_id: int
    nodes: list[Node]
    actions: list[str]
    parent: int | None = None  # a tree group's fork: its parent leaf, and the steps it shares with it
    fork_step: int = 0

    @property
    def won(self) -> bool:
        return self.nodes[-1].won


class TransitionCache:
    """Tries of (split, task id) -> root node; ``play`` runs rollouts through them."""

    def __init__(self, backend, split: str = "train"):
        self.backend, self.split = backend, split
        self.roots: dict[int, Node] = {}
        self.nodes = 0  # states held in the tries
        self.stats = PlayStats()

    def forget_if_over(self, max_nodes: int) -> bool:
        """Drops every trie once they hold more than ``max_nodes`` states: the answers are exact, so
        forgetting costs engine time only, and a long study's worker stays bounded in memory."""
        if self.nodes <= max_nodes:
            return False
        self.roots.clear()
        self.nodes = 0
        return True

    def play(self, task_ids: Sequence[int], choose: Callable[[int, Node], str]) -> list[Episode]:
        """One episode per entry of ``task_ids``; ``choose(rollout, node)`` picks its next action.

        ``choose`` is called exactly once per decision, in each rollout's own order (rollouts are
        interleaved, so it must keep per-rollout state, e.g. one random stream per rollout).
        """
        start = time.perf_counter()
        count = len(task_ids)
        self.backend.ensure(count)
        episodes = [Episode(task_id, [], []) for task_id in task_ids]
        pending: list[str | None] = [None] * count
        slot_node: list[Node | None] = [None] * count  # where each slot's engine stands
        queues: list[list[str | None]] = [[] for _ in range(count)]  # None = reset, else an action
        while True:
            blocked = []
            for r, episode in enumerate(episodes):
                if queues[r]:
                    blocked.append(r)
                    continue
                while True:  # walk the trie as far as it goes
                    if not episode.nodes:
                        root = self.roots.get(episode.task_id)
                        if root is None:
                            break
                        episode.nodes.append(root)
                    node = episode.nodes[-1]
                    if node.done:
                        break
                    if pending[r] is None:
                        if not node.actions:
                            raise RuntimeError(f"task {episode.task_id}: the environment admits no action in {node.state_key[:80]!r}")
                        pending[r] = choose(r, node)
                    child = node.children.get(pending[r])
                    if child is None:
                        break
                    episode.actions.append(pending[r])
                    episode.nodes.append(child)
                    pending[r] = None
                if episode.nodes and episode.nodes[-1].done:
                    continue
                # needs the engine: at this rollout's node (or a reset when the root is unknown)
                if not episode.nodes:
                    queues[r] = [None]
                elif slot_node[r] is episode.nodes[-1]:
                    queues[r] = [pending[r]]
                else:
                    queues[r] = [None, *episode.actions, pending[r]]
                blocked.append(r)
            if not blocked:
                break
            self._advance(blocked, episodes, queues, slot_node)
        self.stats.seconds += time.perf_counter() - start
        self.stats.policy_steps += sum(len(episode.actions) for episode in episodes)
        return episodes

    def play_tree(self, task_ids: Sequence[int], trees: Sequence, choose: Callable[[int, Node], str]) -> list[Episode]:
        """Tree groups (docs/arena.md, "Tree groups"): group g's K leaves are ``task_ids[g*K : g*K+K]``,
        grown by ``trees[g]`` (``milegpo_jax.rollout.branching.GroupTree``: where to fork, and refills) in
        lockstep turns as ``tree_collector.collect_tree`` grows them: refills, then forks, then one step of
        every live leaf. A fork copies its parent's path (the trie's answers are the engine's, so a fork is
        exact); its slot replays that path when the engine is needed. Each leaf's episode is its whole path
        from the root; ``parent``/``fork_step`` say which steps it shares."""
        start = time.perf_counter()
        count, size = len(task_ids), trees[0].shape.leaves
        self.backend.ensure(count)
        episodes = [Episode(task_id, [], []) for task_id in task_ids]
        slot_node: list[Node | None] = [None] * count

        def live(r: int) -> bool:
            return bool(episodes[r].nodes) and not episodes[r].nodes[-1].done

        self._roots([g * size + k for g, tree in enumerate(trees) for k in range(tree.shape.roots)], episodes, slot_node)
        while True:
            refills = []
            for g, tree in enumerate(trees):
                if tree.remaining and not any(live(g * size + k) for k in range(size)):
                    refills += [g * size + k for k in tree.refill()]
            self._roots(refills, episodes, slot_node)
            for g, tree in enumerate(trees):
                base = g * size
                standing = [(k, len(episodes[base + k].actions), episodes[base + k].nodes[-1].state_key)
                            for k in range(size) if live(base + k)]
                new = base + tree.started  # the group's next unused leaf
                for leaf, forks in tree.forks(standing):
                    parent = episodes[base + leaf]
                    for _ in range(forks):
                        episodes[new] = Episode(parent.task_id, list(parent.nodes), list(parent.actions), leaf, len(parent.actions))
                        new += 1
            movers = [r for r in range(count) if live(r)]
            if not movers:
                break
            self._step_once(movers, episodes, slot_node, choose)
        self.stats.seconds += time.perf_counter() - start
        self.stats.policy_steps += sum(len(e.actions) - e.fork_step for e in episodes)
        return episodes

    def _roots(self, leaves: list[int], episodes: list[Episode], slot_node: list) -> None:
        """Starts ``leaves`` at their task's root (a reset where the trie does not know it yet)."""
        queues = {r: [None] for r in leaves if episodes[r].task_id not in self.roots}
        self._drain(queues, episodes, slot_node)
        for r in leaves:
            episodes[r].nodes.append(self.roots[episodes[r].task_id])

    def _step_once(self, movers: list[int], episodes: list[Episode], slot_node: list, choose) -> None:
        """One step of every rollout in ``movers``: from the trie where it knows the answer, else the engine."""
        chosen, queues = {}, {}
        for r in movers:
            episode = episodes[r]
            node = episode.nodes[-1]
            if not node.actions:
                raise RuntimeError(f"task {episode.task_id}: the environment admits no action in {node.state_key[:80]!r}")
            chosen[r] = choose(r, node)
            if chosen[r] not in node.children:
                queues[r] = [chosen[r]] if slot_node[r] is node else [None, *episode.actions, chosen[r]]
        self._drain(queues, episodes, slot_node)
        for r in movers:
            episodes[r].actions.append(chosen[r])
            episodes[r].nodes.append(episodes[r].nodes[-1].children[chosen[r]])

    def _drain(self, queues: dict[int, list], episodes: list[Episode], slot_node: list) -> None:
        while any(queues.values()):
            self._advance([r for r, queue in queues.items() if queue], episodes, queues, slot_node)

    def _advance(self, blocked, episodes, queues, slot_node) -> None:
        """Runs the next queued engine call of every blocked slot (resets batched, then steps)."""
        resets = [r for r in blocked if queues[r][0] is None]
        steps = [r for r in blocked if queues[r][0] is not None]
        if resets:
            results = self.backend.reset(resets, self.split, [episodes[r].task_id for r in resets])
            self.stats.engine_resets += len(resets)
            for r, result in zip(resets, results):
                queues[r].pop(0)
                slot_node[r] = self._known(self.roots, episodes[r].task_id, result)
        if steps:
            actions = [queues[r].pop(0) for r in steps]
            results = self.backend.step(steps, actions)
            self.stats.engine_steps += len(steps)
            for r, action, result in zip(steps, actions, results):
                slot_node[r] = self._known(slot_node[r].children, action, result)

    def _known(self, nodes: dict, key, result: StepResult) -> Node:
        """``nodes[key]``, made from ``result`` the first time (a replayed transition is already there)."""
        if key not in nodes:
            nodes[key] = Node.of(result)
            self.nodes += 1
        return nodes[key]


def sampling_chooser(policy, seeds: Sequence[int | Sequence[int]]) -> Callable[[int, Node], str]:
    """Rollout r samples from ``policy`` with its own stream ``np.random.default_rng(seeds[r])``."""
    streams = [np.random.default_rng(seed) for seed in seeds]
    return lambda r, node: policy.sample(node.state_key, node.actions, streams[r].random())


def greedy_chooser(policy) -> Callable[[int, Node], str]:
    return lambda r, node: policy.greedy(node.state_key, node.actions)

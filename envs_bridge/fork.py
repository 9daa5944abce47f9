"""Forking an episode: a new env instance in exactly the state a running episode is in now
(docs/environments.md §7.1; protocol: envs_bridge/PROTOCOL.md, ``POST /fork``).

Two ways, chosen per engine: an adapter whose episode state is plain Python may copy it
(``EnvAdapter.copy_episode``, WebShop); every other adapter is forked by replay: the fresh instance
resets to the same (split, task id, seed) and takes the parent's actions again. Replay is exact only
for a deterministic engine, so it is checked: the replayed result must equal the parent's last result
field for field, else ``ForkDivergedError`` (a crash of the environment, never a silent wrong state).
The parent is only read, never stepped, so a fork cannot change it.
"""

from __future__ import annotations

import dataclasses

from envs_bridge.base import EnvAdapter, StepResult


@dataclasses.dataclass
class EpisodeRecord:
    """What a replay needs: how the episode started and every action it took since."""

    split: str
    task_id: int
    seed: int
    actions: list[str] = dataclasses.field(default_factory=list)

    def copy(self) -> EpisodeRecord:
        return dataclasses.replace(self, actions=list(self.actions))


class ForkDivergedError(RuntimeError):
    """A replayed fork does not match its parent: the engine is not deterministic."""


def fork_episode(parent: EnvAdapter, child: EnvAdapter, record: EpisodeRecord, last: StepResult) -> StepResult:
    """Puts ``child`` (a fresh adapter with the parent's options) in the parent's current state and
    returns the child's current result, which equals ``last``, the parent's."""
    if parent.copy_episode(child):
        return last
    result = child.reset(record.split, record.task_id, record.seed)
    for action in record.actions:
        result = child.step(action)
    if result.to_json() != last.to_json():
        raise ForkDivergedError(
            f"replaying {len(record.actions)} actions of task {record.task_id} ({record.split}) did not reach "
            f"the parent's state: observation {result.observation[:80]!r} vs {last.observation[:80]!r}"
        )
    return result

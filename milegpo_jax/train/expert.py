"""Expert demonstrations for the supervised warm start, played in-process on training tasks.

For every step of an expert episode (the environment's gold path, ``info["gold_actions"]`` after
``reset``: TextWorldExpress's gold agent seeded with the game seed, WebShop's oracle, ALFWorld's stored
walkthrough, each a pure function of the task, so the same config gives the same demonstrations; see
docs/reproducibility.md) the prompt is exactly what the rollout collector would show at that step (same template and
history window), and the target response is the expert action in the response format the projection
expects: ``<think> ... </think> <action> {action} </action>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from envs_bridge.registry import adapter_class
from milegpo_jax.rollout.prompts import HistoryEntry, build_prompt

RESPONSE_TEMPLATE = "<think> {thought} </think> <action> {action} </action>"


@dataclasses.dataclass(frozen=True)
class Demonstration:
    prompt: str  # the user message
    response: str  # the target assistant message
    observation: str
    action: str


def expert_response(action: str) -> str:
    return RESPONSE_TEMPLATE.format(thought=f"the next step is to {action}", action=action)


def expert_episodes(
    env: str,
    env_options: dict[str, Any],
    split: str,
    task_ids: Sequence[int],
    *,
    history_length: int,
    seed: int = 0,
) -> Iterator[list[Demonstration]]:
    """Yields one list of demonstrations per task: the gold path replayed step by step."""
    adapter = adapter_class(env)(**env_options)
    try:
        for task_id in task_ids:
            result = adapter.reset(split, task_id, seed)
            gold = list(result.info.get("gold_actions") or [])
            if not gold:
                raise ValueError(f"{env} gives no gold path for {split} task {task_id}")
            history: list[HistoryEntry] = []
            episode = []
            for action in gold:
                prompt = build_prompt(
                    env, result.observation, result.admissible_actions, task=result.task,
                    history=history[-history_length:] if history_length > 0 else (), history_length=history_length,
                )
                episode.append(Demonstration(prompt, expert_response(action), result.observation, action))
                history.append(HistoryEntry(result.observation, action))
                result = adapter.step(action)
                if result.done:
                    break
            yield episode
    finally:
        adapter.close()

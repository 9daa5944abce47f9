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


def _prompt(env: str, result, history: Sequence[HistoryEntry], history_length: int) -> str:
    return build_prompt(
        env, result.observation, result.admissible_actions, task=result.task,
        history=history[-history_length:] if history_length > 0 else (), history_length=history_length,
    )


def expert_episodes(
    env: str,
    env_options: dict[str, Any],
    split: str,
    task_ids: Sequence[int],
    *,
    history_length: int,
    seed: int = 0,
    skip_repeated_prompts: bool = False,
) -> Iterator[list[Demonstration]]:
    """Yields one list of demonstrations per task: the gold path replayed step by step.

    ``skip_repeated_prompts`` leaves out a step after which the collector's prompt is the same as
    before it (TextWorldExpress's gold paths open with "look around", which shows the first
    observation again). With no history in the prompt, such a step and the next one are two targets
    for one prompt, and the warm start learns to repeat the no-op (docs/training.md §5)."""
    adapter = adapter_class(env)(**env_options)
    try:
        for task_id in task_ids:
            result = adapter.reset(split, task_id, seed)
            gold = list(result.info.get("gold_actions") or [])
            if not gold:
                raise ValueError(f"{env} gives no gold path for {split} task {task_id}")
            history: list[HistoryEntry] = []
            episode = []
            prompt = _prompt(env, result, history, history_length)
            for action in gold:
                demonstration = Demonstration(prompt, expert_response(action), result.observation, action)
                history.append(HistoryEntry(result.observation, action))
                result = adapter.step(action)
                next_prompt = _prompt(env, result, history, history_length)
                if not (skip_repeated_prompts and next_prompt == prompt and not result.done):
                    episode.append(demonstration)
                prompt = next_prompt
                if result.done:
                    break
            yield episode
    finally:
        adapter.close()

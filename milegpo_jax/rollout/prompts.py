"""Per-step prompts and the action projection (docs/environments.md §6.1-6.2; structure of verl-agent's).

Every step sends one user message built fresh from a template; the conversation is not accumulated.
The first step of an episode uses the no-history template; later steps name the task, how many steps
were taken, the last ``history_length`` (default 2) observation/action pairs as
``[Observation k: '...', Action k: '...']`` (k counts from 1 over the whole episode), the step number and
the current observation. Each history entry holds the observation the agent acted on (as the prompt
showed it) and the projected action it took there.

The projection turns an LLM response into the env action and a validity flag: the lower-cased text
between the first ``<action>`` and the first ``</action>``, stripped; without both tags the last
``action_tail_chars`` of the env's spec (``envs_bridge.specs``: 30 for ALFWorld and TextWorldExpress,
20 for WebShop) characters of the lower-cased response go to the env and the step is invalid; it is also invalid without ``<think>`` and ``</think>`` (looked up in the
response as written) or with CJK characters (U+4E00-U+9FFF). Admissibility is not checked: the env
answers an inadmissible command itself (e.g. ALFWorld's "Nothing happens.").
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence

from envs_bridge.specs import EnvSpec, UnknownEnvError, env_spec

HISTORY_LENGTH = 2
WEBSHOP_MAX_PROMPT_CHARS = 13_000  # longer history prompts fall back to the no-history template

_CJK = re.compile(r"[\u4e00-\u9fff]")
_ALFWORLD_TASK_MARKER = "Your task is to: "
_SEP = " [SEP] "


@dataclasses.dataclass(frozen=True)
class HistoryEntry:
    observation: str  # the observation the action was taken in, as the prompt showed it
    action: str  # the projected action sent to the env


# ------------------------------------------------------------------------------------------- prompts

_THINK_THEN_ACT = (
    "Now it is your turn to act.\n"
    "First think step by step about the current situation; this reasoning MUST be enclosed in <think> </think> tags.\n"
    "Then pick one admissible action for this step and write it inside <action> </action> tags.\n"
)

_ALFWORLD_OPENING = "You are an expert agent acting in the ALFRED embodied household environment."

ALFWORLD_TEMPLATE_NO_HISTORY = (
    _ALFWORLD_OPENING + "\n"
    "Your current observation is: {current_observation}\n"
    "Your admissible actions in the current situation are: [{admissible_actions}].\n\n" + _THINK_THEN_ACT
)

ALFWORLD_TEMPLATE = (
    _ALFWORLD_OPENING + " Your task is to: {task_description}\n"
    "Before this step you have already taken {step_count} step(s). Here are the most recent {history_length} "
    "observations and the actions you took in them: {action_history}\n"
    "You are now at step {current_step} and your current observation is: {current_observation}\n"
    "Your admissible actions in the current situation are: [{admissible_actions}].\n\n" + _THINK_THEN_ACT
)

_WEBSHOP_OPENING = "You are an expert autonomous shopping agent acting in the WebShop e-commerce environment."
_WEBSHOP_INSTRUCTION = (
    "Now it is your turn to act.\n"
    "First think step by step about the current situation and about which admissible action brings you closest "
    "to the shopping goal; this reasoning MUST be enclosed in <think> </think> tags.\n"
    "Then pick one admissible action for this step and write it inside <action> </action> tags.\n"
)

WEBSHOP_TEMPLATE_NO_HISTORY = (
    _WEBSHOP_OPENING + "\n"
    "Your task is to: {task_description}.\n"
    "Your current observation is: {current_observation}.\n"
    "Your admissible actions in the current situation are:\n[\n{available_actions}\n].\n\n" + _WEBSHOP_INSTRUCTION
)

WEBSHOP_TEMPLATE = (
    _WEBSHOP_OPENING + "\n"
    "Your task is to: {task_description}.\n"
    "Before this step you have already taken {step_count} step(s). Here are the most recent {history_length} "
    "observations and the actions you took in them: {action_history}\n"
    "You are now at step {current_step} and your current observation is: {current_observation}.\n"
    "Your admissible actions in the current situation are:\n[\n{available_actions}\n].\n\n" + _WEBSHOP_INSTRUCTION
)

_TWX_OPENING = "You are an expert agent playing a text adventure game."

TEXTWORLD_EXPRESS_TEMPLATE_NO_HISTORY = (
    _TWX_OPENING + " Your task is: {task_description}\n"
    "Your current observation is: {current_observation}\n"
    "Your admissible actions in the current situation are: [{admissible_actions}].\n\n" + _THINK_THEN_ACT
)

TEXTWORLD_EXPRESS_TEMPLATE = (
    _TWX_OPENING + " Your task is: {task_description}\n"
    "Before this step you have already taken {step_count} step(s). Here are the most recent {history_length} "
    "observations and the actions you took in them: {action_history}\n"
    "You are now at step {current_step} and your current observation is: {current_observation}\n"
    "Your admissible actions in the current situation are: [{admissible_actions}].\n\n" + _THINK_THEN_ACT
)


def format_history(history: Sequence[HistoryEntry], history_length: int = HISTORY_LENGTH) -> tuple[str, int]:
    """The last ``history_length`` entries as ``[Observation k: '...', Action k: '...']`` lines, and how many."""
    recent = list(history[-history_length:]) if history_length > 0 else []
    first = len(history) - len(recent) + 1
    lines = [
        f"[Observation {first + offset}: '{entry.observation}', Action {first + offset}: '{entry.action}']"
        for offset, entry in enumerate(recent)
    ]
    return "\n".join(lines), len(recent)


def format_admissible_actions(actions: Sequence[str]) -> str:
    """ALFWorld / TextWorldExpress list: each action quoted, ``help`` left out, joined by newline + space."""
    return "\n ".join(f"'{action}'" for action in actions if action != "help")


def webshop_actions(has_search_bar: bool, clickables: Sequence[str]) -> list[str]:
    """WebShop's available actions as action strings: ``search[<your query>]`` and ``click[...]``."""
    return (["search[<your query>]"] if has_search_bar else []) + [f"click[{value}]" for value in clickables]


def format_webshop_actions(actions: Sequence[str]) -> str:
    return "\n".join(f"'{action}'," for action in actions)


def extract_alfworld_task(first_observation: str) -> str:
    """The task sentence of ALFWorld's first observation (the text after ``Your task is to: ``)."""
    start = first_observation.find(_ALFWORLD_TASK_MARKER)
    if start == -1:
        raise ValueError("no 'Your task is to: ' in the observation: pass the episode's first observation")
    return first_observation[start + len(_ALFWORLD_TASK_MARKER):].strip()


def extract_webshop_task(raw_observation: str) -> str:
    """The instruction of a WebShop page ``WebShop [SEP] Instruction: [SEP] <task> [SEP] ...``."""
    parts = raw_observation.split(_SEP)
    if len(parts) < 3 or parts[1] != "Instruction:":
        raise ValueError("not a WebShop observation with an 'Instruction:' part")
    return parts[2]


def format_webshop_observation(raw_observation: str, task: str) -> str:
    """The page text after the instruction, each part quoted and joined by `` [SEP] ``; unchanged if the
    instruction is not on the page."""
    parts = raw_observation.split(_SEP)
    if task not in parts:
        return raw_observation
    return _SEP.join(f"'{part}'" for part in parts[parts.index(task) + 1:])


def _history_fields(history: Sequence[HistoryEntry], history_length: int) -> dict:
    text, shown = format_history(history, history_length)
    return {
        "step_count": len(history),
        "history_length": shown,
        "action_history": text,
        "current_step": len(history) + 1,
    }


def alfworld_prompt(
    observation: str,
    admissible_actions: Sequence[str],
    *,
    task: str,
    history: Sequence[HistoryEntry] = (),
    history_length: int = HISTORY_LENGTH,
) -> str:
    actions = format_admissible_actions(admissible_actions)
    if not history or history_length <= 0:
        return ALFWORLD_TEMPLATE_NO_HISTORY.format(current_observation=observation, admissible_actions=actions)
    return ALFWORLD_TEMPLATE.format(
        task_description=task,
        current_observation=observation,
        admissible_actions=actions,
        **_history_fields(history, history_length),
    )


def webshop_prompt(
    observation: str,
    available_actions: Sequence[str],
    *,
    task: str,
    history: Sequence[HistoryEntry] = (),
    history_length: int = HISTORY_LENGTH,
    max_prompt_chars: int = WEBSHOP_MAX_PROMPT_CHARS,
) -> str:
    """``available_actions`` as action strings (see ``webshop_actions``); ``observation`` formatted by
    ``format_webshop_observation``."""
    actions = format_webshop_actions(available_actions)
    no_history = WEBSHOP_TEMPLATE_NO_HISTORY.format(
        task_description=task, current_observation=observation, available_actions=actions
    )
    if not history or history_length <= 0:
        return no_history
    prompt = WEBSHOP_TEMPLATE.format(
        task_description=task,
        current_observation=observation,
        available_actions=actions,
        **_history_fields(history, history_length),
    )
    return no_history if len(prompt) > max_prompt_chars else prompt


def textworld_express_prompt(
    observation: str,
    admissible_actions: Sequence[str],
    *,
    task: str,
    history: Sequence[HistoryEntry] = (),
    history_length: int = HISTORY_LENGTH,
) -> str:
    """TWX shows the task apart from the observation, so both templates state it."""
    actions = format_admissible_actions(admissible_actions)
    if not history or history_length <= 0:
        return TEXTWORLD_EXPRESS_TEMPLATE_NO_HISTORY.format(
            task_description=task, current_observation=observation, admissible_actions=actions
        )
    return TEXTWORLD_EXPRESS_TEMPLATE.format(
        task_description=task,
        current_observation=observation,
        admissible_actions=actions,
        **_history_fields(history, history_length),
    )


def build_prompt(
    env: str,
    observation: str,
    admissible_actions: Sequence[str],
    *,
    task: str,
    history: Sequence[HistoryEntry] = (),
    history_length: int = HISTORY_LENGTH,
) -> str:
    """Dispatches to the env's prompt builder (its spec's; ``admissible_actions`` as the env lists them)."""
    builder: Callable[..., str] = _spec(env, "prompt template").prompt_function()
    return builder(observation, admissible_actions, task=task, history=history, history_length=history_length)


@functools.lru_cache(maxsize=None)
def _spec(env: str, what: str) -> EnvSpec:
    try:
        return env_spec(env)
    except UnknownEnvError as error:
        raise ValueError(f"no {what} for env {env!r}: {error}") from None


# ---------------------------------------------------------------------------------------- projection


def project_action(response: str, env: str) -> tuple[str, bool]:
    """(env action, format-valid) for one LLM response; see the module docstring for the rules."""
    tail_chars = _spec(env, "projection rule").action_tail_chars
    lowered = response.lower()
    start = lowered.find("<action>")
    end = lowered.find("</action>")
    if start == -1 or end == -1:
        return lowered[-tail_chars:], False
    # As in verl-agent: a "</action>" before the first "<action>" slices to the empty action, still valid.
    action = lowered[start + len("<action>"):end].strip()
    valid = "<think>" in response and "</think>" in response and not _CJK.search(response)
    return action, valid


def project_actions(responses: Sequence[str], env: str) -> tuple[list[str], list[bool]]:
    projected = [project_action(response, env) for response in responses]
    return [action for action, _ in projected], [valid for _, valid in projected]

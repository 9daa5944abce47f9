"""ALFWorld's text engine exactly as ALFWorld assembles it (docs/environments.md §4.2).

``PddlEnv`` (TextWorld) runs a ``game.tw-pddl``: Fast Downward grounds the PDDL problem, ALFWorld's
grammar renders every feedback string. ``AlfredDemangler`` names entities the way ALFWorld shows them
(``Apple_bar__plus_01_dot_00...`` -> ``apple 1``), ``AlfredInfos`` adds ``extra.gamefile``, and
``AlfredExpert`` (optional) adds the hand-coded expert's or the planner's next action as
``extra.expert_plan``. Only ``won`` and ``admissible_commands`` are requested: asking for
``policy_commands`` or ``facts`` replans or lists every fact on each step (10-100x slower).

One process-wide lock, ``ENGINE_LOCK``, serialises every engine call (load, reset, step) across the
threads an env server runs its envs on: Fast Downward's translator keeps its options in module globals
and swaps ``sys.stdout`` while it runs, and TextWorld renders all feedback and commands through one
module-level grammar parser (tatsu), whose parse state is not thread-safe ("IndexError: list index out of
range" under concurrent steps). The engine is pure Python under the GIL, so the lock costs little; env
servers get their parallelism from processes. Each ``PddlEnv`` loads its own copy of Fast Downward's
library, so the C state is per env.
"""

from __future__ import annotations

import threading

import textworld
from alfworld.agents.environment.alfred_tw_env import (
    AlfredDemangler,
    AlfredExpert,
    AlfredInfos,
)
from textworld.envs import PddlEnv

ENGINE_LOCK = threading.Lock()


def alfworld_env(expert_type: str | None = None) -> textworld.core.Wrapper:
    """``PddlEnv`` wrapped as ALFWorld wraps it; ``expert_type`` "handcoded" or "planner" adds the expert."""
    env = PddlEnv(textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"]))
    env = AlfredInfos(AlfredDemangler(env, shuffle=False))
    if expert_type is not None:
        env = AlfredExpert(env, expert_type=expert_type)
    return env

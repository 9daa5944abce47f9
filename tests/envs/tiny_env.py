"""A tiny environment added the way docs/environments.md §9 says: one ``EnvSpec`` plus its adapter.

Task ``n`` of every split asks to count up to ``n + 1`` by answering ``up``; ``down`` steps back. The
state key is the count, so K rollouts of a group share states. Reached by ``$MILEGPO_ENV_SPECS``.
"""

from __future__ import annotations

from envs_bridge.base import EnvAdapter, EnvError, StepResult, check_split
from envs_bridge.specs import EnvSpec

ENV_SPEC = EnvSpec(
    name="tiny_counter",
    adapter="tests.envs.tiny_env:TinyCounterAdapter",
    install_hint="nothing to install: it is part of the tests",
    adapter_options=("tasks",),
    prompt_builder="milegpo_jax.rollout.prompts:textworld_express_prompt",
    action_tail_chars=4,
    reward_scale=10.0,
    credit_recipe="alfworld",
)


class TinyCounterAdapter(EnvAdapter):
    name = "tiny_counter"

    def __init__(self, tasks: int = 3, max_steps: int = 5):
        self.tasks, self.max_steps = tasks, max_steps
        self._goal = self._count = self._steps = 0

    def num_tasks(self, split: str) -> int:
        check_split(split)
        return self.tasks

    def _result(self, reward: float = 0.0) -> StepResult:
        won = self._count == self._goal
        return StepResult(f"The counter shows {self._count}.", ("up", "down"), reward, won or self._steps >= self.max_steps,
                          won, float(won), f"count to {self._goal}", f"count={self._count}")

    def reset(self, split: str, task_id: int, seed: int) -> StepResult:
        if not 0 <= task_id < self.num_tasks(split):
            raise EnvError(f"task id {task_id} is out of range")
        self._goal, self._count, self._steps = task_id + 1, 0, 0
        return self._result()

    def step(self, action: str) -> StepResult:
        self._steps += 1
        self._count += {"up": 1, "down": -1}.get(action, 0)
        return self._result(1.0 if self._count == self._goal else 0.0)

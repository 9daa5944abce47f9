"""The arena's learner: a tabular softmax policy over the admissible actions of each state key.

Pure NumPy maths, no I/O. One logit per (state key, action string), created at 0 on first sight, so a
fresh table is the uniform policy over whatever the environment admits. Sampling uses one uniform
draw per decision from the caller's generator (inverse CDF), which makes a rollout a function of its
own random stream only, whatever order rollouts are stepped in.

The update is a policy-gradient step on each step row ``(state, admissible actions, action,
advantage)``. The gradient of a state's logits is averaged over that state's rows, i.e. every state
moves at the same rate however often it was visited (a per-state preconditioner; an LLM trained with
Adam gets a comparable normalisation). ``pg``: theta_s += lr * mean_r A_r (e_{a_r} - pi_s). ``ppo``:
``epochs`` steps on the clipped surrogate min(rho A, clip(rho, 1-eps, 1+eps) A), rho = pi/pi_old, whose
gradient is 0 for rows the clip holds and A rho (e_a - pi) otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

UPDATES = ("pg", "ppo")


@dataclasses.dataclass(frozen=True)
class Decision:
    """One step row for the update: the state, what it admitted, what was taken, its advantage."""

    state: str
    actions: tuple[str, ...]
    action: str
    advantage: float


class TabularPolicy:
    """Logits per state key; ``probabilities`` creates missing entries (uniform) as it meets them."""

    def __init__(self) -> None:
        self._index: dict[str, dict[str, int]] = {}  # state -> action -> position in its logit vector
        self._logits: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._logits)

    def positions(self, state: str, actions: Sequence[str]) -> np.ndarray:
        index = self._index.setdefault(state, {})
        fresh = [action for action in actions if action not in index]
        if fresh or state not in self._logits:
            for action in fresh:
                index[action] = len(index)
            old = self._logits.get(state, np.zeros(0))
            self._logits[state] = np.concatenate([old, np.zeros(len(index) - old.size)])
        return np.fromiter((index[action] for action in actions), np.int64, len(actions))

    def probabilities(self, state: str, actions: Sequence[str]) -> np.ndarray:
        return softmax(self._logits_of(state, actions))

    def sample(self, state: str, actions: Sequence[str], uniform: float) -> str:
        """The action whose CDF interval holds ``uniform`` (a draw in [0, 1))."""
        cdf = np.cumsum(self.probabilities(state, actions))
        return actions[min(int(np.searchsorted(cdf, uniform * cdf[-1], side="right")), len(actions) - 1)]

    def greedy(self, state: str, actions: Sequence[str]) -> str:
        """The most likely action; ties go to the first in the environment's order."""
        return actions[int(np.argmax(self._logits_of(state, actions)))]

    def _logits_of(self, state: str, actions: Sequence[str]) -> np.ndarray:
        if not actions:
            return np.zeros(0)
        positions = self.positions(state, actions)  # creates the entry before it is read
        return self._logits[state][positions]

    def update(self, decisions: Sequence[Decision], lr: float, method: str = "pg", epochs: int = 4, clip: float = 0.2) -> None:
        """One policy-gradient (``pg``) or PPO-clip (``ppo``) update from one iteration's rows."""
        if method not in UPDATES:
            raise ValueError(f"unknown update {method!r}: choose one of {', '.join(UPDATES)}")
        grouped: dict[str, tuple[list, list, list]] = {}
        for decision in decisions:
            positions = self.positions(decision.state, decision.actions)
            admitted, taken, advantage = grouped.setdefault(decision.state, ([], [], []))
            admitted.append(positions)
            taken.append(int(positions[decision.actions.index(decision.action)]))
            advantage.append(float(decision.advantage))
        for state, (admitted, taken, advantage) in grouped.items():
            rows = StateRows(tuple(admitted), np.asarray(taken, np.int64), np.asarray(advantage, np.float64))
            self._logits[state] = state_update(
                self._logits[state], rows, lr, epochs=epochs if method == "ppo" else 0, clip=clip
            )


def softmax(logits: np.ndarray) -> np.ndarray:
    if logits.size == 0:
        return logits
    shifted = np.exp(logits - logits.max())
    return shifted / shifted.sum()


@dataclasses.dataclass(frozen=True)
class StateRows:
    """All rows of one state: per row the logit positions it admitted, its action's position, A."""

    admitted: tuple[np.ndarray, ...]
    taken: np.ndarray  # int [rows]
    advantage: np.ndarray  # float [rows]


def state_update(logits: np.ndarray, rows: StateRows, lr: float, *, epochs: int, clip: float) -> np.ndarray:
    """New logits of one state. ``epochs=0``: plain PG; ``epochs>0``: that many PPO-clip steps."""
    by_admitted: dict[bytes, tuple[np.ndarray, list[int]]] = {}  # rows of one state mostly share one set
    for r, admitted in enumerate(rows.admitted):
        by_admitted.setdefault(admitted.tobytes(), (admitted, []))[1].append(r)
    blocks = [(admitted, np.asarray(members)) for admitted, members in by_admitted.values()]
    old_logp = _row_logprobs(logits, rows, blocks)
    updated = logits.copy()
    for _ in range(max(epochs, 1)):
        weight = rows.advantage
        if epochs:
            ratio = np.exp(_row_logprobs(updated, rows, blocks) - old_logp)
            held = ((rows.advantage > 0) & (ratio > 1 + clip)) | ((rows.advantage < 0) & (ratio < 1 - clip))
            weight = np.where(held, 0.0, rows.advantage * ratio)
        grad = np.zeros_like(updated)
        for admitted, members in blocks:
            grad[admitted] -= weight[members].sum() * softmax(updated[admitted])
            np.add.at(grad, rows.taken[members], weight[members])
        updated = updated + lr * grad / len(rows.taken)
    return updated


def _row_logprobs(logits: np.ndarray, rows: StateRows, blocks) -> np.ndarray:
    out = np.empty(len(rows.taken))
    for admitted, members in blocks:
        local = logits[admitted]
        top = local.max()
        out[members] = logits[rows.taken[members]] - top - np.log(np.exp(local - top).sum())
    return out

"""Seeded generator of ALFWorld-like rollout groups, for benchmarks, examples and tests.

Each group is one *task*: a random directed state graph over ``num_states`` readable state keys
(``"task3/kitchen/at:fridge 1/holding:apple 1/open"``) in one room. It has

* a *task chain* from the start state to a goal-adjacent state, whose goal action ("put apple 1 in/on
  fridge 1") ends the episode with reward 10; every state sits on a progress level of that chain;
* extra edges within and between neighbouring levels and back to earlier ones, so walks revisit states
  and close loops;
* a few dead-end *trap regions* (small cycles with no way out, like an irreversibly sliced object);
* "Nothing happens." answers: an invalid-format response (``valid=False``) or an inadmissible but
  well-formatted command (``valid=True``) leaves the state key unchanged, i.e. a self-loop.

All K rollouts of a group start from the same start state. Every rollout draws a latent competence (the
chance of being competent is drawn per group from ``success_rate``): a competent rollout walks towards
the goal with a strong bias, an incompetent one wanders with a weak bias and never takes the goal action,
as when the agent puts the object in the wrong receptacle. A rollout that reaches the goal gets reward 10
on that last step and stops; any other is cut at ``max_steps`` with reward 0 (docs/credit.md §1.2, docs/environments.md §6.3).

Command line (writes the bundled example file)::

    python -m milegpo_jax.credit.testing.synthetic --out experiments/data/example_rollouts.json --preset small
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from milegpo_jax.credit.rollouts import Group, Step, Trajectory, rollouts_to_json

GOAL_REWARD = 10.0

# The smallest graph with room for a task chain, a side state and a trap region.
MIN_STATES = 8

# The policy's preference for an action is exp(-bias * hops from its target to the goal).
COMPETENT_BIAS = 2.0
INCOMPETENT_BIAS = 0.25
# Chance that a valid response names a command that is not admissible ("Nothing happens.").
INADMISSIBLE_RATE = 0.04
# Graph shape, tuned so that the default 16 x 8 x 50 batch visits 60-100 states per group with loops
# (tests/credit/test_synthetic.py): out-degree range of a room state, the share of extra edges that jump
# back to an earlier progress level, and how many room states lead into each trap region.
DEGREE_RANGE = (3, 6)
BACK_EDGE_RATE = 0.2
TRAP_ENTRIES = 2

# Per room: receptacle kinds with how many numbered instances, and the objects a task is about.
_ROOMS = {
    "kitchen": (
        (("cabinet", 6), ("drawer", 4), ("countertop", 3), ("stoveburner", 4), ("fridge", 1),
         ("microwave", 1), ("sinkbasin", 1), ("garbagecan", 1), ("coffeemachine", 1), ("toaster", 1),
         ("diningtable", 1), ("shelf", 2)),
        ("apple", "egg", "mug", "bowl", "potato", "tomato", "knife", "plate", "lettuce", "bread", "pan"),
    ),
    "bedroom": (
        (("drawer", 6), ("shelf", 4), ("bed", 1), ("desk", 2), ("dresser", 1), ("sidetable", 2),
         ("garbagecan", 1), ("safe", 1), ("laundryhamper", 1), ("armchair", 1)),
        ("book", "cellphone", "pillow", "keychain", "pen", "cd", "alarmclock", "creditcard", "desklamp"),
    ),
    "bathroom": (
        (("cabinet", 4), ("countertop", 1), ("sinkbasin", 2), ("toilet", 1), ("bathtubbasin", 1),
         ("towelholder", 2), ("handtowelholder", 1), ("shelf", 3), ("garbagecan", 1), ("drawer", 4)),
        ("soapbar", "toiletpaper", "spraybottle", "candle", "cloth", "towel", "soapbottle", "handtowel"),
    ),
    "livingroom": (
        (("sofa", 1), ("armchair", 2), ("coffeetable", 1), ("sidetable", 3), ("drawer", 5), ("shelf", 5),
         ("tvstand", 1), ("cabinet", 3), ("garbagecan", 1), ("dresser", 1)),
        ("remotecontrol", "newspaper", "vase", "statue", "box", "laptop", "watch", "creditcard", "pillow"),
    ),
}
_STATUSES = ("closed", "open", "clean", "heated", "cooled", "examined")
_TRAP_STATUSES = ("sliced", "broken", "dropped", "locked")
# The command that brings an object or receptacle into a status.
_STATUS_VERBS = {
    "closed": "close", "open": "open", "clean": "clean", "heated": "heat", "cooled": "cool",
    "examined": "examine", "sliced": "slice", "broken": "drop", "dropped": "drop", "locked": "close",
    "looking around": "look at",
}
# What reaches the environment when a response has no <action> tags: the last 30 characters (docs/environments.md §6.2).
_GARBLED = (
    "i should go to the countertop ",
    "ake the apple from the fridge.",
    "</think> go to cabinet 2 and o",
    "o find the object, i will look",
    "<action>open the drawer 3 and ",
    "the task is done. let me check",
)
_INADMISSIBLE_VERBS = ("take", "open", "use", "toggle", "slice")


@dataclasses.dataclass(frozen=True)
class _Place:
    receptacle: str
    holding: str  # "nothing" or an object instance
    status: str


@dataclasses.dataclass(frozen=True)
class _Task:
    keys: tuple[str, ...]
    edges: tuple[tuple[tuple[str, int], ...], ...]  # per state: (action text, target state)
    goal_state: int  # the state whose goal action ends the episode
    goal_action: str
    goal_key: str
    hops_to_goal: np.ndarray  # float, inf where the goal cannot be reached (trap regions)
    inadmissible: tuple[str, ...]  # well-formatted commands no state admits


@dataclasses.dataclass(frozen=True)
class _Layout:
    chain_length: int
    trap_regions: tuple[int, ...]  # sizes


def _layout(rng: np.random.Generator, num_states: int, max_steps: int) -> _Layout:
    # The shortest solution must fit comfortably into max_steps, as real ALFWorld tasks do (5-15 steps).
    chain_length = int(np.clip(max_steps // 4, 2, 10))
    chain_length = min(chain_length, num_states // 2 - 1)
    trap_budget = max(3, num_states // 8)
    regions = []
    while trap_budget >= 3 and len(regions) < 3:
        size = int(rng.integers(3, 6))
        size = min(size, trap_budget)
        regions.append(size)
        trap_budget -= size
    return _Layout(chain_length=chain_length, trap_regions=tuple(regions))


def _places(rng: np.random.Generator, room: str, count: int, trap: bool) -> list[_Place]:
    kinds, objects = _ROOMS[room]
    receptacles = [f"{kind} {i}" for kind, n in kinds for i in range(1, n + 1)]
    held = ["nothing"] + [f"{obj} 1" for obj in objects[:4]]
    statuses = _TRAP_STATUSES if trap else _STATUSES
    combos = [(r, h, s) for r in receptacles for h in held for s in statuses]
    if count > len(combos):
        raise ValueError(
            f"num_states too large: {count} exceeds the {len(combos)} distinct places of a {room} task"
        )
    chosen = rng.choice(len(combos), size=count, replace=False)
    return [_Place(*combos[i]) for i in chosen]


def _action_text(source: _Place, target: _Place, used: set[str]) -> str:
    candidates = []
    if target.receptacle != source.receptacle:
        candidates.append(f"go to {target.receptacle}")
    if target.holding != source.holding:
        if source.holding == "nothing":
            candidates.append(f"take {target.holding} from {source.receptacle}")
        else:
            candidates.append(f"put {source.holding} in/on {source.receptacle}")
    if target.status != source.status:
        obj = source.holding if source.holding != "nothing" else source.receptacle
        candidates.append(f"{_STATUS_VERBS[target.status]} {obj}")
    candidates += [f"examine {target.receptacle}", f"go to {target.receptacle}", "look", "inventory"]
    for text in candidates:
        if text not in used:
            return text
    # Only hit on dense small graphs; the credit engine keys on states, so a repeated text is harmless.
    return candidates[0]


def _hops_to(goal_state: int, targets: Sequence[Sequence[int]]) -> np.ndarray:
    predecessors: list[list[int]] = [[] for _ in targets]
    for source, out in enumerate(targets):
        for target in out:
            predecessors[target].append(source)
    hops = np.full(len(targets), np.inf)
    # The goal action itself is one hop, so the goal-adjacent state is 1 away from the goal.
    hops[goal_state] = 1.0
    queue = deque([goal_state])
    while queue:
        state = queue.popleft()
        for source in predecessors[state]:
            if hops[source] == np.inf:
                hops[source] = hops[state] + 1
                queue.append(source)
    return hops


def _make_task(rng: np.random.Generator, task_id: int, num_states: int, max_steps: int) -> _Task:
    room = list(_ROOMS)[int(rng.integers(len(_ROOMS)))]
    layout = _layout(rng, num_states, max_steps)
    num_traps = sum(layout.trap_regions)
    num_main = num_states - num_traps
    places = _places(rng, room, num_main, trap=False) + _places(rng, room, num_traps, trap=True)
    # ALFWorld episodes start in the middle of the room with empty hands.
    places[0] = _Place("middle of room", "nothing", "looking around")
    targets: list[list[int]] = [[] for _ in range(num_states)]

    def connect(source: int, target: int) -> None:
        if target != source and target not in targets[source]:
            targets[source].append(target)

    # State 0 is the start; 0..chain_length is the shortest solution, ending at the goal-adjacent state.
    # Every room state has a progress level; edges move forward at most one level (so no shortcut makes
    # the task trivial) but may go back any number of levels (putting an object back, leaving a room).
    chain = list(range(layout.chain_length + 1))
    goal_state = chain[-1]
    # The goal action puts the held object down, so the goal-adjacent state must hold one.
    holder = next((i for i in range(1, num_main) if places[i].holding != "nothing"), None)
    if holder is None:  # no sampled place holds anything, so this one cannot collide with another
        places[goal_state] = dataclasses.replace(places[goal_state], holding=f"{_ROOMS[room][1][0]} 1")
    else:
        places[goal_state], places[holder] = places[holder], places[goal_state]
    level = np.zeros(num_main, dtype=int)
    level[chain] = chain
    level[len(chain):] = np.sort(rng.integers(0, layout.chain_length, size=num_main - len(chain)))
    for a, b in zip(chain, chain[1:]):
        connect(a, b)
    # Every other room state hangs off an already reachable state one level below or on its own level.
    reachable = list(chain)
    for state in range(len(chain), num_main):
        parents = [s for s in reachable if level[state] - 1 <= level[s] <= level[state] and s != goal_state]
        connect(int(rng.choice(parents)), state)
        reachable.append(state)
    by_level = [np.flatnonzero(level == lv) for lv in range(layout.chain_length + 1)]
    # Extra edges: mostly to the same or a neighbouring level, sometimes far back.
    for state in range(num_main):
        degree = int(rng.integers(*DEGREE_RANGE))
        attempts = 0
        while len(targets[state]) < degree and attempts < 50:
            attempts += 1
            if rng.random() < BACK_EDGE_RATE:
                target_level = int(rng.integers(0, level[state] + 1))
            else:
                target_level = int(np.clip(level[state] + rng.integers(-1, 2), 0, layout.chain_length))
            connect(state, int(rng.choice(by_level[target_level])))
    # Trap regions: a cycle plus a chord, entered from a few side states, left never.
    start = num_main
    side_states = np.arange(len(chain), num_main)
    for size in layout.trap_regions:
        region = list(range(start, start + size))
        for a, b in zip(region, region[1:] + region[:1]):
            connect(a, b)
        connect(region[-1], region[1])
        entries = side_states if len(side_states) >= 2 else np.arange(1, num_main)
        for entry in rng.choice(entries, size=min(TRAP_ENTRIES, len(entries)), replace=False):
            connect(int(entry), region[int(rng.integers(size))])
        start += size
    # Make sure the goal can be reached from every room state (the task is solvable until a trap).
    hops = _hops_to(goal_state, targets)
    for state in range(num_main):
        if hops[state] == np.inf:
            connect(state, chain[min(level[state] + 1, layout.chain_length)])
    hops = _hops_to(goal_state, targets)

    objects = _ROOMS[room][1]
    goal_object = places[goal_state].holding
    goal_action = f"put {goal_object} in/on {places[goal_state].receptacle}"
    prefix = f"task{task_id}/{room}"
    keys = tuple(f"{prefix}/at:{p.receptacle}/holding:{p.holding}/{p.status}" for p in places)

    edges = []
    for state, out in enumerate(targets):
        used = {goal_action} if state == goal_state else set()
        labelled = []
        for target in out:
            text = _action_text(places[state], places[target], used)
            used.add(text)
            labelled.append((text, target))
        edges.append(tuple(labelled))
    # Objects 4+ of the room never appear in this task's states, so commands about them do nothing.
    inadmissible = tuple(f"{verb_} {obj} 1" for verb_ in _INADMISSIBLE_VERBS for obj in objects[4:])
    return _Task(
        keys=keys,
        edges=tuple(edges),
        goal_state=goal_state,
        goal_action=goal_action,
        goal_key=f"{prefix}/done:{goal_action}",
        hops_to_goal=hops,
        inadmissible=inadmissible,
    )


def _rollout(
    rng: np.random.Generator, task: _Task, competent: bool, max_steps: int, invalid_rate: float
) -> Trajectory:
    bias = COMPETENT_BIAS if competent else INCOMPETENT_BIAS
    # Trap states count as a few hops beyond the farthest room state, so even a competent walk can fall in.
    finite = task.hops_to_goal[np.isfinite(task.hops_to_goal)]
    trap_hops = float(finite.max()) + 3.0
    state = 0
    steps = []
    for _ in range(max_steps):
        key = task.keys[state]
        draw = rng.random()
        if draw < invalid_rate:
            steps.append(Step(key, str(rng.choice(_GARBLED)), key, 0.0, False))
            continue
        if draw < invalid_rate + INADMISSIBLE_RATE:
            steps.append(Step(key, str(rng.choice(task.inadmissible)), key, 0.0, True))
            continue
        options = list(task.edges[state])
        hops = [task.hops_to_goal[t] if np.isfinite(task.hops_to_goal[t]) else trap_hops for _, t in options]
        if competent and state == task.goal_state:
            options.append((task.goal_action, -1))
            hops.append(0.0)
        logits = -bias * np.asarray(hops)
        weights = np.exp(logits - logits.max())
        action, target = options[int(rng.choice(len(options), p=weights / weights.sum()))]
        if target < 0:
            steps.append(Step(key, action, task.goal_key, GOAL_REWARD, True))
            break
        steps.append(Step(key, action, task.keys[target], 0.0, True))
        state = target
    return Trajectory(tuple(steps))


def alfworld_like_rollouts(
    num_groups: int = 16,
    group_size: int = 8,
    max_steps: int = 50,
    num_states: int = 80,
    success_rate: tuple[float, float] = (0.25, 0.5),
    invalid_rate: float = 0.05,
    seed: int = 0,
) -> list[Group]:
    """``num_groups`` groups of ``group_size`` rollouts; the same arguments always give the same groups.

    ``success_rate`` is the range the per-group chance of a competent rollout is drawn from; at the
    default sizes competent rollouts practically always reach the goal, so the realised success fraction
    of a batch lands inside the range (a single group of 8 can still be all-fail or mostly successful).
    ``num_states`` may go up to 600 (the distinct places of the smallest room). Group g depends only on
    (seed, g), not on ``num_groups``.
    """
    if num_groups < 1 or group_size < 1 or max_steps < 1:
        raise ValueError("num_groups, group_size and max_steps must be at least 1")
    if num_states < MIN_STATES:
        raise ValueError(f"num_states must be at least {MIN_STATES}, got {num_states}")
    low, high = success_rate
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"success_rate must be a range inside [0, 1], got {success_rate}")
    if not 0.0 <= invalid_rate < 1.0:
        raise ValueError(f"invalid_rate must be in [0, 1), got {invalid_rate}")
    groups = []
    for g in range(num_groups):
        rng = np.random.default_rng([seed, g])
        task = _make_task(rng, g, num_states, max_steps)
        competence = rng.uniform(low, high)
        trajectories = tuple(
            _rollout(rng, task, bool(rng.random() < competence), max_steps, invalid_rate)
            for _ in range(group_size)
        )
        groups.append(Group(trajectories))
    return groups


PRESETS = {
    # The bundled example: small enough to read, with successes, failures, loops and invalid steps.
    "small": dict(num_groups=3, group_size=4, max_steps=12, num_states=16, success_rate=(0.4, 0.6), seed=7),
    # The credit benchmark batch (16 x 8 x 50, ALFWorld limits).
    "bench": dict(),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where to write the rollout JSON ('-' for stdout)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="small")
    parser.add_argument("--seed", type=int, default=None, help="overrides the preset's seed")
    args = parser.parse_args(argv)
    kwargs = dict(PRESETS[args.preset])
    if args.seed is not None:
        kwargs["seed"] = args.seed
    text = json.dumps(rollouts_to_json(alfworld_like_rollouts(**kwargs)), indent=1) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

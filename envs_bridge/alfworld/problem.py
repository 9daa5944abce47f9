"""One ALFWorld game in one ALFRED room: receptacles, objects, the task, and its PDDL problem text.

ALFWorld plays ``game.tw-pddl`` = ``{pddl_domain, grammar, pddl_problem, solvable, walkthrough}``; of these
only ``pddl_problem`` (ALFRED's ``initial_state.pddl``) comes from data that is not obtainable offline.
This module synthesizes it from the shipped room layouts (docs/environments.md §4.4):

1. Receptacles: every fixed receptacle of ``FloorPlanN-openable.json`` at ALFRED's location id
   ``loc|x/0.25|z/0.25|rotation/90|horizon`` of the pose in front of it; ``Sink|…``/``Bathtub|…`` become
   ``Sink|…|SinkBasin``/``Bathtub|…|BathtubBasin`` (ALFRED's id form, which ALFWorld's demangler names
   ``sinkbasin 1``). Fixed receptacle classes of ``objects.json`` missing there get one instance at a
   random reachable point.
2. Objects: 1-3 instances of each pickupable class present (2-3 of a pick-two target), each in a random
   receptacle that may hold it (``VAL_RECEPTACLE_OBJECTS``); lamps on desk/table/dresser/shelf furniture.
   Target objects never start where the goal would already hold (in a receptacle of the goal type; for
   cooling, in the fridge, which ALFRED treats as already cool).
3. Facts as ALFRED writes them, the goal from ALFRED's goal library, ``#`` as the type separator, then
   ALFRED's character mangling (``-``→``_minus_``, ``#``→``-``, ``|``→``_bar_``, ``+``→``_plus_``,
   ``.``→``_dot_``, ``,``→``_comma_``); writing `` - `` directly breaks Fast Downward on ``_minus_``.

Everything random comes from the ``random.Random`` passed in, so a game is a pure function of its seed.
"""

from __future__ import annotations

import dataclasses
import random
import re

from alfworld.gen import constants, goal_library

from envs_bridge.alfworld.games import TASK_TYPES
from envs_bridge.alfworld.layouts import SceneLayout

# Which room types ALFRED poses each task in (constants.GOALS_VALID).
TASK_ROOM_TYPES: dict[str, frozenset[str]] = {task: frozenset(constants.GOALS_VALID[task]) for task in TASK_TYPES}

MOVABLE_RECEPTACLES = frozenset(constants.MOVABLE_RECEPTACLES)
FIXED_RECEPTACLES = frozenset(constants.RECEPTACLES) - MOVABLE_RECEPTACLES
BASIN_OF = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}
OBJECT_TYPES = frozenset(constants.OBJECTS_SET) - FIXED_RECEPTACLES  # declared as `otype`, the rest as `rtype`
# Classes some receptacle may hold are the ones ALFRED's agent can pick up (sliced pieces aside).
PICKUPABLE = frozenset(set().union(*constants.VAL_RECEPTACLE_OBJECTS.values())) & OBJECT_TYPES
LAMPS = ("DeskLamp", "FloorLamp")
LAMP_HOLDERS = frozenset({"Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable", "TVStand", "DiningTable"})
APPLIANCE = {  # the receptacle a state-change task needs, and the object property it needs
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable"),
}
OBJECT_PROPERTIES = {  # PDDL predicate -> VAL_ACTION_OBJECTS key
    "cleanable": "Cleanable",
    "heatable": "Heatable",
    "coolable": "Coolable",
    "sliceable": "Sliceable",
    "toggleable": "Toggleable",
}
# Goal receptacles that would make a state-change task read oddly or half-solve it ("put a hot mug in
# fridge", "put a clean cup in sinkbasin").
_UNFIT_PARENTS = {
    "pick_clean_then_place_in_recep": frozenset({"SinkBasin", "BathtubBasin"}),
    "pick_heat_then_place_in_recep": frozenset({"Microwave", "Fridge"}),
    "pick_cool_then_place_in_recep": frozenset({"Fridge", "Microwave"}),
}
AGENT_HORIZON = 30
_MANGLING = {"-": "_minus_", "#": "-", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}
_MANGLING_PATTERN = re.compile("|".join(re.escape(char) for char in _MANGLING))


def mangle(text: str) -> str:
    """ALFRED's PDDL character mangling, applied in one pass (so ``#``→``-`` is not re-mangled)."""
    return _MANGLING_PATTERN.sub(lambda match: _MANGLING[match.group(0)], text)


def location_id(x: float, z: float, rotation: int, horizon: int) -> str:
    return f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{int(rotation) // 90 % 4}|{int(horizon)}"


def _coordinate(value: float) -> str:
    value = round(value, 2)
    return "00.00" if value == 0 else f"{'+' if value > 0 else '-'}{abs(value):05.2f}"


def _alfred_id(name: str, x: float, y: float, z: float) -> str:
    return f"{name}|{_coordinate(x)}|{_coordinate(y)}|{_coordinate(z)}"


@dataclasses.dataclass(frozen=True)
class Receptacle:
    object_id: str  # ALFRED id, e.g. "Cabinet|-01.42|+00.39|+03.46" or "Sink|+00.10|+00.90|-01.20|SinkBasin"
    rtype: str  # class, e.g. "Cabinet", "SinkBasin"
    location: str  # where the agent stands to use it, e.g. "loc|-8|10|0|30"

    def coordinates(self) -> tuple[float, float, float]:
        x, y, z = self.object_id.split("|")[1:4]
        return float(x), float(y), float(z)


@dataclasses.dataclass(frozen=True)
class Item:
    object_id: str
    otype: str
    receptacle: Receptacle


@dataclasses.dataclass(frozen=True)
class TaskParams:
    """ALFRED's ``pddl_params`` of one task (class names; empty where a task type has no such role)."""

    task_type: str
    object_target: str
    parent_target: str = ""
    toggle_target: str = ""

    def pddl_params(self) -> dict:
        return {
            "object_target": self.object_target,
            "parent_target": self.parent_target,
            "toggle_target": self.toggle_target,
            "mrecep_target": "",
            "object_sliced": False,
        }

    def directory_name(self, scene: int) -> str:
        # ALFRED's trial-folder naming: task-object-movable_receptacle-parent(or lamp)-scene
        return f"{self.task_type}-{self.object_target}-None-{self.parent_target or self.toggle_target}-{scene}"


@dataclasses.dataclass(frozen=True)
class Game:
    layout: SceneLayout
    task: TaskParams
    receptacles: tuple[Receptacle, ...]
    items: tuple[Item, ...]
    agent_location: str

    def problem(self) -> str:
        return mangle(self._problem_unmangled())

    def traj_data(self) -> dict:
        """The fields of ALFRED's ``traj_data.json`` that ALFWorld reads (its expert and task text)."""
        return {
            "task_type": self.task.task_type,
            "pddl_params": self.task.pddl_params(),
            "scene": {
                "floor_plan": self.layout.floor_plan, "scene_num": self.layout.scene, "room_type": self.layout.room_type,
            },
        }

    def _problem_unmangled(self) -> str:
        receptacle_types = sorted({receptacle.rtype for receptacle in self.receptacles})
        locations = sorted({receptacle.location for receptacle in self.receptacles} | {self.agent_location})
        declarations = (
            ["agent1 # agent"]
            + [f"{name}Type # otype" for name in sorted(OBJECT_TYPES)]
            + [f"{name}Type # rtype" for name in sorted(FIXED_RECEPTACLES)]
            + [f"{item.object_id} # object" for item in self.items]
            + [f"{receptacle.object_id} # receptacle" for receptacle in self.receptacles]
            + [f"{location} # location" for location in locations]
        )
        facts = []
        for receptacle in self.receptacles:
            facts.append(f"(receptacleType {receptacle.object_id} {receptacle.rtype}Type)")
            facts.append(f"(receptacleAtLocation {receptacle.object_id} {receptacle.location})")
            if receptacle.rtype in constants.OPENABLE_CLASS_SET:
                facts.append(f"(openable {receptacle.object_id})")
        for rtype in receptacle_types:
            for otype in sorted(constants.VAL_RECEPTACLE_OBJECTS.get(rtype, ())):
                if otype in OBJECT_TYPES:
                    facts.append(f"(canContain {rtype}Type {otype}Type)")
        for item in self.items:
            facts.append(f"(objectType {item.object_id} {item.otype}Type)")
            facts.append(f"(inReceptacle {item.object_id} {item.receptacle.object_id})")
            facts.append(f"(objectAtLocation {item.object_id} {item.receptacle.location})")
            if item.otype in PICKUPABLE:
                facts.append(f"(pickupable {item.object_id})")
            if item.otype in MOVABLE_RECEPTACLES:
                facts.append(f"(isReceptacleObject {item.object_id})")
            for predicate, key in OBJECT_PROPERTIES.items():
                if item.otype in constants.VAL_ACTION_OBJECTS[key]:
                    facts.append(f"({predicate} {item.object_id})")
        facts.append(f"(atLocation agent1 {self.agent_location})")
        goal = goal_library.gdict[self.task.task_type]["pddl"].format(
            obj=self.task.object_target, recep=self.task.parent_target, toggle=self.task.toggle_target, mrecep=""
        )
        indent = "\n        "
        name = f"{self.layout.floor_plan}_{self.task.task_type}"
        # The goal text closes the `(define` itself, as in ALFRED's goal library.
        return (
            f"(define (problem plan_{name})\n    (:domain alfred)\n    (:objects{indent}{indent.join(declarations)}\n    )\n"
            f"    (:init{indent}{indent.join(facts)}\n    )\n{goal}\n"
        )


# ----------------------------------------------------------------------------------------- the room


def fixed_receptacle_types(layout: SceneLayout) -> frozenset[str]:
    """Receptacle classes the room will hold (independent of any random draw)."""
    types = set()
    for object_id, _ in layout.receptacle_poses:
        name = object_id.split("|")[0]
        types.add(BASIN_OF.get(name, name))
    types |= {BASIN_OF.get(name, name) for name in layout.classes}
    return frozenset(types & FIXED_RECEPTACLES)


def build_receptacles(layout: SceneLayout, rng: random.Random) -> list[Receptacle]:
    receptacles = []
    for object_id, (x, z, rotation, horizon) in layout.receptacle_poses:
        name = object_id.split("|")[0]
        rtype = BASIN_OF.get(name, name)
        if rtype not in FIXED_RECEPTACLES:
            continue
        full_id = f"{object_id}|{rtype}" if name in BASIN_OF else object_id
        receptacles.append(Receptacle(full_id, rtype, location_id(x, z, rotation, horizon)))
    present = {receptacle.rtype for receptacle in receptacles}
    basin_names = {basin: name for name, basin in BASIN_OF.items()}
    for rtype in sorted(fixed_receptacle_types(layout) - present):
        # Listed in objects.json but without a pose in openable.json (stove burners, toasters, ...).
        x, z = rng.choice(layout.reachable)
        location = location_id(x, z, rng.randrange(4) * 90, AGENT_HORIZON)
        y = rng.uniform(0.0, 1.2)
        if rtype in basin_names:
            object_id = _alfred_id(basin_names[rtype], x, y, z) + f"|{rtype}"
        else:
            object_id = _alfred_id(rtype, x, y, z)
        receptacles.append(Receptacle(object_id, rtype, location))
    return receptacles


def _agent_start(layout: SceneLayout, receptacles: list[Receptacle], rng: random.Random) -> str:
    taken = {receptacle.location for receptacle in receptacles}
    for _ in range(1000):
        x, z = rng.choice(layout.reachable)
        location = location_id(x, z, rng.randrange(4) * 90, AGENT_HORIZON)
        if location not in taken:  # start "in the middle of the room", not facing a receptacle
            return location
    raise ValueError(f"{layout.floor_plan}: no free start point")


# ----------------------------------------------------------------------------------------- the task


def _holders(otype: str, receptacle_types: frozenset[str]) -> frozenset[str]:
    return frozenset(rtype for rtype in receptacle_types if otype in constants.VAL_RECEPTACLE_OBJECTS.get(rtype, ()))


def _forbidden_start(task: TaskParams) -> frozenset[str]:
    """Receptacle types a target object must not start in (the goal would hold, or be half done)."""
    forbidden = {task.parent_target} if task.parent_target else set()
    if task.task_type == "pick_cool_then_place_in_recep":
        forbidden.add("Fridge")
    return frozenset(forbidden)


def candidate_tasks(layout: SceneLayout, task_type: str) -> list[TaskParams]:
    """Every task of ``task_type`` this room supports, in a fixed order."""
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}: choose one of {', '.join(TASK_TYPES)}")
    if layout.room_type not in TASK_ROOM_TYPES[task_type]:
        return []
    receptacle_types = fixed_receptacle_types(layout)
    objects = sorted(name for name in layout.classes if name in PICKUPABLE and _holders(name, receptacle_types))
    tasks = []
    if task_type == "look_at_obj_in_light":
        if not receptacle_types & LAMP_HOLDERS:
            return []
        for lamp in LAMPS:
            if lamp in layout.classes:
                tasks.extend(TaskParams(task_type, name, toggle_target=lamp) for name in objects)
        return tasks
    appliance, needed = APPLIANCE.get(task_type, (None, None))
    if appliance is not None and appliance not in receptacle_types:
        return []
    for name in objects:
        if needed is not None and name not in constants.VAL_ACTION_OBJECTS[needed]:
            continue
        for parent in sorted(_holders(name, receptacle_types)):
            if parent in _UNFIT_PARENTS.get(task_type, ()):
                continue
            task = TaskParams(task_type, name, parent_target=parent)
            if _holders(name, receptacle_types) - _forbidden_start(task):
                tasks.append(task)
    return tasks


def _object_id(otype: str, receptacle: Receptacle, taken: set[str], rng: random.Random) -> str:
    x, y, z = receptacle.coordinates()
    while True:
        object_id = _alfred_id(otype, x + rng.uniform(-0.4, 0.4), y + rng.uniform(0.0, 0.3), z + rng.uniform(-0.4, 0.4))
        if object_id not in taken:
            taken.add(object_id)
            return object_id


def build_game(layout: SceneLayout, task: TaskParams, rng: random.Random) -> Game:
    """Populates ``layout`` around ``task`` (a member of ``candidate_tasks(layout, task.task_type)``)."""
    receptacles = build_receptacles(layout, rng)
    receptacle_types = frozenset(receptacle.rtype for receptacle in receptacles)
    taken: set[str] = {receptacle.object_id for receptacle in receptacles}
    items: list[Item] = []
    for lamp in LAMPS:
        holders = [receptacle for receptacle in receptacles if receptacle.rtype in LAMP_HOLDERS]
        if lamp in layout.classes and holders:
            receptacle = rng.choice(holders)
            items.append(Item(_object_id(lamp, receptacle, taken, rng), lamp, receptacle))
    for otype in sorted(name for name in layout.classes if name in PICKUPABLE):
        holder_types = _holders(otype, receptacle_types)
        if otype == task.object_target:
            holder_types -= _forbidden_start(task)
            count = rng.randint(2, 3) if task.task_type == "pick_two_obj_and_place" else rng.randint(1, 3)
        else:
            count = rng.randint(1, 3)
        places = [receptacle for receptacle in receptacles if receptacle.rtype in holder_types]
        if not places:
            if otype == task.object_target:
                raise ValueError(f"{layout.floor_plan}: nowhere to put the target {otype}")
            continue
        for _ in range(count):
            receptacle = rng.choice(places)
            items.append(Item(_object_id(otype, receptacle, taken, rng), otype, receptacle))
    return Game(layout, task, tuple(receptacles), tuple(items), _agent_start(layout, receptacles, rng))

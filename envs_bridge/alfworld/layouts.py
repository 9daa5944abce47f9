"""ALFRED room layouts as the alfworld wheel ships them (``alfworld/gen/layouts``), and ALFRED's room split.

Per floor plan N the wheel carries ``FloorPlanN-objects.json`` (object and receptacle classes present),
``FloorPlanN-openable.json`` (receptacle ids such as ``Cabinet|-01.42|+00.39|+03.46`` with the agent pose
``[x, z, rotation, horizon]`` in front of each) and ``FloorPlanN-layout.npy`` (reachable floor points,
0.25 m grid).

Room splits (``ROOM_SPLITS``; sources in docs/alfworld-games.md):

* ``alfworld`` (default): ALFWorld's released split. Its ``valid_unseen`` games, the out-of-distribution
  set papers report, all sit in rooms 10, 219, 308 and 424 (one of each room type), which ALFRED's
  ``TRAIN_SCENE_NUMBERS`` counts as training rooms. Here ``eval_ood`` uses exactly those four and
  ``train`` / ``eval_id`` use ALFRED's other 92 training rooms, so no OOD room is ever trained on.
* ``alfred``: ALFRED's generation-time split, ``alfworld.gen.constants``: ``train`` / ``eval_id`` in the
  96 ``TRAIN_SCENE_NUMBERS``, ``eval_ood`` in the 24 ``TEST_SCENE_NUMBERS`` (1-6, 201-206, 301-306,
  401-406), rooms no released ALFWorld game uses.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os

import numpy as np
from alfworld.gen import constants

LAYOUT_DIR = os.path.join(os.path.dirname(constants.__file__), "layouts")
ROOM_TYPES = ("Kitchen", "LivingRoom", "Bedroom", "Bathroom")

ALFRED_TRAIN_SCENES: tuple[int, ...] = tuple(sorted(constants.TRAIN_SCENE_NUMBERS))
ALFRED_TEST_SCENES: tuple[int, ...] = tuple(sorted(constants.TEST_SCENE_NUMBERS))
ALFWORLD_VALID_UNSEEN_SCENES: tuple[int, ...] = (10, 219, 308, 424)  # json_2.1.1/valid_unseen's rooms
ROOM_SPLITS: dict[str, dict[str, tuple[int, ...]]] = {
    "alfworld": {
        "train": tuple(s for s in ALFRED_TRAIN_SCENES if s not in ALFWORLD_VALID_UNSEEN_SCENES),
        "eval_id": tuple(s for s in ALFRED_TRAIN_SCENES if s not in ALFWORLD_VALID_UNSEEN_SCENES),
        "eval_ood": ALFWORLD_VALID_UNSEEN_SCENES,
    },
    "alfred": {"train": ALFRED_TRAIN_SCENES, "eval_id": ALFRED_TRAIN_SCENES, "eval_ood": ALFRED_TEST_SCENES},
}
DEFAULT_ROOM_SPLIT = "alfworld"


@dataclasses.dataclass(frozen=True)
class SceneLayout:
    scene: int
    room_type: str
    classes: frozenset[str]  # object and receptacle classes present (objects.json)
    receptacle_poses: tuple[tuple[str, tuple[float, float, int, int]], ...]  # (ALFRED id, (x, z, rotation, horizon))
    reachable: tuple[tuple[float, float], ...]  # floor points the agent can stand on

    @property
    def floor_plan(self) -> str:
        return f"FloorPlan{self.scene}"


def room_type(scene: int) -> str:
    for name, numbers in constants.SCENE_TYPE.items():
        if scene in numbers:
            return name
    raise ValueError(f"scene {scene} is not an ALFRED floor plan (1-30, 201-230, 301-330, 401-430)")


@functools.cache
def load_scene(scene: int) -> SceneLayout:
    prefix = os.path.join(LAYOUT_DIR, f"FloorPlan{scene}")
    try:
        with open(f"{prefix}-objects.json") as handle:
            classes = frozenset(json.load(handle))
        with open(f"{prefix}-openable.json") as handle:
            poses = json.load(handle)
        points = np.load(f"{prefix}-layout.npy")
    except FileNotFoundError as error:
        raise ValueError(f"no layout for FloorPlan{scene} in {LAYOUT_DIR}: {error}") from error
    receptacle_poses = tuple(
        (object_id, (float(pose[0]), float(pose[1]), int(pose[2]), int(pose[3])))
        for object_id, pose in sorted(poses.items())
    )
    reachable = tuple((float(x), float(z)) for x, z in points.tolist())
    return SceneLayout(scene, room_type(scene), classes, receptacle_poses, reachable)

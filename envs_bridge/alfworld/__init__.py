"""ALFWorld (``alfworld`` 0.4.2) behind the ``EnvAdapter`` interface (docs/environments.md §4).

alfworld runs under its own interpreter, ``.venv-alfworld`` (``bash envs_bridge/alfworld/bootstrap.sh``,
pins in ``requirements.txt``); only ``games.py`` and ``state_key.py`` import without it.

games.py      where games live (official ``$ALFWORLD_DATA/json_2.1.1`` or generated) and which a split holds
state_key.py  GraphGPO's augmented anchor: observation + location / holding / moved items + admissible list
engine.py     ALFWorld's engine as ALFWorld assembles it (PddlEnv + demangler + infos [+ expert])
adapter.py    AlfWorldAdapter: the EnvAdapter the env servers host (registry name "alfworld")
layouts.py    the ALFRED room layouts the wheel ships, and ALFRED's training / held-out room split
problem.py    one game: receptacles, objects, task, and its ALFRED-style PDDL problem
solver.py     solvability checks with ALFWorld's hand-coded expert and Fast Downward planner
generate.py   ``python -m envs_bridge.alfworld.generate``: playable games offline, in ALFWorld's layout
"""

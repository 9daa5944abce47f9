"""GraphGPO's augmented anchor state key for ALFWorld (docs/environments.md §4.3); no alfworld import.

ALFWorld's feedback alone is a poor state id: "Nothing happens." or "You arrive at fridge 1. The fridge 1
is closed." read the same whatever the agent holds or has already done. GraphGPO therefore tracks, from
the agent's own successful actions, where it is, what it holds (and what was done to it) and which
objects it has moved where, and appends that and the sorted admissible commands to the observation:

    {observation} Location: {loc}. Items in hand (status): {holding}[ ({status ...})][ History moving list
    by you: {obj} to {recep}, ...] {admissible,commands,sorted}

An action counts only if the game accepted it: feedback containing "Nothing happens" changes nothing.
Parsed actions are ALFWorld's command templates: ``go to R``, ``take O from R``, ``move O to R`` (and the
older ``put O in/on R``), ``heat/cool/clean O with R`` and ``slice O with K``. Heating clears "cooled" and
cooling clears "heated", as the PDDL domain's HeatObject/CoolObject effects do. The status list is
sorted (the same state reached in a different order gets one key); the moving list is chronological
(it is a history by definition).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

START_LOCATION = "middle of the room"
NOTHING_HAPPENS = "Nothing happens"
_GO = re.compile(r"go to (?P<recep>.+)")
_TAKE = re.compile(r"take (?P<obj>.+?) from (?P<recep>.+)")
_PLACE = re.compile(r"(?:move (?P<obj>.+?) to|put (?P<obj2>.+?) in/on) (?P<recep>.+)")
_CHANGE = re.compile(r"(?P<verb>heat|cool|clean) (?P<obj>.+?) with (?P<recep>.+)")
_SLICE = re.compile(r"slice (?P<obj>.+?) with (?P<tool>.+)")
_STATUS_OF_VERB = {"heat": "heated", "cool": "cooled", "clean": "cleaned"}
_STATUS_CLEARED_BY = {"heated": "cooled", "cooled": "heated"}


class AnchorTracker:
    """Location / holding / status / moved-item memory of one episode."""

    def __init__(self) -> None:
        self.location = START_LOCATION
        self.holding: str | None = None
        self.status: dict[str, set[str]] = {}  # object -> statuses its state-change actions gave it
        self.moved: list[str] = []  # "obj to recep", in the order the agent placed them

    def observe(self, action: str, observation: str) -> None:
        """Updates the memory after ``action`` produced ``observation``."""
        if NOTHING_HAPPENS in observation:
            return
        command = " ".join(action.split())  # the engine matches commands after stripping whitespace
        if match := _GO.fullmatch(command):
            self.location = match["recep"]
        elif match := _TAKE.fullmatch(command):
            self.holding = match["obj"]
        elif match := _PLACE.fullmatch(command):
            self.moved.append(f"{match['obj'] or match['obj2']} to {match['recep']}")
            self.holding = None
        elif match := _CHANGE.fullmatch(command):
            status = _STATUS_OF_VERB[match["verb"]]
            statuses = self.status.setdefault(match["obj"], set())
            statuses.discard(_STATUS_CLEARED_BY.get(status, ""))
            statuses.add(status)
        elif match := _SLICE.fullmatch(command):
            self.status.setdefault(match["obj"], set()).add("sliced")

    def key(self, observation: str, admissible_commands: Iterable[str]) -> str:
        holding = "nothing"
        if self.holding is not None:
            statuses = sorted(self.status.get(self.holding, ()))
            holding = f"{self.holding} ({' '.join(statuses)})" if statuses else self.holding
        history = f" History moving list by you: {', '.join(self.moved)}." if self.moved else ""
        commands = ",".join(sorted(admissible_commands))
        return f"{observation} Location: {self.location}. Items in hand (status): {holding}.{history} {commands}"

"""GraphGPO's augmented ALFWorld anchor (docs/environments.md §4.3): location / holding / status / moved tracking."""

from __future__ import annotations

from envs_bridge.alfworld.state_key import START_LOCATION, AnchorTracker

ADMISSIBLE = ("look", "go to fridge 1", "inventory", "go to countertop 1")


def play(tracker: AnchorTracker, *steps: tuple[str, str]) -> AnchorTracker:
    for action, observation in steps:
        tracker.observe(action, observation)
    return tracker


def test_key_layout_at_the_start():
    key = AnchorTracker().key("You are in the middle of a room.", ADMISSIBLE)
    assert key == (
        f"You are in the middle of a room. Location: {START_LOCATION}. Items in hand (status): nothing. "
        "go to countertop 1,go to fridge 1,inventory,look"
    )


def test_go_to_take_and_move_update_location_holding_and_history():
    tracker = play(
        AnchorTracker(),
        ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."),
        ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."),
    )
    assert (tracker.location, tracker.holding, tracker.moved) == ("countertop 1", "apple 1", [])
    assert "Location: countertop 1. Items in hand (status): apple 1." in tracker.key("obs", ADMISSIBLE)
    play(
        tracker,
        ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
        ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see nothing."),
        ("move apple 1 to fridge 1", "You move the apple 1 to the fridge 1."),
    )
    assert (tracker.location, tracker.holding, tracker.moved) == ("fridge 1", None, ["apple 1 to fridge 1"])
    key = tracker.key("You move the apple 1 to the fridge 1.", ADMISSIBLE)
    assert key.endswith(
        "Location: fridge 1. Items in hand (status): nothing. History moving list by you: apple 1 to fridge 1. "
        "go to countertop 1,go to fridge 1,inventory,look"
    )


def test_rejected_actions_change_nothing():
    tracker = play(
        AnchorTracker(),
        ("go to sinkbasin 1", "Nothing happens."),
        ("take apple 1 from countertop 1", "Nothing happens."),
        ("move mug 1 to sinkbasin 1", "Nothing happens."),
        ("heat mug 1 with microwave 1", "Nothing happens."),
    )
    assert (tracker.location, tracker.holding, tracker.moved, tracker.status) == (START_LOCATION, None, [], {})


def test_status_of_the_held_object_follows_the_pddl_effects():
    tracker = play(
        AnchorTracker(),
        ("take mug 1 from cabinet 2", "You pick up the mug 1 from the cabinet 2."),
        ("clean mug 1 with sinkbasin 1", "You clean the mug 1 using the sinkbasin 1."),
        ("cool mug 1 with fridge 1", "You cool the mug 1 using the fridge 1."),
    )
    assert "Items in hand (status): mug 1 (cleaned cooled)." in tracker.key("obs", ())
    # HeatObject deletes isCool (and CoolObject isHot): the status list says what holds now.
    tracker.observe("heat mug 1 with microwave 1", "You heat the mug 1 using the microwave 1.")
    assert "Items in hand (status): mug 1 (cleaned heated)." in tracker.key("obs", ())


def test_same_state_reached_in_another_order_gets_the_same_key():
    one = play(
        AnchorTracker(),
        ("take potato 1 from fridge 1", "You pick up the potato 1 from the fridge 1."),
        ("heat potato 1 with microwave 1", "You heat the potato 1 using the microwave 1."),
        ("clean potato 1 with sinkbasin 1", "You clean the potato 1 using the sinkbasin 1."),
        ("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing."),
    )
    other = play(
        AnchorTracker(),
        ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
        ("take potato 1 from fridge 1", "You pick up the potato 1 from the fridge 1."),
        ("clean potato 1 with sinkbasin 1", "You clean the potato 1 using the sinkbasin 1."),
        ("heat potato 1 with microwave 1", "You heat the potato 1 using the microwave 1."),
        ("go to sinkbasin 1", "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing."),
    )
    observation = "You are facing the sinkbasin 1. Next to it, you see nothing."
    assert one.key(observation, reversed(ADMISSIBLE)) == other.key(observation, ADMISSIBLE)


def test_identical_feedback_in_different_states_gets_different_keys():
    feedback = "Nothing happens."
    fresh = AnchorTracker()
    holding = play(AnchorTracker(), ("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."))
    assert fresh.key(feedback, ADMISSIBLE) != holding.key(feedback, ADMISSIBLE)


def test_moving_history_is_chronological_and_slicing_marks_the_object():
    tracker = play(
        AnchorTracker(),
        ("take knife 1 from countertop 1", "You pick up the knife 1 from the countertop 1."),
        ("slice bread 1 with knife 1", "You sliced the bread 1 with the knife 1."),
        ("move knife 1 to drawer 2", "You move the knife 1 to the drawer 2."),
        ("take pen 2 from desk 1", "You pick up the pen 2 from the desk 1."),
        ("put pen 2 in/on shelf 1", "You put the pen 2 in/on the shelf 1."),  # older ALFWorld grammar
    )
    assert tracker.moved == ["knife 1 to drawer 2", "pen 2 to shelf 1"]
    assert tracker.status == {"bread 1": {"sliced"}}
    assert "History moving list by you: knife 1 to drawer 2, pen 2 to shelf 1." in tracker.key("obs", ())


def test_commands_that_do_not_move_anything_leave_the_memory_alone():
    tracker = play(
        AnchorTracker(),
        ("  go   to   desk 1 ", "You arrive at desk 1. On the desk 1, you see a pen 1."),  # the engine strips
        ("examine desk 1", "On the desk 1, you see a pen 1."),
        ("look", "You are facing the desk 1. Next to it, you see nothing."),
        ("inventory", "You are not carrying anything."),
        ("use desklamp 1", "You turn on the desklamp 1."),
        ("open drawer 1", "You open the drawer 1. The drawer 1 is open. In it, you see nothing."),
    )
    assert (tracker.location, tracker.holding, tracker.moved, tracker.status) == ("desk 1", None, [], {})

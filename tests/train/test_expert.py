"""Expert demonstrations on the real TextWorldExpress engine: a step after which the collector's prompt
repeats itself is left out only when asked, and only when the prompt really repeats."""

from __future__ import annotations

import pytest

from milegpo_jax.train.expert import expert_episodes

pytest.importorskip("textworld_express")

TWC = {"game": "twc", "game_params": "numLocations=1,numItemsToPutAway=2"}


def _episodes(history_length: int, skip: bool):
    return list(expert_episodes("textworld_express", TWC, "train", range(3), history_length=history_length,
                                skip_repeated_prompts=skip))


def test_the_opening_look_around_is_left_out_only_when_the_prompt_repeats():
    kept = _episodes(0, skip=False)
    skipped = _episodes(0, skip=True)
    for full, short in zip(kept, skipped):
        # TWX's gold agent opens with "look around", which shows the first observation again
        assert full[0].action == "look around" and full[0].prompt == full[1].prompt
        assert full[0].response != full[1].response  # one prompt, two targets: what the option removes
        assert [d.action for d in short] == [d.action for d in full[1:]]
        assert [d.prompt for d in short] == [d.prompt for d in full[1:]]
        assert len({d.prompt for d in short}) == len(short)  # every kept prompt has one target
    # with a history pair every prompt differs (the step count and the last action), so nothing goes
    with_history = _episodes(1, skip=True)
    assert [[d.action for d in e] for e in with_history] == [[d.action for d in e] for e in kept]


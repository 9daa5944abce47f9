"""Generated ALFWorld games are real ALFWorld games: the unmodified ``AlfredTWEnv`` loads every one and
its stored walkthrough wins it there; each split uses its published rooms (docs/alfworld-games.md).

Runs ALFWorld under its own interpreter (subprocesses); skips when ``.venv-alfworld`` is missing.
"""

from __future__ import annotations

import filecmp
import json
import subprocess
from pathlib import Path

import pytest

from envs_bridge.alfworld.games import TASK_TYPES

from .conftest import REPO_ROOT, SHIPPED_GENERATE_ARGS, alfworld_env_vars

pytestmark = pytest.mark.timeout(300)
CHECK_SCRIPT = Path(__file__).resolve().parent / "unmodified_alfworld_check.py"
# ALFRED's generation-time test rooms (alfworld.gen.constants.TEST_SCENE_NUMBERS): 6 of each room type.
ALFRED_TEST_ROOMS = {*range(1, 7), *range(201, 207), *range(301, 307), *range(401, 407)}
ALL_ROOMS = {*range(1, 31), *range(201, 231), *range(301, 331), *range(401, 431)}
# The rooms of ALFWorld's released json_2.1.1/valid_unseen (eval_out_of_distribution, 134 games).
ALFWORLD_OOD_ROOMS = {10, 219, 308, 424}


def run_alfworld(python: str, *args: str, timeout_s: float = 240) -> str:
    completed = subprocess.run(
        [python, *args],
        capture_output=True, text=True, timeout=timeout_s, cwd=REPO_ROOT, env=alfworld_env_vars(), check=False,
    )
    assert completed.returncode == 0, f"{args} failed:\n{completed.stderr[-3000:]}"
    return completed.stdout


def traj_data(games_dir: Path) -> list[dict]:
    return [json.loads(path.read_text()) | {"path": path} for path in sorted(games_dir.glob("*/*/*/traj_data.json"))]


@pytest.fixture(scope="module")
def unmodified_play(alfworld_python, shipped_games) -> list[dict]:
    return json.loads(run_alfworld(alfworld_python, str(CHECK_SCRIPT), str(shipped_games)).strip().splitlines()[-1])


def test_unmodified_alfworld_loads_every_game_and_its_walkthrough_wins(unmodified_play, shipped_games):
    games = {str(path) for path in shipped_games.glob("*/*/*/game.tw-pddl")}
    assert {record["gamefile"] for record in unmodified_play} == games  # AlfredTWEnv kept every game
    for split in ("train", "valid_unseen"):
        assert {record["task_type"] for record in unmodified_play if record["split"] == split} == set(TASK_TYPES)
    lost = [record for record in unmodified_play if not record["walkthrough_won"]]
    assert not lost, f"stored walkthroughs that do not win in unmodified AlfredTWEnv: {lost}"
    for record in traj_data(shipped_games):  # and the game says how it was checked
        verified = record["generator"]["verified"]
        assert "unmodified alfworld.agents.environment.AlfredTWEnv" in verified["check"]
        assert 1 <= verified["won_at_step"] <= verified["max_steps"] == 50


def test_manifest_reports_the_live_experts_win_rate_per_task_type(shipped_games):
    manifest = json.loads((shipped_games / "manifest.json").read_text())
    assert manifest["room_split"] == "alfworld" and set(manifest["rooms"]["valid_unseen"]) == ALFWORLD_OOD_ROOMS
    for task_type in TASK_TYPES:
        stats = manifest["per_task_type"][task_type]
        assert stats["kept"] >= 1 and stats["expert_tie_break_runs"] >= manifest["tie_break_seeds"] >= 2
        assert 0.0 <= stats["expert_win_rate_over_tie_breaks"] <= 1.0
    print("\nlive expert win rate over tie-break seeds: "
          + ", ".join(f"{t}={manifest['per_task_type'][t]['expert_win_rate_over_tie_breaks']}" for t in TASK_TYPES))


def _rooms(records: list[dict]) -> dict[str, set[int]]:
    return {split: {record["scene"]["scene_num"] for record in records if f"/{split}/" in str(record["path"])}
            for split in ("train", "valid_seen", "valid_unseen")}


def test_out_of_distribution_games_use_only_alfworlds_unseen_rooms(shipped_games):
    records = traj_data(shipped_games)
    rooms = _rooms(records)
    assert rooms["valid_unseen"] and rooms["valid_unseen"] <= ALFWORLD_OOD_ROOMS
    for split in ("train", "valid_seen"):  # ALFRED training rooms, never ALFWorld's unseen ones
        assert rooms[split] and rooms[split] <= ALL_ROOMS - ALFRED_TEST_ROOMS - ALFWORLD_OOD_ROOMS
    for record in records:  # folder names follow ALFRED's task-object-None-receptacle-scene scheme
        params = record["pddl_params"]
        folder = record["path"].parent.parent.name
        receptacle = params["parent_target"] or params["toggle_target"]
        assert folder == f"{record['task_type']}-{params['object_target']}-None-{receptacle}-{record['scene']['scene_num']}"


def test_each_room_split_holds_its_published_rooms(alfworld_python):
    code = "import json; from envs_bridge.alfworld import layouts; print(json.dumps(layouts.ROOM_SPLITS))"
    splits = {name: {split: set(rooms) for split, rooms in by_split.items()}
              for name, by_split in json.loads(run_alfworld(alfworld_python, "-c", code).strip().splitlines()[-1]).items()}
    training_rooms = ALL_ROOMS - ALFRED_TEST_ROOMS
    assert splits["alfworld"] == {"train": training_rooms - ALFWORLD_OOD_ROOMS, "eval_id": training_rooms - ALFWORLD_OOD_ROOMS,
                                  "eval_ood": ALFWORLD_OOD_ROOMS}
    assert splits["alfred"] == {"train": training_rooms, "eval_id": training_rooms, "eval_ood": ALFRED_TEST_ROOMS}


def test_generation_is_deterministic_and_matches_the_shipped_games(alfworld_python, shipped_games, tmp_path):
    out = tmp_path / "regenerated"
    # Game i of a split depends only on (seed, split, i): the first two training games of the shipped set.
    args = list(SHIPPED_GENERATE_ARGS)
    for flag in ("--train", "--eval-id", "--eval-ood"):
        args[args.index(flag) + 1] = "2" if flag == "--train" else "0"
    output = run_alfworld(alfworld_python, "-m", "envs_bridge.alfworld.generate", "--out", str(out), "--quiet",
                          "--tie-break-seeds", "0", *args)  # the reruns only feed the manifest
    manifest = json.loads(output)
    assert manifest["games"] == {"train": 2, "valid_seen": 0, "valid_unseen": 0}
    regenerated = sorted(out.glob("train/*/*/game.tw-pddl"))
    assert len(regenerated) == 2
    for gamefile in regenerated:
        shipped = shipped_games / gamefile.relative_to(out)
        assert shipped.exists(), f"{gamefile.relative_to(out)} is not in the shipped set: regenerate it (data/README.md)"
        assert filecmp.cmp(gamefile, shipped, shallow=False), "generator output changed: regenerate data/games.tar.xz"
        assert filecmp.cmp(gamefile.parent / "traj_data.json", shipped.parent / "traj_data.json", shallow=False)


def test_generator_rejects_bad_arguments_clearly(alfworld_python, tmp_path):
    completed = subprocess.run(
        [alfworld_python, "-m", "envs_bridge.alfworld.generate", "--out", str(tmp_path / "x"), "--train", "-1"],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, env=alfworld_env_vars(), check=False,
    )
    assert completed.returncode == 2 and "--train must be >= 0" in completed.stderr
    for bad in (["--room-split", "nowhere"], ["--tie-break-seeds", "-1"], ["--task-types", "juggle_obj"]):
        completed = subprocess.run(
            [alfworld_python, "-m", "envs_bridge.alfworld.generate", "--out", str(tmp_path / "x"), "--train", "1", *bad],
            capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, env=alfworld_env_vars(), check=False,
        )
        assert completed.returncode == 2 and bad[0] in completed.stderr, completed.stderr
        assert not (tmp_path / "x").exists()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    completed = subprocess.run(
        [alfworld_python, "-m", "envs_bridge.alfworld.generate", "--out", str(tmp_path / "full"), "--train", "1"],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, env=alfworld_env_vars(), check=False,
    )
    assert completed.returncode == 2 and "pass --force" in completed.stderr
    assert (tmp_path / "full" / "keep.txt").exists()


def test_planner_fallback_finds_a_winning_plan(alfworld_python, shipped_games):
    # The smallest pick-and-place problem keeps Fast Downward's search short (big kitchens take minutes).
    records = traj_data(shipped_games)
    gamefiles = [r["path"].parent / "game.tw-pddl" for r in records if r["task_type"] == "pick_and_place_simple"]
    gamefile = str(min(gamefiles, key=lambda path: path.stat().st_size))
    output = run_alfworld(alfworld_python, "-m", "envs_bridge.alfworld.solver", "plan", gamefile)
    plan = json.loads(output.strip().splitlines()[-1])["plan"]
    assert plan and len(plan) <= 50  # the solver replays a plan to a win before returning it
    assert plan[-1].startswith("move ")

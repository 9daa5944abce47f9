"""experiments.arena on the real TextWorldExpress engine: determinism, learning vs the random control,
the exact transition cache, the policy-gradient maths against finite differences, and bad input."""

import json
import random

import numpy as np
import pytest

from envs_bridge.registry import make_adapter
from experiments.arena import cli, stats
from experiments.arena.play import AdapterBackend, TransitionCache, sampling_chooser
from experiments.arena.policy import Decision, StateRows, TabularPolicy, softmax, state_update

SMALL = ["--env", "textworld_express", "--game", "coin", "--groups", "6", "--group-size", "4", "--iterations", "6",
         "--jobs", "1", "--no-progress", "--lr", "2"]


def _arena(work, *extra):
    assert cli.main([*SMALL, "--work", str(work), *extra]) == 0


@pytest.mark.slow
def test_two_contestants_deterministic_and_reward_beats_random(tmp_path, capsys):
    _arena(tmp_path / "a", "--contestants", "gigpo", "random", "--seeds", "2")
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first["job"] == "arena" and first["env"] == "textworld_express:coin" and first["ran"] == 4
    assert set(first["time"]) == {"env_s", "credit_s", "update_s"}
    _arena(tmp_path / "b", "--contestants", "gigpo", "random", "--seeds", "2")
    capsys.readouterr()
    table_a = json.loads((tmp_path / "a" / "table.json").read_text())
    assert table_a == json.loads((tmp_path / "b" / "table.json").read_text())  # same seeds -> same table
    results = table_a["results"]
    assert results["gigpo"]["summary"]["auc"]["mean"] > results["random"]["summary"]["auc"]["mean"] + 0.1
    assert results["random"]["paired_vs_gigpo"]["auc"]["high"] < 0  # the control is worse on every seed's pairing
    records = [json.loads(line) for line in (tmp_path / "a" / "runs" / "gigpo" / "seed0-lr2" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == list(range(1, 7))
    for key in ("success_rate", "greedy_success_rate", "mean_steps", "credit/tie_share", "credit/tie_correction_rate",
                "credit/zero_advantage_fraction", "credit/candidates_local_evidence", "credit/evidence_positive_progress"):
        assert key in records[-1]
    assert (tmp_path / "a" / "curves.png").stat().st_size > 5000
    assert "| gigpo |" in (tmp_path / "a" / "table.md").read_text()
    diagnostics = json.loads((tmp_path / "a" / "diagnostics.json").read_text())
    assert set(diagnostics) == {"gigpo", "random"} and 0 <= diagnostics["gigpo"]["tie_share"] <= 1
    assert "| random |" in (tmp_path / "a" / "diagnostics.md").read_text()
    # raw results kept: one line per run, and every table is rebuilt from them alone
    lines = (tmp_path / "a" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["credit"]["tie_share"][0] is not None
    for name in ("table.json", "table.md", "diagnostics.json", "curves.png"):
        (tmp_path / "a" / name).unlink()
    from experiments.arena import summary

    assert summary.main([str(tmp_path / "a")]) == 0
    assert json.loads((tmp_path / "a" / "table.json").read_text()) == table_a
    assert set(json.loads((tmp_path / "a" / "diagnostics.json").read_text())) == {"gigpo", "random"}
    assert (tmp_path / "a" / "curves.png").exists()
    capsys.readouterr()
    # resumable: a rerun skips the finished runs and reports the same table
    _arena(tmp_path / "a", "--contestants", "gigpo", "random", "--seeds", "2")
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["ran"] == 0
    assert json.loads((tmp_path / "a" / "table.json").read_text()) == table_a


def test_transition_cache_replays_exactly_what_the_engine_does():
    """Rollouts through the cache (with hits, resets and prefix replays) equal live stepping, also after
    the cache forgot its states (a worker's bound on memory)."""
    make = lambda: make_adapter("textworld_express", game="coin", gold_path=False, max_steps=12)  # noqa: E731
    policy = TabularPolicy()
    cache = TransitionCache(AdapterBackend(make, 6))
    task_ids = [0, 0, 0, 1, 1, 1]
    for round_ in range(3):  # the second round walks a trie the first one filled; the third starts afresh
        if round_ == 2:
            assert cache.nodes == _count_states(cache.roots.values()) > 0
            assert not cache.forget_if_over(cache.nodes) and cache.roots
            assert cache.forget_if_over(cache.nodes - 1) and not cache.roots and cache.nodes == 0
        seeds = [[round_, r] for r in range(len(task_ids))]
        episodes = cache.play(task_ids, sampling_chooser(policy, seeds))
        live = make()
        for episode in episodes:
            result = live.reset("train", episode.task_id, 0)
            assert result.state_key == episode.nodes[0].state_key
            for action, node in zip(episode.actions, episode.nodes[1:]):
                result = live.step(action)
                assert (result.state_key, result.reward, result.done, result.admissible_actions) == (
                    node.state_key, node.reward, node.done, node.actions)
            assert result.done
        live.close()
    assert cache.stats.policy_steps > cache.stats.engine_steps - cache.stats.policy_steps  # hits happened
    assert cache.nodes == _count_states(cache.roots.values())
    cache.backend.close()


def _count_states(nodes) -> int:
    return sum(1 + _count_states(node.children.values()) for node in nodes)


def _objective(logits, rows, old_logits, clip):
    """Independent reference: mean over rows of the (clipped) surrogate, by brute force."""
    total = 0.0
    for admitted, taken, advantage in zip(rows.admitted, rows.taken, rows.advantage):
        local = list(admitted).index(taken)
        logp = np.log(softmax(logits[admitted])[local])
        if old_logits is None:
            total += advantage * logp
        else:
            ratio = np.exp(logp - np.log(softmax(old_logits[admitted])[local]))
            total += min(ratio * advantage, np.clip(ratio, 1 - clip, 1 + clip) * advantage)
    return total / len(rows.taken)


@pytest.mark.parametrize("epochs", [0, 1])
def test_state_update_is_gradient_ascent_on_the_surrogate(epochs):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=5)
    rows = StateRows(
        admitted=(np.array([0, 1, 2, 3, 4]), np.array([0, 1, 2, 3, 4]), np.array([1, 3, 4])),
        taken=np.array([2, 0, 3]),
        advantage=np.array([1.5, -0.7, 0.4]),
    )
    lr = 1e-3
    step = state_update(logits, rows, lr, epochs=epochs, clip=0.2) - logits
    old = None if epochs == 0 else logits
    numeric = np.array([
        (_objective(logits + e, rows, old, 0.2) - _objective(logits - e, rows, old, 0.2)) / 2e-6
        for e in np.eye(5) * 1e-6
    ])
    np.testing.assert_allclose(step / lr, numeric, rtol=1e-5, atol=1e-7)


def test_ppo_clip_stops_pushing_a_row_past_the_clip():
    policy = TabularPolicy()
    actions = ("a", "b")
    policy.update([Decision("s", actions, "a", 1.0)] * 3, lr=0.5, method="ppo", epochs=20, clip=0.2)
    assert 0.6 <= policy.probabilities("s", actions)[0] < 0.65  # from 0.5: the ratio stops just past 1.2
    unclipped = TabularPolicy()
    unclipped.update([Decision("s", actions, "a", 1.0)] * 3, lr=0.5, method="ppo", epochs=20, clip=100.0)
    assert unclipped.probabilities("s", actions)[0] > 0.95


def test_sampling_follows_the_softmax():
    policy = TabularPolicy()
    policy.update([Decision("s", ("a", "b", "c"), "c", 1.0)], lr=3.0)
    probs = policy.probabilities("s", ("a", "b", "c"))
    rng = random.Random(0)
    draws = [policy.sample("s", ("a", "b", "c"), rng.random()) for _ in range(20000)]
    np.testing.assert_allclose([draws.count(a) / len(draws) for a in "abc"], probs, atol=0.015)
    assert policy.greedy("s", ("a", "b", "c")) == "c"


def test_stats_against_hand_computed_values():
    assert stats.iterations_to([0.1, 0.5, 0.9], 0.5) == 2 and stats.iterations_to([0.1, 0.2], 0.8) is None
    scores = stats.run_scores([0.2, 0.6, 0.85], [0.0, 1.0, 1.0])
    assert scores == {"last": 0.85, "auc": pytest.approx(0.55), "greedy_last": 1.0, "iters_to_50": 2, "iters_to_80": 3}
    interval = stats.paired_interval([0.1, 0.3, 0.2])  # mean 0.2, s.d. 0.1, t(2) = 4.303
    assert interval["mean"] == pytest.approx(0.2)
    assert interval["high"] - interval["mean"] == pytest.approx(4.3027 * 0.1 / np.sqrt(3), rel=1e-4)  # t(0.975, 2), from tables
    mean, error = stats.band([[0.0, 1.0], [1.0, 1.0]])
    assert mean == [0.5, 1.0] and error[0] == pytest.approx(np.sqrt(0.5) / np.sqrt(2)) and error[1] == 0.0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--contestants", "gigpo", "nosuch"], "unknown estimator 'nosuch'"),
        (["--contestants", "milegpo:wide"], "unknown stage 'wide'"),
        (["--contestants", "gigpo:md"], "--stage applies to milegpo only"),
        (["--contestants", "milegpo:full@nosuch=1"], "unknown credit option 'nosuch'"),
        (["--set", "eta=abc"], "eta='abc': expected float"),
        (["--tasks", "0"], "--tasks 0: must be in 1..4096"),
        (["--env", "nethack"], "unknown environment 'nethack'"),
        (["--game", "zork"], "unknown TextWorldExpress game 'zork'"),
        (["--update", "trpo"], "--update 'trpo'"),
        (["--contestants", "beacon"], "needs milestone flags"),
        (["--train-tasks", "3,x"], "expected comma-separated task ids"),
        (["--train-tasks", "3,3"], "distinct"),
        (["--train-tasks", "3,1000"], "holds task ids 0..999"),
        # every count has a bound, checked before anything is allocated (issue 46: 3 GB in 19 s)
        (["--seeds", "100000000"], "--seeds 100000000: must be in 1..1000"),
        (["--iterations", "0"], "--iterations 0: must be in 1..1000000"),
        (["--max-steps", "0"], "--max-steps 0: must be in 1..1000"),
        (["--groups", "100", "--group-size", "100"], "--groups x --group-size: 10000 episodes at once, at most 4096"),
        # grid values that would run the same run twice, or two rates in one run directory
        (["--lr-grid", "1,1"], "--lr-grid '1,1': rate 1 is given twice"),
        (["--lr-grid", "0.1,0.1000001"], "rates 0.1 and 0.1000001 share the run directory name lr0.1"),
        (["--lr-grid", "1,nan"], "rate nan must be a finite number > 0"),
        (["--lr", "inf"], "--lr inf: must be a finite number > 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    work = tmp_path / "work"
    assert cli.main(["--work", str(work), "--jobs", "1", "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and err.startswith("experiments.arena: ")
    assert not work.exists()  # nothing half-written


@pytest.mark.parametrize(
    "content, message",
    [(b'{"env": "textworld_express:coin", "settings": {"gro', "arena.json:1: not JSON"), (b"\xff\xfe{}", "arena.json: not UTF-8 text")],
)
def test_an_unreadable_arena_json_is_one_line_and_left_alone(tmp_path, capsys, content, message):
    work = tmp_path / "work"
    work.mkdir()
    (work / "arena.json").write_bytes(content)  # truncated, or not UTF-8: was a 21-line traceback
    assert cli.main(["--work", str(work), "--jobs", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("experiments.arena: ") and message in err, err
    assert sorted(p.name for p in work.iterdir()) == ["arena.json"] and (work / "arena.json").read_bytes() == content


def test_a_work_path_that_is_a_file_is_refused(tmp_path, capsys):
    work = tmp_path / "file"
    work.write_text("x")
    assert cli.main(["--work", str(work), "--jobs", "1", "--no-progress"]) == 2
    assert capsys.readouterr().err.strip() == f"experiments.arena: --work {work}: not a directory"


def test_work_dir_with_other_settings_is_refused(tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "arena.json").write_text(json.dumps({"env": "webshop"}))
    assert cli.main(["--work", str(work), "--jobs", "1", "--no-progress"]) == 2
    assert "other settings" in capsys.readouterr().err


def test_all_expands_to_the_registry():
    from experiments.arena.contestants import expand_all
    from milegpo_jax.credit.estimators import registered_estimators

    names = expand_all()
    assert names[-1] == "random" and {"milegpo:md", "milegpo:rcs", "milegpo:full"} <= set(names)
    assert {name.split(":")[0] for name in names[:-1]} == set(registered_estimators())
    assert "beacon" in names and "beacon" not in expand_all(milestones=False)  # TWX flags no milestones


def test_lr_grid_reports_each_contestant_at_its_best_rate():
    from experiments.arena.analysis import analyse

    def record(name, lr, seed, level):
        return {"contestant": name, "lr": lr, "update": "pg", "seed": seed, "success": [level * 0.5, level],
                "greedy": [0.0, level], "credit": {}}

    done = [record("gigpo", 1.0, s, 0.6) for s in (0, 1)] + [record("gigpo", 3.0, s, 0.4) for s in (0, 1)]
    done += [record("grpo", 1.0, s, 0.2) for s in (0, 1)] + [record("grpo", 3.0, s, 0.5 + 0.1 * s) for s in (0, 1)]
    analysed = analyse(done, None, 0.01)
    results, curves = analysed["results"], analysed["curves"]
    assert results["gigpo"]["lr"] == 1.0 and results["grpo"]["lr"] == 3.0
    assert results["grpo"]["summary"]["last"]["mean"] == pytest.approx(0.55)
    assert results["grpo"]["paired_vs_gigpo"]["last"]["mean"] == pytest.approx(-0.05)  # against gigpo's chosen rate
    assert curves["grpo"] == [[0.25, 0.5], [0.3, 0.6]]


@pytest.mark.slow
def test_pool_backend_plays_the_same_episodes_as_in_process():
    from envs_bridge.client import EnvPool
    from experiments.arena.play import PoolBackend

    options = {"game": "coin", "gold_path": False, "max_steps": 10}
    task_ids, seeds = [0, 0, 3, 3], [[7, r] for r in range(4)]
    in_process = TransitionCache(AdapterBackend(lambda: make_adapter("textworld_express", **options), 4))
    expected = in_process.play(task_ids, sampling_chooser(TabularPolicy(), seeds))
    in_process.backend.close()
    with EnvPool("textworld_express", 4, num_servers=1, env_options=options) as pool:
        played = TransitionCache(PoolBackend(pool)).play(task_ids, sampling_chooser(TabularPolicy(), seeds))
    assert [e.actions for e in played] == [e.actions for e in expected]
    assert [[n.state_key for n in e.nodes] for e in played] == [[n.state_key for n in e.nodes] for e in expected]


def test_runs_sharing_a_process_cache_learn_exactly_as_with_their_own():
    """A worker's runs share one transition cache: the curves are those of fresh caches, with less engine work."""
    from experiments.arena.contestants import parse_contestants
    from experiments.arena.envs import make_arena_env
    from experiments.arena.run import RunSettings, run_once

    spec = make_arena_env("textworld_express", "coin", 15, "inprocess", 1, {})
    contestants = parse_contestants(["gigpo", "milegpo:md"], "alfworld", {}, False)
    settings = RunSettings(groups=2, group_size=4, tasks=2, iterations=3, reward_scale=10.0)

    def curves(cache_for):
        out = []
        for contestant in contestants:
            cache = cache_for()
            out.append((run_once(contestant, 0, 1.0, settings, cache, lambda i, m: None)["success"], cache.stats.engine_steps))
        return out

    backends = []
    fresh = curves(lambda: TransitionCache(backends.append(cli.make_backend(spec, 8)) or backends[-1]))
    for backend in backends:
        backend.close()
    try:
        shared = curves(lambda: cli._cache(spec, 8))
    finally:
        cli._close_backends()
    assert [curve for curve, _ in shared] == [curve for curve, _ in fresh]
    assert shared[0][1] == fresh[0][1] and shared[1][1] < fresh[1][1]  # the second run reuses the first's answers


def test_train_tasks_fix_every_seeds_task_set():
    from experiments.arena.contestants import parse_contestants
    from experiments.arena.run import RunSettings, run_once

    make = lambda: make_adapter("textworld_express", game="coin", gold_path=False, max_steps=5)  # noqa: E731
    (contestant,) = parse_contestants(["gigpo"], "alfworld", {}, False)
    settings = RunSettings(groups=3, group_size=2, tasks=2, train_tasks=(7, 42), iterations=2, reward_scale=10.0)
    for seed in (0, 1):
        cache = TransitionCache(AdapterBackend(make, 6))
        run_once(contestant, seed, 1.0, settings, cache, lambda i, m: None)
        assert set(cache.roots) == {7, 42}  # only the given tasks were played (G=3 > 2 tasks: drawn with replacement)
        cache.backend.close()


def test_diagnostics_means_skip_undefined_ratios_and_pool_by_pair_counts():
    records = [
        {"credit/tie_correction_rate": 0.5, "credit/opposite_outcome_tied_pairs": 2, "credit/traps": 4, "success_rate": 1.0},
        {"credit/tie_correction_rate": None, "credit/opposite_outcome_tied_pairs": 0, "credit/traps": 2},
        {"credit/tie_correction_rate": 1.0, "credit/opposite_outcome_tied_pairs": 6, "credit/traps": 0},
    ]
    means = stats.diagnostics_means(records)
    assert means["tie_correction_rate"] == pytest.approx(0.75)  # (0.5 + 1.0) / 2: the None iteration is skipped
    assert means["pooled_tie_correction_rate"] == pytest.approx((0.5 * 2 + 1.0 * 6) / 8)
    assert means["traps"] == pytest.approx(2.0) and "success_rate" not in means
    assert means["pooled_tie_share"] is None  # no same-state pair counts recorded


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read()
    except OSError:
        return b""


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend, marker", [("inprocess", b"java"), ("pool", b"envs_bridge.server")])
def test_workers_and_their_env_processes_exit_when_the_main_process_is_killed(tmp_path, backend, marker):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.train.test_trainer_resilience import _descendants, _kill_all, _wait_gone

    command = [sys.executable, "-m", "experiments.arena", "--env", "textworld_express", "--game", "coin",
               "--backend", backend, "--servers", "1", "--contestants", "grpo", "--seeds", "2", "--jobs", "2",
               "--iterations", "100000", "--groups", "2", "--group-size", "2", "--no-progress", "--work", str(tmp_path / "w")]
    main = subprocess.Popen(command, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    below: set = set()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # both workers have their env processes
            below = _descendants(main.pid)
            if sum(marker in _cmdline(pid) for pid, _ in below) >= 2:
                break
            assert main.poll() is None, "the arena ended before the test could kill it"
            time.sleep(0.5)
        else:
            pytest.fail(f"no two {marker!r} processes below the arena in time")
        below = _descendants(main.pid)
        os.kill(main.pid, signal.SIGKILL)
        main.wait()
        assert not _wait_gone(below, timeout_s=15), "workers or env processes outlived their killed parent"
    finally:
        _kill_all(below)
        if main.poll() is None:
            main.kill()

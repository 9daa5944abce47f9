"""``python -m experiments.arena compare`` (docs/arena.md, "Tree against independent rollouts";
docs/results/branching.md item 5) on synthetic studies written in the arena's exact format: the
verdicts against hand-computed intervals, the Bonferroni level 0.05/claims, each arm at its own chosen
option, AUC read over env steps, a byte-for-byte rebuild, and bad input (one line naming the flag,
exit 2, nothing written)."""

import json
import shutil

import pytest
from scipy import stats as scipy_stats

from experiments.arena import compare, output, stats
from experiments.arena.run import RunSettings

GAMES = {"twc3": {"_preset": "twc3", "game": "twc"}, "mapreader": {"_preset": "mapreader", "game": "mapreader"}}
EVAL = [1, 2, 3, 4]
# tree - independent AUC differences per evaluation seed, each arm's AUC = BASE + difference (hand-made)
CASES = {
    "twc3": {"gigpo": (0.4, [0.10, 0.12, 0.14, 0.16]), "grpo": (0.3, [0.001, -0.001, 0.002, 0.0])},
    "mapreader": {"gigpo": (0.5, [-0.20, -0.22, -0.18, -0.21]), "grpo": (0.4, [0.10, -0.10, 0.08, -0.09])},
}
EXPECTED = {("twc3", "gigpo"): "supported", ("twc3", "grpo"): "equivalent",
            ("mapreader", "gigpo"): "refuted", ("mapreader", "grpo"): "unresolved"}


def _record(name, seed, lr, auc, tree, scale=1):
    """A run record as cli.execute writes it. A tree run plays 4 iterations of 10, 40, 25 and 25 env
    steps whose success over the budget of 100 env steps on 2 cells is [auc, auc] (AUC over env steps
    ``auc``; the mean over its iterations is auc + 0.075); an independent run plays 2 of 50 steps.
    ``scale`` multiplies the steps (a budget of 100 x scale). The greedy policy's success is auc / 2 on
    the last cell (0 before)."""
    if tree:
        success, spent = [auc + 0.4, auc - 0.1, auc, auc], [10, 40, 25, 25]
    else:
        success, spent = [auc, auc], [50, 50]
    greedy = [0.0, 0.0, auc / 2, auc / 2] if tree else [0.0, auc / 2]
    record = {"contestant": name, "seed": seed, "lr": lr, "update": "pg", "success": success, "greedy": greedy,
              "credit": {"tie_share": [0.1] * len(spent)}, "time": {"env_s": 0.0, "credit_s": 0.0, "update_s": 0.0},
              "branching": {"roots": 2, "branches": 1, "fork_at": "uniform"} if tree else None,
              "env_steps": [n * scale for n in spent]}
    if tree:
        record |= {"forks": [4] * len(spent), "shared_steps": [5] * len(spent)}
    return record


def _arm(directory, game, tree, cases=None, eval_seeds=EVAL, env_steps=100, margin=0.04, drop=()):
    """A study arm: selection seed 0 at rates 1 and 3 (the independent arm picks rate 1, the tree arm
    rate 3), evaluation seeds at the chosen rate only, and decoys at the other rate on seed 1."""
    chosen, other = (3.0, 1.0) if tree else (1.0, 3.0)
    records = []
    for name, (base, differences) in (cases or CASES[game]).items():
        if name in drop:
            continue
        scale = env_steps // 100
        records += [_record(name, 0, chosen, 0.5, tree, scale), _record(name, 0, other, 0.2, tree, scale),
                    _record(name, 1, other, 0.6, tree, scale)]
        records += [_record(name, seed, chosen, base + (d if tree else 0.0), tree, scale)
                    for seed, d in zip(EVAL, differences) if seed in eval_seeds]
    settings = RunSettings(groups=2, group_size=4, tasks=2, iterations=2, env_steps=env_steps,
                           branching=(2, 1, "uniform") if tree else None, max_env_steps=50 if tree else None)
    recorded = {"env": f"textworld_express:{game}", "env_options": GAMES[game], "recipe": "alfworld", "credit_set": [],
                "settings": settings.recorded(),
                "study": {"select_seeds": [0], "eval_seeds": eval_seeds, "updates": ["pg"], "margin": margin, "lr_grid": [1.0, 3.0]}}
    directory.mkdir(parents=True)
    output.write_json_atomic(directory / output.SETTINGS_FILE, recorded)
    output.write_results(directory, records)
    return directory


@pytest.fixture
def arms(tmp_path):
    return {(game, arm): _arm(tmp_path / f"{game}-{arm}", game, arm == "tree") for game in GAMES for arm in ("independent", "tree")}


def _argv(arms, out, games=tuple(GAMES), margin="0.04"):
    argv = []
    for game in games:
        argv += ["--baseline", str(arms[game, "independent"]), "--treatment", str(arms[game, "tree"])]
    return [*argv, "--margin", margin, "--out", str(out)]


def _bonferroni_interval(differences, claims):
    mean, sd = stats.mean_std(differences)
    half = scipy_stats.t.ppf(1 - 0.05 / claims / 2, len(differences) - 1) * sd / len(differences) ** 0.5
    return mean - half, mean + half


def test_verdicts_against_hand_computed_intervals(arms, tmp_path, capsys):
    assert compare.main(_argv(arms, tmp_path / "out")) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["claims"] == {f"textworld_express:{g}: {n}: tree > independent": v for (g, n), v in EXPECTED.items()}
    result = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert [(row["game"], row["contestant"]) for row in result["claims"]] == [(f"textworld_express:{g}", n) for g, n in EXPECTED]
    for row, ((game, name), verdict) in zip(result["claims"], EXPECTED.items()):
        base, differences = CASES[game][name]
        # the Bonferroni level is 0.05 over the 4 claims given, and the interval the paired t interval at it
        assert row["level"] == pytest.approx(0.05 / 4) and row["seeds"] == 4 and row["verdict"] == verdict
        assert row["mean"] == pytest.approx(sum(differences) / 4, abs=1e-8)
        low, high = _bonferroni_interval(differences, 4)
        assert (row["low"], row["high"]) == (pytest.approx(low, abs=1e-8), pytest.approx(high, abs=1e-8))
        p = 2 * scipy_stats.t.sf(abs(row["mean"]) / (stats.mean_std(differences)[1] / 2), 3)
        assert row["p"] == pytest.approx(p, rel=1e-6) and row["p_bonferroni"] == pytest.approx(min(1.0, 4 * p), rel=1e-6)
        # each arm at the rate its own study chose, AUC read over env steps (not the iterations' mean)
        assert row["options"] == ["lr 1", "lr 3"]
        assert [s for s, _, _ in row["per_seed"]] == EVAL and row["auc"][0] == pytest.approx(base)
        assert [t - b for _, b, t in row["per_seed"]] == pytest.approx(differences, abs=1e-8)
        second = next(r for r in result["second"] if (r["game"], r["contestant"]) == row_key(game, name))
        assert second["last"] == pytest.approx(stats.paired_interval(differences), abs=1e-8)
        assert second["greedy_last"] == pytest.approx(stats.paired_interval([d / 2 for d in differences]), abs=1e-8)
    # the hand arithmetic of the supported claim: mean 0.13, s.d. sqrt(0.002 / 3), t(1 - 0.0125/2, 3) = 5.39195
    assert result["claims"][0]["low"] == pytest.approx(0.13 - 5.39195 * (0.002 / 3) ** 0.5 / 2, abs=1e-5)
    text = (tmp_path / "out" / "compare.md").read_text()
    assert "4 claims \"tree > independent\", every interval at 0.05/4 (confidence 0.9875)" in text
    assert "**supported**" in text and "Margin ±0.04 AUC" in text and "twc3-tree" in text


def row_key(game, name):
    return f"textworld_express:{game}", name


def test_the_verdicts_are_those_of_the_arena_claims(arms, tmp_path):
    # one game: 2 claims at 0.05/2, the same rows stats.judge_claims gives for these differences
    assert compare.main(_argv(arms, tmp_path / "out", games=("twc3",))) == 0
    rows = json.loads((tmp_path / "out" / "compare.json").read_text())["claims"]
    assert [row["level"] for row in rows] == [0.025, 0.025]
    scores = {f"{name} {arm}": {s: (b + (d if arm == "tree" else 0.0)) for s, d in zip(EVAL, ds)}
              for name, (b, ds) in CASES["twc3"].items() for arm in ("tree", "independent")}
    reference = stats.judge_claims(scores, [(f"{n} tree", f"{n} independent") for n in CASES["twc3"]], 0.04)
    for row, expected in zip(rows, reference):
        for key in ("mean", "low", "high", "p", "p_bonferroni", "p_holm", "level"):
            assert row[key] == pytest.approx(expected[key], abs=1e-8), key
        assert row["verdict"] == expected["verdict"]


def test_rebuilds_byte_for_byte_from_the_records(arms, tmp_path):
    assert compare.main(_argv(arms, tmp_path / "first")) == 0
    moved = {key: shutil.copytree(path, tmp_path / "elsewhere" / path.name) for key, path in arms.items()}
    assert compare.main(_argv(moved, tmp_path / "second")) == 0
    for name in ("compare.md", "compare.json"):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes(), name
    assert sorted(p.name for p in (tmp_path / "first").iterdir()) == ["compare.json", "compare.md"]


def _refused(capsys, argv, out, flag, *words):
    assert compare.main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and error.startswith(f"experiments.arena compare: {flag}"), error
    assert all(word in error for word in words), error
    assert not out.exists()


@pytest.mark.parametrize("case, flag, words", [
    ("missing", "--baseline", ["not a directory"]),
    ("other game", "--treatment", ["game textworld_express:mapreader", "textworld_express:twc3"]),
    ("other budget", "--treatment", ["budget 200 env steps", "has 100"]),
    ("contestant missing", "--treatment", ["no grpo"]),
    ("contestant missing in the baseline", "--baseline", ["no grpo"]),
    ("other evaluation seeds", "--treatment", ["evaluation seeds 1-3"]),
    ("an evaluation run missing", "--treatment", ["gigpo has evaluation runs at its chosen option on seeds 1-3"]),
    ("baseline branching", "--baseline", ["a tree arm (--branching 2,1,uniform)"]),
    ("treatment independent", "--treatment", ["independent rollouts; the treatment is a tree arm"]),
    ("other margin", "--margin", ["recorded 0.04"]),
    ("no budget", "--baseline", ["no --env-steps budget"]),
    ("not a study", "--treatment", ["not a study"]),
])
def test_bad_input_is_one_line_naming_the_flag(tmp_path, capsys, case, flag, words):
    base = _arm(tmp_path / "independent", "twc3", False)
    tree_options = {
        "other game": {"game": "mapreader", "cases": CASES["twc3"]},
        "other budget": {"env_steps": 200},
        "contestant missing": {"drop": ("grpo",)},
        "other evaluation seeds": {"eval_seeds": [1, 2, 3]},
    }.get(case, {})
    game = tree_options.pop("game", "twc3")
    tree = _arm(tmp_path / "tree", game, True, **tree_options)
    argv = ["--baseline", str(base), "--treatment", str(tree), "--margin", "0.04", "--out", str(tmp_path / "out")]
    if case == "missing":
        argv[1] = str(tmp_path / "none")
    elif case == "contestant missing in the baseline":
        shutil.rmtree(base)
        _arm(base, "twc3", False, drop=("grpo",))
    elif case == "an evaluation run missing":
        records = [r for r in output.read_results(tree) if not (r["contestant"] == "gigpo" and r["seed"] == 4)]
        output.write_results(tree, records)
    elif case == "baseline branching":
        argv[1], argv[3] = str(tree), str(tree)
    elif case == "treatment independent":
        argv[3] = str(base)
    elif case == "other margin":
        argv[5] = "0.05"
    elif case == "no budget":
        settings = json.loads((base / "arena.json").read_text())
        del settings["settings"]["env_steps"]
        output.write_json_atomic(base / "arena.json", settings)
        records = [{k: v for k, v in r.items() if k not in ("branching", "env_steps")} for r in output.read_results(base)]
        output.write_results(base, records)
    elif case == "not a study":
        settings = json.loads((tree / "arena.json").read_text())
        del settings["study"]
        output.write_json_atomic(tree / "arena.json", settings)
    _refused(capsys, argv, tmp_path / "out", flag, *words)


def test_bad_pairing_is_refused(arms, tmp_path, capsys):
    out = tmp_path / "out"
    argv = _argv(arms, out)
    _refused(capsys, [*argv[:4], "--baseline", argv[5], "--margin", "0.04", "--out", str(out)], out,
             "--treatment", "1 given for 2 --baseline")
    twice = ["--baseline", str(arms["twc3", "independent"]), "--treatment", str(arms["twc3", "tree"])] * 2
    _refused(capsys, [*twice, "--margin", "0.04", "--out", str(out)], out, "--baseline", "textworld_express:twc3 is given twice")
    (tmp_path / "file").write_text("")
    _refused(capsys, [*_argv(arms, tmp_path / "file")], tmp_path / "nothing", "--out", "not a directory")

"""experiments.plot draws the curves of several runs into one PNG."""

import json

import matplotlib.image
import pytest

from experiments import plot
from milegpo_jax.train.logging import MetricsLogger


def _fake_run(directory, slope, seed):
    with MetricsLogger(directory, tensorboard=False) as logger:
        for iteration in range(21):
            if iteration:
                logger.log(iteration, {"rollout": {"success_rate": min(1.0, slope * iteration), "episode_length": 30 - iteration},
                                       "actor": {"kl": 0.001 * iteration, "entropy": 1.0 - 0.01 * seed}})
            if iteration % 5 == 0:
                logger.log(iteration, {"eval_id": {"success_rate": min(1.0, slope * iteration + 0.05)}})


@pytest.fixture
def two_runs(tmp_path):
    runs = [tmp_path / "milegpo", tmp_path / "grpo"]
    _fake_run(runs[0], 0.05, 0)
    _fake_run(runs[1], 0.03, 1)
    return runs


def test_plot_writes_a_png_of_both_runs(tmp_path, two_runs, capsys):
    out = tmp_path / "figures" / "curves.png"
    assert plot.main([str(d) for d in two_runs] + ["--out", str(out), "--metrics", "success_rate,actor/kl", "--smooth", "3"]) == 0
    image = matplotlib.image.imread(out)
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 600  # three panels side by side
    assert image[..., :3].std() > 0.05  # something was drawn
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["metrics"] == ["eval_id/success_rate", "rollout/success_rate", "actor/kl"]


def test_default_metrics_are_those_logged(two_runs, tmp_path):
    drawn = plot.plot_runs(two_runs, tmp_path / "default.png")
    # The trainer's own names (rollout/*, actor/*), which the default panels must find.
    assert drawn == ["eval_id/success_rate", "rollout/success_rate", "rollout/episode_length", "actor/kl", "actor/entropy"]


def test_unknown_metric_names_close_matches(two_runs, tmp_path, capsys):
    assert plot.main([str(d) for d in two_runs] + ["--out", str(tmp_path / "x.png"), "--metrics", "sucess_rate"]) == 2
    assert "did you mean" in capsys.readouterr().err


def test_missing_workdir_is_reported(tmp_path, capsys):
    assert plot.main([str(tmp_path / "nope"), "--out", str(tmp_path / "x.png")]) == 2
    assert "metrics.jsonl does not exist" in capsys.readouterr().err


GOOD_LINE = '{"iteration": 1, "rollout/success_rate": 0.5}'


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([GOOD_LINE, "[1, 2, 3]", GOOD_LINE], "metrics.jsonl:2: expected a JSON object, got a JSON list"),
        ([GOOD_LINE, '"text"', GOOD_LINE], "metrics.jsonl:2: expected a JSON object, got a JSON str"),
        (['{"rollout/success_rate": 0.5}', GOOD_LINE], "metrics.jsonl:1: 'iteration' must be an integer, got None"),
        (['{"iteration": "3"}', GOOD_LINE], "metrics.jsonl:1: 'iteration' must be an integer, got '3'"),
        ([GOOD_LINE, "{not json", GOOD_LINE], "metrics.jsonl:2: not JSON"),
        ([GOOD_LINE, '{"iteration": ' + "9" * 4401 + "}", GOOD_LINE], "metrics.jsonl:2: not JSON"),
        ([GOOD_LINE, "[" * 3000 + "]" * 3000, GOOD_LINE], "metrics.jsonl:2: not JSON"),
        ([GOOD_LINE, b"\xff\xfe{}", GOOD_LINE], "metrics.jsonl:2: not UTF-8 text"),
    ],
)
def test_bad_metrics_lines_name_the_file_and_line(tmp_path, capsys, lines, message):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(b"\n".join(line if isinstance(line, bytes) else line.encode() for line in lines) + b"\n")
    out = tmp_path / "x.png"
    assert plot.main([str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and str(run) in err[0]
    assert not out.exists()


def test_non_finite_values_are_left_out_and_reported(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    values = ["0.1", "NaN", "0.3", "Infinity", "0.5"]
    (run / "metrics.jsonl").write_text("".join(f'{{"iteration": {i}, "actor/kl": {v}}}\n' for i, v in enumerate(values, 1)))
    skipped = {}
    runs = plot.load_runs([run], skipped)
    assert runs["run"]["actor/kl"] == [(1, 0.1), (3, 0.3), (5, 0.5)]
    assert plot.main([str(run), "--out", str(tmp_path / "x.png")]) == 0
    captured = capsys.readouterr()
    assert "non-finite values left out" in captured.err and "run: actor/kl (2)" in captured.err
    assert json.loads(captured.out.strip().splitlines()[-1])["skipped_non_finite"] == {"run: actor/kl": 2}


def test_bad_smooth_and_unwritable_out_are_one_line(two_runs, tmp_path, capsys):
    assert plot.main([str(two_runs[0]), "--out", str(tmp_path / "x.png"), "--smooth", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --smooth must be >= 1, got 0"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert plot.main([str(two_runs[0]), "--out", str(blocker / "x.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write" in err[0]

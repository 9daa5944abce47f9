"""The arena's kept results and its statistics: ``summarize`` rebuilds the tables of a committed study
sample (tests/data/arena-sample: a real 15-run study on coin, diagnostics trimmed to those the tables
use) against numbers computed here from the raw lines; Holm, the paired t test and the verdicts
against hand-computed values and scipy; the study command's bad input."""

import gzip
import json
import shutil
import statistics
from pathlib import Path

import pytest
from scipy import stats as scipy_stats

from experiments.arena import stats, study, summary

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "arena-sample"


def _auc(record):
    return sum(record["success"]) / len(record["success"])


def test_summarize_rebuilds_the_committed_sample(tmp_path, capsys):
    work = tmp_path / "sample"
    shutil.copytree(SAMPLE, work)
    assert summary.main([str(work)]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    records = [json.loads(text) for text in (SAMPLE / "results.jsonl").read_text().splitlines()]
    names = ["gigpo", "graphgpo", "milegpo:md"]
    assert line["contestants"] == names

    # the rate: best mean AUC on selection seed 0 (ties to the smaller rate); scored on seeds 1-3 only
    chosen, evaluated = {}, {}
    for name in names:
        by_rate = {}
        for r in records:
            if r["contestant"] == name and r["seed"] == 0:
                by_rate[r["lr"]] = _auc(r)
        chosen[name] = max(sorted(by_rate), key=lambda lr: by_rate[lr])
        evaluated[name] = {r["seed"]: r for r in records if r["contestant"] == name and r["lr"] == chosen[name] and r["seed"] != 0}
        assert sorted(evaluated[name]) == [1, 2, 3]
    table = json.loads((work / "table.json").read_text())["results"]
    for name in names:
        aucs = [_auc(evaluated[name][s]) for s in (1, 2, 3)]
        assert table[name]["lr"] == chosen[name]
        assert table[name]["summary"]["auc"]["mean"] == pytest.approx(statistics.mean(aucs))
        assert table[name]["summary"]["auc"]["std"] == pytest.approx(statistics.stdev(aucs))
        assert table[name]["summary"]["last"]["mean"] == pytest.approx(statistics.mean(evaluated[name][s]["success"][-1] for s in (1, 2, 3)))
    selection = json.loads((work / "selection.json").read_text())
    assert selection["chosen"] == {name: f"lr {chosen[name]:g}" for name in names}

    # committed studies keep results.jsonl gzipped: the same tables from it
    packed = tmp_path / "packed"
    packed.mkdir()
    shutil.copy(SAMPLE / "arena.json", packed)
    (packed / "results.jsonl.gz").write_bytes(gzip.compress((SAMPLE / "results.jsonl").read_bytes()))
    assert summary.main([str(packed)]) == 0
    capsys.readouterr()
    for name in ("table.json", "claims.json", "selection.json", "table.md", "claims.md"):
        assert (packed / name).read_text() == (work / name).read_text(), name

    # the claims present: md > graphgpo, graphgpo > gigpo; Holm over the two, scipy's paired t test
    claims = json.loads((work / "claims.json").read_text())
    assert claims["margin"] == 0.01 and claims["best_outsider"] is None
    rows = {row["claim"]: row for row in claims["claims"]}
    assert list(rows) == ["milegpo:md > graphgpo", "graphgpo > gigpo"]
    p = {}
    for a, b in (("milegpo:md", "graphgpo"), ("graphgpo", "gigpo")):
        p[a, b] = scipy_stats.ttest_rel([_auc(evaluated[a][s]) for s in (1, 2, 3)], [_auc(evaluated[b][s]) for s in (1, 2, 3)]).pvalue
        assert rows[f"{a} > {b}"]["p"] == pytest.approx(p[a, b])
    small, large = sorted(p.values())
    assert sorted(row["p_holm"] for row in rows.values()) == pytest.approx([min(1, 2 * small), max(min(1, 2 * small), large)])
    first = min(rows.values(), key=lambda row: row["p"])
    differences = [_auc(evaluated[first["a"]][s]) - _auc(evaluated[first["b"]][s]) for s in (1, 2, 3)]
    low, high = scipy_stats.t.interval(1 - 0.025, 2, loc=statistics.mean(differences),
                                       scale=statistics.stdev(differences) / 3**0.5)
    assert (first["low"], first["high"]) == (pytest.approx(low), pytest.approx(high))

    # the pooled tie-correction rate beside each row: pairs-weighted over the evaluation runs' iterations
    diagnostics = json.loads((work / "diagnostics.json").read_text())
    for name in names:
        pairs = [(rate, n) for r in evaluated[name].values()
                 for rate, n in zip(r["credit"]["tie_correction_rate"], r["credit"]["opposite_outcome_tied_pairs"])
                 if rate is not None and n]
        expected = sum(rate * n for rate, n in pairs) / sum(n for _, n in pairs)
        assert diagnostics[name]["pooled_tie_correction_rate"] == pytest.approx(expected)
    assert f"{diagnostics['graphgpo']['pooled_tie_correction_rate']:.2f} / " in (work / "claims.md").read_text()
    assert "| gigpo |" in (work / "table.md").read_text() and (work / "curves.png").stat().st_size > 5000


def test_summarize_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert summary.main([str(tmp_path / "nothing")]) == 2
    assert "arena.json: no such file" in capsys.readouterr().err
    work = tmp_path / "bad"
    shutil.copytree(SAMPLE, work)
    lines = (work / "results.jsonl").read_text().splitlines()
    (work / "results.jsonl").write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    assert summary.main([str(work)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "results.jsonl:2: not JSON" in err
    (work / "results.jsonl").write_text(json.dumps({"contestant": "gigpo"}) + "\n")
    assert summary.main([str(work)]) == 2
    assert "results.jsonl:1: a run record needs seed" in capsys.readouterr().err
    (work / "results.jsonl").unlink()
    (work / "results.jsonl.gz").write_bytes(b"not gzip")
    assert summary.main([str(work)]) == 2
    assert "results.jsonl.gz: not readable" in capsys.readouterr().err


def _gzip_with_corrupt_deflate(work):
    data = bytearray(gzip.compress((work / "results.jsonl").read_bytes()))
    data[20:60] = bytes(b ^ 0x55 for b in data[20:60])  # the header stays valid, the deflate stream does not
    (work / "results.jsonl").unlink()
    (work / "results.jsonl.gz").write_bytes(bytes(data))


def _record_with(work, **fields):
    lines = (work / "results.jsonl").read_text().splitlines()
    record = {**json.loads(lines[1]), **fields}
    (work / "results.jsonl").write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")


@pytest.mark.parametrize(
    "damage, message",
    [
        (_gzip_with_corrupt_deflate, "results.jsonl.gz: not readable (Error -3 while decompressing data"),
        (lambda work: (work / "arena.json").write_text("[]"), "arena.json: expected a JSON object with env and settings"),
        (lambda work: (work / "arena.json").write_bytes(b"\xff{}"), "arena.json: not UTF-8 text"),
        (lambda work: _record_with(work, seed="five"), "results.jsonl: run record 2: seed 'five': a seed is an integer"),
        (lambda work: _record_with(work, success=[None] * 4, greedy=[0.0] * 4), "run record 2: success: expected a list of success rates"),
        (lambda work: _record_with(work, success="abc", greedy="abc"), "run record 2: success: expected a list of success rates"),
        (lambda work: _record_with(work, success=5), "results.jsonl: a run record's success and greedy must be lists"),
    ],
)
def test_summarize_bad_files_are_one_line_and_write_nothing(tmp_path, capsys, damage, message):
    """Issue 46: each was a traceback (zlib.error, AttributeError, UnicodeDecodeError, TypeError)."""
    work = tmp_path / "work"
    shutil.copytree(SAMPLE, work)
    damage(work)
    before = sorted(path.name for path in work.iterdir())
    assert summary.main([str(work)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("experiments.arena summarize: ") and message in err, err
    assert sorted(path.name for path in work.iterdir()) == before


def test_summarize_a_file_instead_of_a_directory(tmp_path, capsys):
    assert summary.main([str(SAMPLE / "arena.json")]) == 2  # was a NotADirectoryError traceback
    assert capsys.readouterr().err.strip() == (f"experiments.arena summarize: {SAMPLE / 'arena.json'}: "
                                               "not a directory (an arena work directory)")


def test_paired_t_matches_scipy():
    differences = [0.03, -0.01, 0.05, 0.02, 0.04]
    test = stats.paired_t(differences, 0.05 / 3)
    assert test["p"] == pytest.approx(scipy_stats.ttest_1samp(differences, 0.0).pvalue)
    low, high = scipy_stats.t.interval(1 - 0.05 / 3, 4, loc=statistics.mean(differences), scale=statistics.stdev(differences) / 5**0.5)
    assert (test["low"], test["high"]) == (pytest.approx(low), pytest.approx(high))
    assert stats.paired_t([0.0, 0.0], 0.05)["p"] == 1.0 and stats.paired_t([0.1, 0.1], 0.05)["p"] == 0.0
    with pytest.raises(ValueError, match=">= 2 seeds"):
        stats.paired_t([0.1], 0.05)


def test_holm_against_hand_computed_values():
    # sorted p: 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04, but never below the step before: 0.06)
    adjusted, levels = stats.holm_levels([0.01, 0.04, 0.03])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06])
    assert levels == pytest.approx([0.05 / 3, 0.05, 0.025])
    # 0.001 x 4, 0.2 x 3 = 0.6, 0.3 x 2 = 0.6, 0.5 x 1 = 0.5 -> held at 0.6
    adjusted, _ = stats.holm_levels([0.2, 0.001, 0.5, 0.3])
    assert adjusted == pytest.approx([0.6, 0.004, 0.6, 0.6])
    adjusted, _ = stats.holm_levels([0.7, 0.6])  # 0.6 x 2 caps at 1, and the next stays there
    assert adjusted == [1.0, 1.0]


@pytest.mark.parametrize(
    "low, high, mean, rejected, expected",
    [
        (0.02, 0.05, 0.035, True, "supported"),
        (-0.05, -0.02, -0.035, True, "refuted"),
        (-0.008, 0.009, 0.0, False, "equivalent"),
        (0.001, 0.009, 0.005, True, "equivalent"),  # significant, but smaller than the margin either way
        (-0.02, 0.05, 0.015, False, "unresolved"),
        (0.002, 0.03, 0.016, False, "unresolved"),  # its own interval excludes 0, but Holm stopped earlier
    ],
)
def test_verdicts(low, high, mean, rejected, expected):
    assert stats.verdict(low, high, mean, rejected, margin=0.01) == expected


def test_judge_claims_by_hand():
    seeds = range(4)
    scores = {
        "milegpo:full": dict(zip(seeds, [0.90, 0.92, 0.94, 0.96])),
        "milegpo:rcs": dict(zip(seeds, [0.90, 0.921, 0.94, 0.959])),  # differences 0, -0.001, 0, +0.001
        "g2po": dict(zip(seeds, [0.70, 0.71, 0.75, 0.74])),  # full - g2po: 0.20, 0.21, 0.19, 0.22
    }
    pairs = stats.claim_family(list(scores), "g2po")
    assert pairs == [("milegpo:full", "milegpo:rcs"), ("milegpo:full", "g2po")]
    rows = stats.judge_claims(scores, pairs, margin=0.01)
    assert [row["verdict"] for row in rows] == ["equivalent", "supported"]
    # Bonferroni: both intervals at 0.05 / 2, whatever their rank
    assert rows[1]["mean"] == pytest.approx(0.205) and rows[1]["level"] == pytest.approx(0.025)
    assert rows[0]["level"] == pytest.approx(0.025) and rows[0]["p"] == pytest.approx(1.0)
    assert rows[1]["p_bonferroni"] == pytest.approx(min(1.0, 2 * rows[1]["p"]))


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--select-seeds", "0-2", "--eval-seeds", "2-4"], "seeds [2] are selection seeds too"),
        (["--select-seeds", "0-2", "--eval-seeds", "3-x"], "--eval-seeds '3-x'"),
        (["--select-seeds", "0", "--eval-seeds", "1", "--seeds", "3"], "--seeds: a study takes"),
        (["--select-seeds", "0", "--eval-seeds", "1", "--updates", "pg,trpo"], "--updates 'pg,trpo'"),
        (["--select-seeds", "0", "--eval-seeds", "1", "--margin", "-1"], "--margin -1.0"),
        (["--select-seeds", "0", "--eval-seeds", "1", "--margin", "inf"], "--margin inf: must be a finite number >= 0"),
        # issue 46: each of these ran (twice the same run, a silently ignored flag, 3 GB before the first run)
        (["--select-seeds", "0", "--eval-seeds", "1", "--lr-grid", "1,1"], "--lr-grid '1,1': rate 1 is given twice"),
        (["--select-seeds", "0", "--eval-seeds", "1", "--lr-grid", "0.1,0.1000001"], "share the run directory name lr0.1"),
        (["--select-seeds", "0", "--eval-seeds", "1", "--updates", "pg,pg"], "--updates 'pg,pg': give each value once"),
        (["--select-seeds", "0", "--eval-seeds", "1", "--update", "ppo"], "--update ppo: a study takes --updates"),
        (["--select-seeds", "0", "--eval-seeds", "1", "--update", "bogus"], "--update bogus: a study takes --updates"),
        (["--select-seeds", "0-100000000", "--eval-seeds", "1"], "--select-seeds '0-100000000': at most 1000 seeds"),
        (["--select-seeds", "0", "--eval-seeds", "4294967296"], "--eval-seeds '4294967296': expected seeds like"),
    ],
)
def test_study_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    work = tmp_path / "work"
    assert study.main(["--work", str(work), "--jobs", "1", "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and err.startswith("experiments.arena study: ")
    assert not work.exists()


@pytest.mark.slow
def test_study_chooses_on_selection_seeds_and_scores_only_fresh_ones(tmp_path, capsys):
    work = tmp_path / "study"
    argv = ["--game", "coin", "--groups", "2", "--group-size", "4", "--iterations", "3", "--max-steps", "15",
            "--select-seeds", "0", "--eval-seeds", "1-2", "--lr-grid", "0.5,3", "--updates", "pg,ppo",
            "--contestants", "grpo", "gigpo", "--jobs", "1", "--no-progress", "--work", str(work)]
    assert study.main(argv) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["job"] == "arena-study" and line["ran"] == 2 * 4 + 2 * 2  # the same grid for both, then 2 fresh seeds each
    records = [json.loads(text) for text in (work / "results.jsonl").read_text().splitlines()]
    for name in ("grpo", "gigpo"):
        grid = {(r["lr"], r["update"]): _auc(r) for r in records if r["contestant"] == name and r["seed"] == 0}
        assert len(grid) == 4
        best = max(sorted(grid, key=lambda option: (option[1], option[0])), key=grid.get)
        scored = [r for r in records if r["contestant"] == name and r["seed"] in (1, 2)]
        assert {(r["lr"], r["update"]) for r in scored} == {best}
    assert study.main(argv) == 0  # resumable: nothing reruns
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["ran"] == 0

    # a wider grid in a new directory takes the earlier selection runs (--reuse); --matched adds the
    # shared option of the chain link graphgpo > gigpo on the evaluation seeds
    wider = tmp_path / "wider"
    argv2 = [*argv[:argv.index("--lr-grid")], "--lr-grid", "0.5,3,10", "--updates", "pg,ppo", "--contestants", "graphgpo",
             "gigpo", "--jobs", "1", "--no-progress", "--work", str(wider), "--matched", "--reuse", str(work)]
    assert study.main(argv2) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    new_records = [json.loads(text) for text in (wider / "results.jsonl").read_text().splitlines()]
    selection = [r for r in new_records if r["seed"] == 0]
    assert len(selection) == 2 * 6
    reused = {(r["lr"], r["update"]) for r in records if r["contestant"] == "gigpo" and r["seed"] == 0}
    for r in selection:
        if r["contestant"] == "gigpo" and (r["lr"], r["update"]) in reused:
            old = next(o for o in records if (o["contestant"], o["seed"], o["lr"], o["update"]) == ("gigpo", 0, r["lr"], r["update"]))
            assert r["success"] == old["success"]
    means = {name: {(r["lr"], r["update"]): _auc(r) for r in selection if r["contestant"] == name} for name in ("graphgpo", "gigpo")}
    shared = max(sorted(means["gigpo"], key=lambda o: (o[1], o[0])), key=lambda o: means["gigpo"][o] + means["graphgpo"][o])
    for name in ("graphgpo", "gigpo"):
        best = max(sorted(means[name], key=lambda o: (o[1], o[0])), key=means[name].get)
        assert {(r["lr"], r["update"]) for r in new_records if r["contestant"] == name and r["seed"] == 1} == {best, shared}
    arms = {(r["contestant"], r["lr"], r["update"]) for r in new_records if r["seed"] in (1, 2)}
    # the earlier study's evaluation runs are taken too, where this study evaluates the same option
    earlier_arms = {(r["contestant"], r["lr"], r["update"]) for r in records if r["seed"] in (1, 2)}
    assert line["ran"] == 6 + 2 + 2 * len(arms - earlier_arms)  # graphgpo runs its 6 options, gigpo only rate 10
    for r in new_records:
        if r["seed"] in (1, 2) and (r["contestant"], r["lr"], r["update"]) in earlier_arms:
            old = next(o for o in records if (o["contestant"], o["seed"], o["lr"], o["update"])
                       == (r["contestant"], r["seed"], r["lr"], r["update"]))
            assert r == old
    assert json.loads((wider / "arena.json").read_text())["study"]["matched"] is True
    other = [*argv2[:-2], "--reuse", str(tmp_path / "nothing")]
    assert study.main(other) == 2 and "--reuse: " in capsys.readouterr().err


def test_the_outsider_and_the_rates_are_picked_on_the_selection_seeds_only():
    from experiments.arena.analysis import analyse

    def record(name, seed, lr, level):
        return {"contestant": name, "seed": seed, "lr": lr, "update": "pg", "success": [level, level],
                "greedy": [level, level], "credit": {"zero_advantage_fraction": [0.5, None]}}

    records = [record("milegpo:full", 0, 1.0, 0.5), record("milegpo:full", 0, 3.0, 0.6)]
    records += [record("hgpo", 0, 1.0, 0.7), record("hgpo", 0, 3.0, 0.2), record("g2po", 0, 1.0, 0.4), record("g2po", 0, 3.0, 0.1)]
    for seed, (full, hgpo, g2po) in zip((1, 2, 3), ((0.8, 0.3, 0.9), (0.9, 0.35, 0.95), (0.85, 0.2, 0.9))):
        # fresh seeds: g2po does better here, but the outsider was already picked (hgpo, on seed 0)
        records += [record("milegpo:full", seed, 3.0, full), record("hgpo", seed, 1.0, hgpo), record("g2po", seed, 1.0, g2po)]
    result = analyse(records, [0], 0.01)
    assert result["chosen"] == {"milegpo:full": "lr 3", "hgpo": "lr 1", "g2po": "lr 1"}
    assert result["best_outsider"] == "hgpo" and result["scored_seeds"] == [1, 2, 3]
    (claim,) = result["claims"]
    assert claim["claim"] == "milegpo:full > hgpo" and claim["mean"] == pytest.approx((0.5 + 0.55 + 0.65) / 3)
    assert result["diagnostics"]["hgpo"]["zero_advantage_fraction"] == 0.5  # undefined iterations are skipped
    assert analyse([record("milegpo:full", 0, 1.0, 0.5), record("hgpo", 0, 1.0, 0.4)], None, 0.01)["claims"] == []  # one seed: no test

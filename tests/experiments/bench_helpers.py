"""Shared by the benchmark tests: run a bench's ``main`` in this process, read its last line."""

from __future__ import annotations

import json
import math

import pytest


def positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def figures_of(stdout: str) -> dict:
    """The one JSON object a benchmark ends with (docs/architecture.md §5: figures on the last line)."""
    return json.loads(stdout.strip().splitlines()[-1])


def run_bench(main, argv: list[str], capsys):
    """(figures of the last line, what it printed: ``.out``, ``.err``) of ``main(argv)``; the returned
    dict must be the printed one."""
    returned = main(argv)
    printed = capsys.readouterr()
    figures = figures_of(printed.out)
    assert figures == json.loads(json.dumps(returned))
    return figures, printed


def refused(main, argv: list[str], capsys) -> str:
    """The one stderr line of a refusal (exit status 2)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def torch_next_to_jax(monkeypatch):
    """The benches set torch's thread count and HF_HUB_OFFLINE for their process: both restored after."""
    import torch

    threads = torch.get_num_threads()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    yield
    torch.set_num_threads(threads)

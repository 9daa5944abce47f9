"""Bad input on the demo and the AOT tool (issue 46): one line naming the flag, exit status 2,
before any work starts and with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import demo

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("config", ["experiments/configs/demo.py", "experiments/configs/smollm2_twx.py"])
@pytest.mark.parametrize("seed", ["-1", str(10**23), str(2**32)])
def test_demo_refuses_a_bad_seed_before_writing_anything(tmp_path, capsys, config, seed):
    workdir = tmp_path / "run"
    with pytest.raises(SystemExit) as exited:
        demo.main(["--config", config, "--workdir", str(workdir), "--seed", seed])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: --seed {seed}: a seed is an integer in 0..2**32-1"
    assert not workdir.exists()  # was a numpy traceback 9.5 s into SFT, leaving checkpoints/ and tokenizer/

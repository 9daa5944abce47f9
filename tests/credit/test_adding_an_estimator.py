"""docs/credit-implementation.md §4 followed as written: a toy host pass and a toy estimator that reads it and has an
option, added to a copy of the package through the files that section names and no others."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PASS_MODULE = '''"""Toy pass: the steps left after each step of its trajectory."""

import numpy as np

from milegpo_jax.credit.passes import PassInput


def build(given: PassInput) -> dict[str, np.ndarray]:
    mask = given.fields["step_mask"]
    left = mask[..., ::-1].cumsum(-1)[..., ::-1] - 1
    return {"steps_left": np.where(mask, left, 0).astype(np.int32)}
'''
HOST_PASS = '''
    HostPass("steps_left", (), (
        Field("steps_left", "int32", "step_ints", "[G, K, T] steps after this one in its trajectory"),
    ), "milegpo_jax.credit.passes.steps_left:build"),'''
SPEC = '''
    EstimatorSpec(
        name="toy", label="Toy", page="docs/credit-family.md", level="group", reads=frozenset({"steps_left"}),
        program=f"{_PROGRAMS}.family:toy_group", reference=f"{_REFERENCES}.reference_family:toy_details",
        options={"toy_scale": POSITIVE}, recipes={"alfworld": {}, "webshop": {}},
    ),'''
PROGRAM = '''

def toy_group(b, cfg):
    return {"advantage": jnp.where(b.step_mask, cfg.toy_scale * b.steps_left, 0.0)}
'''
REFERENCE = '''

def toy_details(group, cfg):
    return {"rows": [[{"advantage": cfg.toy_scale * (len(traj.steps) - 1 - t)} for t in range(len(traj.steps))]
                     for traj in group.trajectories]}
'''
OPTION = "    toy_scale: float = 1.0\n"

CHECK = '''
import numpy as np
import pytest
from milegpo_jax.credit import registry
from milegpo_jax.credit.api import compute_credit
from milegpo_jax.credit.columns import columns_from_groups
from milegpo_jax.credit.config import ESTIMATORS, CreditConfigError, make_credit_config
from milegpo_jax.credit.estimators import estimate_advantages
from milegpo_jax.credit.planes import pack, plane_fields, unpack
from milegpo_jax.credit.rollouts import make_group
from milegpo_jax.credit.testing.reference import compute_advantages

assert "toy" in ESTIMATORS and registry.host_parts("toy") == {"steps_left"}
with pytest.raises(CreditConfigError, match=r"toy_scale=0.0: must be > 0"):
    make_credit_config("toy", overrides={"toy_scale": 0})
groups = [
    make_group([[("a", "x", "b", 0.0, True), ("b", "y", "c", 1.0, True)], [("a", "x", "b", 0.0, True)]]),
    make_group([[("a", "z", "a", 0.0, True)] * 3]),
]
cfg = make_credit_config("toy", overrides={"toy_scale": 2.0})
result = compute_credit(columns_from_groups(groups), cfg, with_diagnostics=False)
assert result.batch.parts == {"steps_left"}
assert result.advantages == compute_advantages(groups, cfg) == [[[2.0, 0.0], [0.0]], [[4.0, 2.0, 0.0]]]
assert plane_fields("step_ints", {"steps_left"})[-1] == "steps_left"
np.testing.assert_array_equal(unpack(pack(result.batch)).steps_left, result.batch.steps_left)
np.testing.assert_array_equal(estimate_advantages(pack(result.batch), cfg), result.padded_advantages)
print("toy ok")
'''


def _insert(path: Path, after: str, text: str) -> None:
    source = path.read_text()
    assert source.count(after) == 1, (path, after)
    path.write_text(source.replace(after, after + text))


def test_a_toy_pass_and_estimator_touch_only_the_documented_files(tmp_path):
    shutil.copytree(REPO / "milegpo_jax", tmp_path / "milegpo_jax", ignore=shutil.ignore_patterns("__pycache__"))
    credit = tmp_path / "milegpo_jax" / "credit"
    (credit / "passes" / "steps_left.py").write_text(PASS_MODULE)
    _insert(credit / "passes" / "__init__.py", "PASSES: tuple[HostPass, ...] = (", HOST_PASS)
    _insert(credit / "registry.py", "SPECS: tuple[EstimatorSpec, ...] = (", SPEC)
    for path, text in ((credit / "estimators" / "family.py", PROGRAM), (credit / "testing" / "reference_family.py", REFERENCE)):
        path.write_text(path.read_text() + text)
    _insert(credit / "config.py", "    precision: str = \"float32\"\n", OPTION)  # CreditConfig's last field
    touched = ["passes/__init__.py", "registry.py", "config.py", "estimators/family.py", "testing/reference_family.py"]

    done = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0 and done.stdout.strip() == "toy ok", done.stderr[-3000:]

    page = (REPO / "docs" / "credit-implementation.md").read_text()
    section = re.search(r"\n## 4\..*?\n## 5\.", page, re.S).group(0)
    for name in [*touched, "passes/"]:  # the new pass is a module of credit/passes/
        assert f"milegpo_jax/credit/{name}" in section, name

"""The jitted jnp estimators reproduce every number of docs/credit.md §9 (to 1e-4).

Same data as ``test_reference_vectors.py``: every table column (the advantages and each
intermediate), and MileGPO's candidate, trap and potential lines, all computed in one padded batch
of the three examples.
"""

from __future__ import annotations

import numpy as np
import pytest

from milegpo_jax.credit.batch import build_batch
from milegpo_jax.credit.columns import columns_from_groups
from milegpo_jax.credit.estimators import estimator_terms, milegpo_terms
from tests.credit.spec_vectors import COLUMNS, EXAMPLES, MILEGPO_LINE_CONFIGS, TOLERANCE

NAMES = list(EXAMPLES)
BATCH, LAYOUT = build_batch(columns_from_groups([EXAMPLES[name]["group"] for name in NAMES]))

# Candidate/trap line keys -> MileGPOTerms fields.
CANDIDATE_FIELDS = {
    "lift": "lift",
    "coverage": "coverage",
    "centrality": "centrality",
    "score0": "score0",
    "branch": "branch",
    "progress": "progress",
    "retained": "retained",
    "score_pcc": "score_pcc",
}
TRAP_FIELDS = {"lift_neg": "lift_neg", "fail_coverage": "fail_coverage", "revisit": "revisit", "score": "trap_score"}


@pytest.mark.parametrize("column", list(COLUMNS))
def test_table_column(column: str) -> None:
    spec = COLUMNS[column]
    values = LAYOUT.unpad(np.asarray(estimator_terms(BATCH, spec.config())[spec.field]))
    for g, name in enumerate(NAMES):
        actual = [v for traj in values[g] for v in traj]
        expected = EXAMPLES[name]["columns"][column]
        for label, got, want in zip(EXAMPLES[name]["row_labels"], actual, expected, strict=True):
            assert got == pytest.approx(want, abs=TOLERANCE), f"Example {name}, {spec.header}, row {label}"


@pytest.mark.parametrize("recipe", list(MILEGPO_LINE_CONFIGS))
def test_candidate_trap_and_potential_lines(recipe: str) -> None:
    terms = milegpo_terms(BATCH, MILEGPO_LINE_CONFIGS[recipe].config())
    for g, name in enumerate(NAMES):
        expected = EXAMPLES[name]["milegpo"][recipe]
        where = f"Example {name}, MileGPO {recipe}"
        node = {state: i for i, state in enumerate(LAYOUT.node_names[g])}
        milestones = {state for state, i in node.items() if terms.is_milestone[g, i]}
        traps = {state for state, i in node.items() if terms.is_trap[g, i]}
        assert milestones == set(expected["candidates"]), f"{where}: candidate set"
        assert traps == set(expected["traps"]), f"{where}: trap set"
        for lines, fields in ((expected["candidates"], CANDIDATE_FIELDS), (expected["traps"], TRAP_FIELDS)):
            for state, stats in lines.items():
                for key, value in stats.items():
                    got = float(getattr(terms, fields[key])[g, node[state]])
                    assert got == pytest.approx(value, abs=TOLERANCE), f"{where}: {state}.{key}"
        for key, field in (("potential_pos", "potential_pos"), ("potential_neg", "potential_neg")):
            for state, value in expected[key].items():
                got = float(getattr(terms, field)[g, node[state]])
                assert got == pytest.approx(value, abs=TOLERANCE), f"{where}: {key}[{state}]"

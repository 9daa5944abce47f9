"""Credit replay: every estimator on stored rollouts, printed as a per-step table.

    python -m experiments.replay [--input experiments/data/example_rollouts.json] [--recipe webshop]
        [--set key=value ...]

For each group it prints one row per step (trajectory, step, transition, validity, reward, outcome)
with the advantage of GRPO, GiGPO, GraphGPO, the family of docs/credit-family.md (BEACON only when
the rollouts carry milestone flags) and MileGPO (md / rcs / full stages), then MileGPO's
milestones and traps and the batch's credit diagnostics. The last line is a JSON summary. Bad input
(and the limits of ``python -m milegpo_jax.credit``: file size, encoding, nesting, reward range, memory)
is one line naming the place and exit status 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from milegpo_jax.credit.api import compute_credit
from milegpo_jax.config import parse_credit_options
from milegpo_jax.credit import registry
from milegpo_jax.credit.config import CreditConfigError, make_credit_config
from milegpo_jax.credit.estimators import milegpo_terms
from milegpo_jax.credit.cli import OneLineParser, UsageError, add_limit_options, check_limit_options
from milegpo_jax.credit.columns import check_columns_for, columns_from_groups
from milegpo_jax.credit.input_file import read_rollout_file
from milegpo_jax.credit.limits import CreditLimitError, check_memory, check_reward_range
from milegpo_jax.credit.rollouts import RolloutFormatError

DEFAULT_INPUT = Path(__file__).parent / "data" / "example_rollouts.json"


def _columns() -> tuple[tuple[str, str, str | None], ...]:
    """(title, estimator, stage) of every estimator and stage in the registry's order, the ablation
    stages titled by four letters of the name (to fit the column), e.g. "Mile/md"; MileGPO full comes
    last, since its terms and diagnostics are printed below."""
    milegpo = registry.spec_of("milegpo")
    columns = []
    for spec in registry.SPECS:
        for stage in registry.variants(spec):
            if stage is None:
                columns.append((spec.label, spec.name, None))
            elif not (spec is milegpo and stage == milegpo.stages[0]):
                columns.append((f"{spec.label[:4]}/{stage}", spec.name, stage))
    return (*columns, (milegpo.label, milegpo.name, milegpo.stages[0]))


COLUMNS = _columns()
TRANSITION_WIDTH = 46


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", default=str(DEFAULT_INPUT), help="rollout JSON (default: the bundled example)")
    parser.add_argument("--recipe", default=registry.DEFAULT_RECIPE, choices=registry.RECIPES)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="MileGPO option override")
    add_limit_options(parser)
    try:
        args = parser.parse_args(argv)
        check_limit_options(args)
        overrides = parse_credit_options(args.set)
        configs = [
            make_credit_config(estimator, args.recipe, stage, overrides if estimator == "milegpo" else None)
            for _, estimator, stage in COLUMNS
        ]
        groups = read_rollout_file(args.input, args.max_input_bytes)
        check_reward_range(groups, configs[-1].precision)
        for cfg in configs:  # each estimator has its own footprint
            check_memory(groups, cfg, int(args.max_memory_gb * 1024**3), with_diagnostics=cfg is configs[-1])
    except (UsageError, RolloutFormatError, CreditConfigError, CreditLimitError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    rollouts = columns_from_groups(groups)  # credit's one input form
    columns = []
    for column, cfg in zip(COLUMNS, configs):
        try:
            check_columns_for(rollouts, cfg.estimator)
        except RolloutFormatError:
            continue  # e.g. BEACON without milestone flags: no column
        columns.append((column, cfg))
    configs = [cfg for _, cfg in columns]
    results = [
        compute_credit(rollouts, cfg, with_diagnostics=cfg.stage == "full" and cfg.estimator == "milegpo")
        for cfg in configs
    ]
    full = results[-1]
    terms = milegpo_terms(full.batch, configs[-1])
    print(f"credit replay of {args.input}: {len(groups)} groups, recipe {args.recipe}\n")
    for g, group in enumerate(groups):
        outcomes = ["success" if traj.succeeded else "fail" for traj in group.trajectories]
        print(f"group {g}: {len(group.trajectories)} trajectories, {outcomes.count('success')} successful")
        header = f"{'traj':>4} {'t':>3}  {'transition':<{TRANSITION_WIDTH}} {'ok':>3} {'r':>5} {'outcome':>8}"
        print(header + "".join(f"{name:>10}" for (name, _, _), _ in columns))
        for k, traj in enumerate(group.trajectories):
            for t, step in enumerate(traj.steps):
                last = t == len(traj.steps) - 1
                target = "SUCCESS" if last and traj.succeeded else step.next_state
                transition = f"{_shorten(step.state, 21)} -> {_shorten(target, 21)}"
                row = (
                    f"{k:>4} {t:>3}  {transition:<{TRANSITION_WIDTH}} {'y' if step.valid else 'n':>3} "
                    f"{step.reward:>5.1f} {outcomes[k]:>8}"
                )
                print(row + "".join(f"{result.advantages[g][k][t]:>10.4f}" for result in results))
        names = full.layout.node_names[g]
        milestones = [
            f"{_shorten(names[i], 30)} (S_pcc {float(terms.score_pcc[g, i]):.3f}, Φ+ {float(terms.potential_pos[g, i]):.3f})"
            for i in np.flatnonzero(np.asarray(terms.is_milestone[g]))
        ]
        traps = [
            f"{_shorten(names[i], 30)} (S- {float(terms.trap_score[g, i]):.3f})"
            for i in np.flatnonzero(np.asarray(terms.is_trap[g]))
        ]
        print(f"  milestones: {', '.join(milestones) or 'none'}")
        print(f"  traps: {', '.join(traps) or 'none'}\n")

    print("MileGPO credit diagnostics (Fig. 4/9):")
    for key, value in full.diagnostics.items():
        print(f"  {key:<28} {'n/a' if value is None else (f'{value:.3f}' if isinstance(value, float) else value)}")
    summary = {
        "job": "credit_replay",
        "input": str(args.input),
        "recipe": args.recipe,
        "groups": len(groups),
        "steps": sum(len(t.steps) for group in groups for t in group.trajectories),
        "diagnostics": full.diagnostics,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Credit arena: credit estimators compared on real environments with a tabular softmax policy.

policy.py       the tabular learner and its PG / PPO-clip updates (pure maths)
play.py         group rollouts through an exact transition cache, in-process or through the EnvPool
contestants.py  estimator specs -> credit configs; the random-advantage control
inputs.py       the commands' input checks: count bounds, seeds, grids, the files summarize reads (pure)
run.py          one (contestant, seed, learning rate) run
stats.py        curve summaries, paired t tests, Bonferroni and Holm, verdicts, Wilson intervals (pure)
analysis.py     run records -> chosen rates, scores, diagnostics, the claim family (pure)
family.py       pooled (stratified) claims over games, game scales, matched options, the family-wide judgement (pure)
crossgame.py    several studies' records -> the family's claims, matched-rate comparisons, seed plans (pure)
power.py        evaluation seeds a claim needs: noncentral-t power, planning spreads (pure)
budget.py       curves over env steps (--env-steps) and the tree facts of --branching runs (pure)
envs.py         environment presets, WebShop's search step and backends
output.py       run files, results.jsonl, tables and the curves PNG
summary.py      every table and figure from results.jsonl, `python -m experiments.arena summarize`
cli.py          the command line, `python -m experiments.arena` (docs/arena.md)
study.py        held-out rates and updates, `python -m experiments.arena study`
family_report.py  several studies read together, `python -m experiments.arena family`
compare.py      tree groups against independent rollouts across two studies per game, `python -m experiments.arena compare`
uniform.py      the uniform policy's success on a setting, `python -m experiments.arena uniform`
"""

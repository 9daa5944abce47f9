"""Credit arena: credit estimators compared on real environments with a tabular softmax policy.

policy.py       the tabular learner and its PG / PPO-clip updates (pure maths)
play.py         group rollouts through an exact transition cache, in-process or through the EnvPool
contestants.py  estimator specs -> credit configs; the random-advantage control
run.py          one (contestant, seed, learning rate) run
stats.py        curve summaries, mean ± std over seeds, paired 95 % intervals (pure)
envs.py         environment presets and backends
output.py       tables, curves and run files
cli.py          the command line, `python -m experiments.arena` (docs/arena.md)
"""

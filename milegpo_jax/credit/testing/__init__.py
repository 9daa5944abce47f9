"""Test material for the credit estimators, kept out of the runtime path: no module of the library
imports this package (``tests/test_docs.py`` checks it).

* ``reference``: the plain-Python oracle of every estimator (``reference_baselines``,
  ``reference_milegpo``, ``reference_family`` hold the maths);
* ``synthetic``: seeded ALFWorld-like rollout groups (benchmarks, the bundled example, tests);
* ``graph``: explicit candidate distances, the form ``credit/graph.py``'s potentials avoid.
"""

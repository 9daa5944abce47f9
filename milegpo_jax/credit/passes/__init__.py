"""The host passes that build a batch's structure beyond the rows (docs/credit.md §10.1).

Every batch has its node numbering (``nodes.py``). The other parts are built only when an estimator
reads them, as its ``EstimatorSpec.reads`` says (``registry.host_parts``): ``edges`` (distinct
transitions and first uses, ``edges.py``), ``hops`` (hops to the sink, ``hops.py``, built from the
edges), ``regions`` (MVPO's loop bodies, ``regions.py``) and ``clusters`` (HGPO's histories, ECPO's
(state, action) pairs, ProGPO's first visits, ``clusters.py``). ``table.py`` is the open-addressing
table of pairs the edge pass numbers with.
"""

from __future__ import annotations

from collections.abc import Collection

# The ``CreditBatch`` fields each part fills (None in a batch built without it).
PART_FIELDS = {
    "edges": ("edge", "first_use", "edge_src", "edge_dst", "edge_mask"),
    "hops": ("sink_hops",),
    "regions": ("region",),
    "clusters": ("state_action", "history2", "history3", "first_visit"),
}
ALL_PARTS = frozenset(PART_FIELDS)
# What a part is built from, beyond the node numbering.
NEEDS = {"edges": (), "hops": ("edges",), "regions": (), "clusters": ()}


def with_needed(parts: Collection[str]) -> frozenset[str]:
    """``parts`` and the parts they are built from."""
    unknown = set(parts) - ALL_PARTS
    if unknown:
        raise ValueError(f"unknown host parts {sorted(unknown)}: choose from {sorted(ALL_PARTS)}")
    return frozenset(parts).union(*(NEEDS[part] for part in parts))

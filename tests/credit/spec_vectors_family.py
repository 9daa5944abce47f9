"""The test vectors of docs/credit-family.md (Examples A-C of docs/credit.md plus Example D).

``FAMILY_GROUPS[name]`` are the rollout groups with their per-step milestone flags; ``TABLES[name]``
holds the final advantage per step in table order (trajectory-major, then time) under the column
keys ``<estimator>_<recipe>`` (``mvpo_alfworld_ema05``: MVPO with ema_prev = 0.5), plus Example D's
novelty n, MVPO region (by its smallest state) and potential difference δ. ProGPO's Example B values
are in ``PROGPO_B``; in A and C it equals GiGPO. MVPO runs each example as a one-group batch with
ema_prev = 0 (``MVPO_KAPPA``). Values carry 4 decimals: compare with ``TOLERANCE`` = 1e-4.
"""

from __future__ import annotations

import dataclasses

from milegpo_jax.credit.rollouts import Group, Trajectory, make_group
from tests.credit.spec_vectors import GROUPS, TOLERANCE

__all__ = ["FAMILY_GROUPS", "TABLES", "PROGPO_B", "MVPO_KAPPA", "TOLERANCE", "columns_of"]

# Milestone flags per trajectory (ᵐ in the tables); Example D has none.
_MILESTONES = {
    "A": [[1, 1, 1], [1, 0, 1, 1], [1, 0, 0], [1, 0, 0]],
    "B": [[1, 1, 0], [1, 1, 0], [1, 0, 0]],
    "C": [[1, 1], [1, 0, 1], [0, 1, 1]],
}


def _with_milestones(group: Group, flags: list[list[int]]) -> Group:
    return Group(
        tuple(
            Trajectory(tuple(dataclasses.replace(step, milestone=bool(f)) for step, f in zip(traj.steps, traj_flags, strict=True)))
            for traj, traj_flags in zip(group.trajectories, flags, strict=True)
        )
    )


# K = 4, all fail, a two-state loop: τ1 S0→A→B→A→B; τ2 S0→A→C→E; τ3 S0→D→D(inv)→D; τ4 S0→A→B→F.
_EXAMPLE_D = make_group(
    [
        [("S0", "go A", "A", 0.0, True), ("A", "go B", "B", 0.0, True), ("B", "go A", "A", 0.0, True), ("A", "go B", "B", 0.0, True)],
        [("S0", "go A", "A", 0.0, True), ("A", "go C", "C", 0.0, True), ("C", "go E", "E", 0.0, True)],
        [("S0", "go D", "D", 0.0, True), ("D", "bad format", "D", 0.0, False), ("D", "go D", "D", 0.0, True)],
        [("S0", "go A", "A", 0.0, True), ("A", "go B", "B", 0.0, True), ("B", "go F", "F", 0.0, True)],
    ]
)

FAMILY_GROUPS: dict[str, Group] = {
    **{name: _with_milestones(GROUPS[name], flags) for name, flags in _MILESTONES.items()},
    "D": _with_milestones(_EXAMPLE_D, [[0] * len(traj.steps) for traj in _EXAMPLE_D.trajectories]),
}

TABLES: dict[str, dict[str, list]] = {
    "A": {
        "labels": ["τ1 0 S0→Aᵐ", "τ1 1 A→Bᵐ", "τ1 2 B→gᵐ", "τ2 0 S0→Cᵐ", "τ2 1 C→C*", "τ2 2 C→Bᵐ", "τ2 3 B→gᵐ", "τ3 0 S0→Aᵐ", "τ3 1 A→D", "τ3 2 D→D*", "τ4 0 S0→Cᵐ", "τ4 1 C→E", "τ4 2 E→A"],
        "hgpo_alfworld": [1.0506, 1.0000, 0.0000, 0.9481, 0.8560, 0.7722, 0.0000, -0.9993, -1.0000, 0.0000, -0.9993, -1.1649, 0.0000],
        "hgpo_webshop": [4.6253, 4.7500, 0.0000, 4.1741, 3.7908, 3.3583, 0.0000, -4.3997, -4.7500, 0.0000, -4.3997, -5.1342, 0.0000],
        "g2po_alfworld": [0.0543, 3.2526, 0.9787, 2.2590, 0.9264, 2.9945, 0.9787, -1.8725, -3.4053, -1.1419, 0.3322, -4.2341, -1.1226],
        "g2po_webshop": [4.0343, 14.1159, 4.8784, 6.7418, 4.9559, 12.4234, 4.8784, -5.9657, -14.8841, -5.7216, -3.2582, -16.5766, -5.6216],
        "beacon_alfworld": [4.6308, 63.4879, 4.6308, 4.6308, 52.3879, 63.4879, 4.6308, -5.3692, -46.5121, -47.6121, -5.3692, -46.5121, -46.5121],
        "beacon_webshop": [4.7692, 10.8407, 4.7692, 4.7692, 8.3407, 10.8407, 4.7692, -5.2308, -9.1593, -11.1593, -5.2308, -9.1593, -9.1593],
        "ecpo_alfworld": [0.8922, 1.0012, 0.8922, 0.8922, 0.9836, 1.0257, 0.8922, -1.0345, -1.1434, -1.0538, -1.0345, -1.2786, -1.0345],
        "ecpo_webshop": [4.6308, 5.3625, 4.6308, 4.6307, 5.1200, 5.3418, 4.6308, -5.3692, -6.1009, -5.4692, -5.3693, -6.6695, -5.3692],
        "mvpo_alfworld": [1.8021, 1.5993, 1.2089, 1.7133, 1.3955, 1.5227, 1.2485, -1.9000, -1.7416, -1.2121, -1.9000, -2.1875, -0.4012],
    },
    "B": {
        "labels": ["τ1 0 S0→Aᵐ", "τ1 1 A→Lᵐ", "τ1 2 L→L", "τ2 0 S0→Aᵐ", "τ2 1 A→Lᵐ", "τ2 2 L→L*", "τ3 0 S0→Bᵐ", "τ3 1 B→M", "τ3 2 M→N"],
        "hgpo_alfworld": [0.0000, 0.0000, 1.0000, 0.0000, 0.0000, -1.0000, 0.0000, 0.0000, 0.0000],
        "hgpo_webshop": [0.0000, 0.0000, 0.0500, 0.0000, 0.0000, -0.0500, 0.0000, 0.0000, 0.0000],
        "g2po_alfworld": [0.3333, 0.3333, 1.0404, 0.3333, 0.3333, -3.3737, 0.3333, 0.3333, 0.3333],
        "g2po_webshop": [0.0111, 0.0111, 0.0611, 0.0111, 0.0111, -0.1389, 0.0111, 0.0111, 0.0111],
        "beacon_alfworld": [0.0111, 50.0111, 0.5111, 0.0111, 50.0111, -0.5889, 0.0111, -49.9889, -49.9889],
        "beacon_webshop": [0.1111, 5.1111, 0.6111, 0.1111, 5.1111, -1.3889, 0.1111, -4.8889, -4.8889],
        "ecpo_alfworld": [0.3333, 0.3333, 0.4422, 0.3333, 0.3333, -2.7755, 0.3333, 0.3333, 0.3333],
        "ecpo_webshop": [0.0111, 0.0111, 0.0188, 0.0111, 0.0111, -0.0966, 0.0111, 0.0111, 0.0111],
        "mvpo_alfworld": [0.6667, 0.6667, 0.1667, 0.6667, 0.6667, -2.8333, 0.6667, 0.6667, 0.6667],
    },
    "C": {
        "labels": ["τ1 0 S0→Aᵐ", "τ1 1 A→gᵐ", "τ2 0 S0→Aᵐ", "τ2 1 A→A", "τ2 2 A→gᵐ", "τ3 0 S0→B", "τ3 1 B→Aᵐ", "τ3 2 A→gᵐ"],
        "hgpo_alfworld": [1.4142, 0.8309, -0.7071, -1.2928, 0.5773, -0.7071, 0.0000, 0.5773],
        "hgpo_webshop": [0.3167, 0.2000, -0.1583, -0.3000, 0.1250, -0.1583, 0.0000, 0.1250],
        "g2po_alfworld": [1.3263, 1.0882, 1.3263, -3.5058, 1.0882, -1.8993, -0.5123, 1.0882],
        "g2po_webshop": [0.2974, 0.2950, 0.2974, -0.9425, 0.2950, -0.4151, -0.1222, 0.2950],
        "beacon_alfworld": [2.5000, 2.5000, 2.5000, -7.5000, 2.5000, -7.5000, 2.5000, 2.5000],
        "beacon_webshop": [0.1250, 0.1250, 0.1250, -0.3750, 0.1250, -0.3750, 0.1250, 0.1250],
        "ecpo_alfworld": [0.0229, 0.2285, 0.0229, -0.3808, 0.2285, -0.0306, 0.0000, 0.2285],
        "ecpo_webshop": [0.0063, 0.0571, 0.0063, -0.0952, 0.0571, -0.0084, 0.0000, 0.0571],
        "mvpo_alfworld": [1.1547, 0.5000, -0.5773, -1.5000, 0.5000, -0.5773, 0.3000, 0.5000],
    },
    "D": {
        "labels": ["τ1 0 S0→A", "τ1 1 A→B", "τ1 2 B→A", "τ1 3 A→B", "τ2 0 S0→A", "τ2 1 A→C", "τ2 2 C→E", "τ3 0 S0→D", "τ3 1 D→D*", "τ3 2 D→D", "τ4 0 S0→A", "τ4 1 A→B", "τ4 2 B→F"],
        "novelty": [1.0000, 1.0000, 0.0000, 0.0000, 1.0000, 1.0000, 1.0000, 1.0000, 0.0000, 0.0000, 1.0000, 1.0000, 1.0000],
        "region": ['S0', 'A', 'A', 'A', 'S0', 'A', 'C', 'S0', 'D', 'D', 'S0', 'A', 'A'],
        "mvpo_delta": [0.3333, -0.2500, -0.0833, -0.0417, 0.3333, 0.3333, 0.3333, 0.3333, -0.2500, -0.0833, 0.3333, -0.2500, 0.4167],
        "gigpo_alfworld": [0.2773, 0.2773, 0.2773, 0.2773, 0.2773, 0.2773, 0.2773, 0.2773, -4.0352, 0.9844, 0.2773, 0.2773, 0.2773],
        "progpo_alfworld": [-0.5056, -0.5056, -0.9712, -1.5793, 1.6981, 1.6981, 0.9197, -2.7631, -2.2733, -0.7408, 1.6981, 1.6981, 1.6268],
        "progpo_webshop": [-0.4368, -0.4481, -0.7231, -1.4481, 1.4657, 1.5019, 0.7769, -2.3868, -1.3731, -1.1731, 1.4657, 1.5019, 1.2769],
        "mvpo_alfworld": [0.6107, 0.0273, 0.1940, 0.2357, 0.6107, 0.6107, 0.6107, 0.6107, -3.5781, 0.1940, 0.6107, 0.0273, 0.6940],
        "mvpo_alfworld_ema05": [0.4607, 0.1398, 0.2315, 0.2544, 0.4607, 0.4607, 0.4607, 0.4607, -3.4656, 0.2315, 0.4607, 0.1398, 0.5065],
    },
}

PROGPO_B = {
    "alfworld": [-1.2100, -0.6326, 0.0745, -1.2100, -0.6326, -1.5360, 2.4853, 1.3307, 1.3307],
    "webshop": [-0.6231, -0.3222, -0.2722, -0.6231, -0.3222, -0.4722, 1.2794, 0.6778, 0.6778],
}

MVPO_KAPPA = {"A": 0.95, "B": 1.0, "C": 0.9, "D": 1.0}
MVPO_EMA_05 = {"ema_new": 0.45, "kappa": 0.55}


def columns_of(name: str) -> list[str]:
    """The advantage columns of one example (everything but labels and Example D's intermediates)."""
    return [key for key in TABLES[name] if key not in ("labels", "novelty", "region", "mvpo_delta")]

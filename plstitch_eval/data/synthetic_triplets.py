"""Action triplets of the synthetic procedure, from what its frames show: each instrument drawn in a frame
does one thing to one target, and what it does follows the phase (a hook dissects the cystic duct in Calot's
triangle and the gallbladder bed later). The triplets are CholecT50's own 100 (its vocabulary, so the
instrument, verb, target and pair maps of ivtmetrics apply), derived from the synthetic set's tool and phase
labels with no random draw: the videos are `synthetic`'s, unchanged.
"""

from __future__ import annotations

import numpy as np

from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES, CHOLEC80_TOOLS
from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_NAMES

# Cholec80 tool -> (the triplet it does by default, {phase: the triplet it does in that phase});
# the SpecimenBag is no CholecT50 instrument: it is a grasper's target, not a doer
_RULES: dict[str, tuple[str, dict[str, str]]] = {
    "Grasper": (
        "grasper,retract,gallbladder",
        {
            "Preparation": "grasper,grasp,omentum",
            "GallbladderDissection": "grasper,retract,liver",
            "GallbladderPackaging": "grasper,pack,gallbladder",
            "CleaningCoagulation": "grasper,retract,liver",
            "GallbladderRetraction": "grasper,grasp,specimen_bag",
        },
    ),
    "Bipolar": (
        "bipolar,coagulate,abdominal_wall_cavity",
        {
            "GallbladderDissection": "bipolar,coagulate,blood_vessel",
            "CleaningCoagulation": "bipolar,coagulate,liver",
        },
    ),
    "Hook": (
        "hook,coagulate,liver",
        {
            "Preparation": "hook,dissect,omentum",
            "CalotTriangleDissection": "hook,dissect,cystic_duct",
            "GallbladderDissection": "hook,dissect,gallbladder",
        },
    ),
    "Scissors": ("scissors,cut,adhesion", {"ClippingCutting": "scissors,cut,cystic_duct"}),
    "Clipper": ("clipper,clip,cystic_duct", {"ClippingCutting": "clipper,clip,cystic_artery"}),
    "Irrigator": (
        "irrigator,irrigate,abdominal_wall_cavity",
        {"CleaningCoagulation": "irrigator,aspirate,fluid"},
    ),
}


def triplet_table() -> np.ndarray:
    """[phases, tools] triplet id each Cholec80 tool does in each phase (-1: the tool does none)."""
    index = {name: i for i, name in enumerate(TRIPLET_NAMES)}
    table = np.full((len(CHOLEC80_PHASES), len(CHOLEC80_TOOLS)), -1, np.int64)
    for t, tool in enumerate(CHOLEC80_TOOLS):
        if tool not in _RULES:
            continue
        default, by_phase = _RULES[tool]
        for p, phase in enumerate(CHOLEC80_PHASES):
            table[p, t] = index[by_phase.get(phase, default)]
    return table


def synthetic_triplets(phases: np.ndarray, tools: np.ndarray) -> np.ndarray:
    """Multi-hot [M, 100] int8 of the triplets done at M annotated times, from each time's phase index [M]
    and tool presence [M, 7] (0/1); a row with a -1 tool or phase is unannotated and stays -1 throughout."""
    phases = np.asarray(phases, np.int64)
    tools = np.asarray(tools)
    table = triplet_table()
    out = np.zeros((len(phases), len(TRIPLET_NAMES)), np.int8)
    unannotated = (tools < 0).any(axis=1) | (phases < 0)
    rows, cols = np.nonzero((tools == 1) & ~unannotated[:, None])
    done = table[phases[rows], cols]
    out[rows[done >= 0], done[done >= 0]] = 1
    out[unannotated] = -1
    return out

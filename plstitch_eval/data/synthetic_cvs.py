"""Critical view of safety on the synthetic procedure, judged by three simulated raters who disagree.

The criteria follow what the frames show (`synthetic_scene.anatomy_state`): C1, two structures seen, once
the fat over Calot's triangle is half cleared and the duct shows through; C2, the triangle cleared, once it
is nearly all cleared; C3, the gallbladder's lower third off the liver bed, once it has started to detach.
Each rater has a threshold of their own (lenient, middling, strict) and misjudges a few frames at random,
so their mean is a soft label as Endoscapes2023's is. Annotated frames are sampled at a fixed spacing, as
Endoscapes samples one frame every 5 s, up to the end of the gallbladder dissection (Endoscapes annotates
the dissection, where the view is judged).
"""

from __future__ import annotations

import numpy as np

from plstitch_eval.data.synthetic_scene import anatomy_state, in_phase_progress

CRITERIA = ("C1", "C2", "C3")
# the state each criterion reads and the level at which a middling rater calls it met
_CLEARED_C1, _CLEARED_C2, _DETACHED_C3 = 0.45, 0.75, 0.3
RATER_BIAS = (-0.08, 0.0, 0.08)  # lenient, middling, strict: added to every threshold
SLIP = 0.05  # share of (frame, criterion) judgements a rater gets wrong
LAST_PHASE = 3  # GallbladderDissection: frames of later phases are not rated


def criteria_margins(phases: np.ndarray) -> np.ndarray:
    """[n, 3] how far each frame's anatomy is past each criterion's middling threshold (> 0: met)."""
    state = anatomy_state(phases, in_phase_progress(phases))
    cleared = 1.0 - state["fat"]
    return np.stack(
        [cleared - _CLEARED_C1, cleared - _CLEARED_C2, state["detach"] - _DETACHED_C3], axis=1
    ).astype(np.float64)


def cvs_ratings(
    phases: np.ndarray, fps: float, rng: np.random.Generator, every_s: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """(times [M] s, ratings [M, raters, criteria] int8 0/1) of the frames annotated every `every_s` seconds
    (up to the end of LAST_PHASE) of a video whose per-frame phases at `fps` are `phases`; `rng` draws the
    raters' slips."""
    phases = np.asarray(phases, np.int64)
    step = max(1, int(round(every_s * fps)))
    ids = np.arange(0, len(phases), step)
    ids = ids[phases[ids] <= LAST_PHASE]
    margins = criteria_margins(phases)[ids]  # [M, 3]
    bias = np.asarray(RATER_BIAS)[None, :, None]  # [1, raters, 1]
    ratings = (margins[:, None, :] > bias).astype(np.int8)
    slips = rng.random(ratings.shape) < SLIP
    ratings[slips] = 1 - ratings[slips]
    return ids / float(fps), ratings

"""Triplet mAPs against CAMMA's ivtmetrics (a test-only reference), hand-worked APs and an explicit-loop
re-derivation of the I/V/T/IV/IT components from the triplet table."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_MAP, TRIPLET_NAMES
from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.triplets import (
    COMPONENTS,
    component_classes,
    component_values,
    triplet_aps,
    triplet_maps,
    video_aps,
)

HAVE_IVTMETRICS = importlib.util.find_spec("ivtmetrics") is not None
needs_ivtmetrics = pytest.mark.skipif(
    not HAVE_IVTMETRICS, reason="ivtmetrics not installed (pip install ivtmetrics: the test extra)"
)
COLUMN = {"ivt": 0, "i": 1, "v": 2, "t": 3, "iv": 4, "it": 5}
ABSENT_EVERYWHERE = 5  # a triplet no video shows
ABSENT_IN_VIDEO_0 = 17  # a triplet every video but the first shows


def _random_videos(seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Five videos: sparse triplet labels, one video without any positive, one with tied (rounded) scores."""
    rng = np.random.default_rng(seed)
    scores, labels = [], []
    rates = rng.uniform(0.02, 0.3, size=100)
    for v, n in enumerate((16, 9, 12, 6, 20)):
        y = (rng.random((n, 100)) < rates).astype(np.int64)
        y[:, ABSENT_EVERYWHERE] = 0
        y[0, ABSENT_IN_VIDEO_0] = 1
        if v == 0:
            y[:, ABSENT_IN_VIDEO_0] = 0
        if v == 3:
            y[:] = 0  # a video with no positive at all
        s = rng.random((n, 100)) + 0.5 * y
        if v == 2:
            s = np.round(s, 1)  # ties
        scores.append(s)
        labels.append(y)
    return scores, labels


def _ivtmetrics_aps(scores, labels, component, ignore_null=False, restore_nan=True):
    """ivtmetrics' Recognition, one video at a time. `restore_nan`: give it back the `-0.0` AP of a class with
    no positive that scikit-learn returned when ivtmetrics was written (newer releases clip it to +0.0)."""
    import ivtmetrics.recognition as rec

    def old_sklearn_ap(y_true, y_score, average=None):
        out = average_precision_score(y_true, y_score, average=average)
        return np.where(np.asarray(y_true).any(axis=0), out, -0.0)

    original = rec.average_precision_score
    if restore_nan:
        rec.average_precision_score = old_sklearn_ap
    try:
        metric = rec.Recognition(num_class=100)
        for s, y in zip(scores, labels, strict=True):
            metric.update(y, s)
            metric.video_end()
        with np.errstate(all="ignore"):
            return metric.compute_video_AP(component, ignore_null=ignore_null)
    finally:
        rec.average_precision_score = original


@needs_ivtmetrics
@pytest.mark.parametrize("ignore_null", [False, True])
def test_six_maps_equal_ivtmetrics_on_random_videos(ignore_null: bool) -> None:
    scores, labels = _random_videos()
    ours = triplet_maps(scores, labels, ignore_null=ignore_null)
    for component in COMPONENTS:
        theirs = _ivtmetrics_aps(scores, labels, component, ignore_null)
        assert ours[f"mAP_{component}"] / 100 == pytest.approx(theirs["mAP"], abs=1e-6), component
        per_class = triplet_aps(scores, labels, component) / 100
        if ignore_null and component == "ivt":
            per_class = per_class[:-6]
        np.testing.assert_allclose(per_class, theirs["AP"], atol=1e-6, equal_nan=True)
    aps = triplet_aps(scores, labels, "ivt")
    assert np.isnan(aps[ABSENT_EVERYWHERE]) and not np.isnan(aps[ABSENT_IN_VIDEO_0])


@needs_ivtmetrics
def test_ivtmetrics_on_this_scikit_learn_is_reproduced_too() -> None:
    """Unpatched ivtmetrics scores a class absent from a video 0 where scikit-learn clips AP to +0.0, NaN
    where it still returns -0.0: `absent=` picks the matching convention, and the numbers agree either way."""
    scores, labels = _random_videos(seed=3)
    with pytest.warns(UserWarning):
        no_positive = str(average_precision_score([0, 0], [1.0, 2.0]))
    absent = "zero" if no_positive == "0.0" else "ignore"  # "-0.0" or "nan" on older releases
    ours = triplet_maps(scores, labels, absent=absent)
    for component in COMPONENTS:
        theirs = _ivtmetrics_aps(scores, labels, component, restore_nan=False)
        assert ours[f"mAP_{component}"] / 100 == pytest.approx(theirs["mAP"], abs=1e-6), component


def test_hand_worked_aps() -> None:
    """Two videos, two triplets that share the target gallbladder: APs worked out by hand."""
    a_s, a_y = np.zeros((4, 100)), np.zeros((4, 100), int)
    b_s, b_y = np.zeros((3, 100)), np.zeros((3, 100), int)
    grasp_retract_gb, hook_dissect_gb = (
        17,
        60,
    )  # (grasper, retract, gallbladder), (hook, dissect, gallbladder)
    assert (
        TRIPLET_NAMES[17] == "grasper,retract,gallbladder" and TRIPLET_NAMES[60] == "hook,dissect,gallbladder"
    )
    a_s[:, grasp_retract_gb], a_y[:, grasp_retract_gb] = (
        [0.9, 0.8, 0.3, 0.1],
        [1, 0, 1, 0],
    )  # AP 1/2 + 2/3 * 1/2
    b_s[:, grasp_retract_gb], b_y[:, grasp_retract_gb] = [0.5, 0.4, 0.2], [0, 1, 0]  # AP 1/2
    b_s[:, hook_dissect_gb], b_y[:, hook_dissect_gb] = [0.2, 0.6, 0.7], [1, 1, 0]  # AP 1/2 * 1/2 + 1/2 * 2/3
    ap_a, ap_b17, ap_b60 = 5 / 6, 1 / 2, 7 / 12
    per_class = (ap_a + ap_b17) / 2  # triplet 17: mean over the two videos; triplet 60: video b only
    expected = {c: (per_class + ap_b60) / 2 * 100 for c in ("i", "v", "iv", "it", "ivt")}
    # target: video b's gallbladder is the max of both triplets, labels [1, 1, 0], scores [0.5, 0.6, 0.7]
    expected["t"] = (ap_a + 7 / 12) / 2 * 100
    got = triplet_maps([a_s, b_s], [a_y, b_y])
    for component in COMPONENTS:
        assert got[f"mAP_{component}"] == pytest.approx(expected[component], abs=1e-9), component
    if HAVE_IVTMETRICS:
        for component in COMPONENTS:
            theirs = _ivtmetrics_aps([a_s, b_s], [a_y, b_y], component)["mAP"]
            assert got[f"mAP_{component}"] / 100 == pytest.approx(theirs, abs=1e-6)


def _loop_components(x: np.ndarray, component: str) -> dict[int, np.ndarray]:
    """Component id -> its per-frame values, by an explicit loop over frames and the triplet table."""
    col = COLUMN[component]
    out: dict[int, np.ndarray] = {}
    for frame in range(x.shape[0]):
        for row in TRIPLET_MAP:
            cid = row[col]
            values = out.setdefault(cid, np.full(x.shape[0], -np.inf))
            values[frame] = max(values[frame], x[frame, row[0]])
    return out


def _loop_ap(scores: np.ndarray, labels: np.ndarray) -> float:
    """AP of untied scores: the mean, over positives, of the precision at each positive's rank."""
    order = np.argsort(-scores)
    hits = labels[order]
    ranks = np.flatnonzero(hits) + 1
    return float(np.mean(np.arange(1, len(ranks) + 1) / ranks))


@pytest.mark.parametrize("component", ["i", "v", "t", "iv", "it"])
def test_components_and_maps_against_an_explicit_loop(component: str) -> None:
    scores, labels = _random_videos(seed=1)
    scores[2] = scores[2] + np.random.default_rng(9).random(scores[2].shape) * 1e-3  # no ties: _loop_ap
    classes = component_classes(component)
    assert len(classes) == {"i": 6, "v": 10, "t": 15, "iv": 26, "it": 59}[component]
    per_class: dict[int, list[float]] = {c: [] for c in classes}
    for s, y in zip(scores, labels, strict=True):
        loop_s, loop_y = _loop_components(s, component), _loop_components(y, component)
        assert sorted(loop_s) == classes
        np.testing.assert_array_equal(
            component_values(s, component), np.stack([loop_s[c] for c in classes], 1)
        )
        np.testing.assert_array_equal(
            component_values(y, component), np.stack([loop_y[c] for c in classes], 1)
        )
        for c in classes:
            if loop_y[c].any():
                per_class[c].append(_loop_ap(loop_s[c], loop_y[c].astype(int)))
    expected = np.mean([np.mean(v) for v in per_class.values() if v]) * 100
    assert triplet_maps(scores, labels)[f"mAP_{component}"] == pytest.approx(expected, abs=1e-9)


def test_video_aps_equal_scikit_learn_with_ties() -> None:
    rng = np.random.default_rng(4)
    scores = np.round(rng.random((30, 12)), 1)  # many ties
    labels = (rng.random((30, 12)) < 0.3).astype(int)
    labels[:, 0] = 0
    labels[:, 1] = 1
    got = video_aps(scores, labels)
    assert np.isnan(got[0]) and video_aps(scores, labels, absent="zero")[0] == 0.0
    for j in range(1, 12):
        assert got[j] / 100 == pytest.approx(average_precision_score(labels[:, j], scores[:, j]), abs=1e-12)


def test_bad_inputs_are_named() -> None:
    with pytest.raises(EvaluationError, match="must both be"):
        triplet_maps([np.zeros((3, 100))], [np.zeros((3, 99), int)])
    with pytest.raises(EvaluationError, match="'v1'.*0/1"):
        triplet_maps([np.zeros((2, 100))], [np.full((2, 100), -1)], videos=["v1"])
    with pytest.raises(EvaluationError, match="one of each per video"):
        triplet_maps([np.zeros((2, 100))], [])
    with pytest.raises(EvaluationError, match="unknown triplet component"):
        component_classes("vt")

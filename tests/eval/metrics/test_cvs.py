"""CVS metrics against an independent formulation: scikit-learn's AP / F1 / balanced accuracy per criterion
and a plain loop for the Brier score, on random and hand-made inputs, to 1e-6."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, balanced_accuracy_score, f1_score

from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.cvs import CRITERIA, cvs_metrics, cvs_scores, cvs_scores_per_video

VOTES = np.array([0.0, 1 / 3, 2 / 3, 1.0])  # the mean of three raters' 0/1 votes


def _reference(probs: np.ndarray, means: np.ndarray) -> dict[str, list[float]]:
    """Per criterion, as CVSMetric.py reads torchmetrics: AP and F1 on the rounded mean, Brier on the mean."""
    out: dict[str, list[float]] = {"ap": [], "brier": [], "f1": [], "balanced_accuracy": []}
    for c in range(3):
        target = [1 if m > 0.5 else 0 for m in means[:, c]]  # 1/3 -> 0, 2/3 -> 1: no halves to round
        predicted = [1 if p > 0.5 else 0 for p in probs[:, c]]
        if sum(target):
            out["ap"].append(100 * average_precision_score(target, probs[:, c]))
        else:
            out["ap"].append(float("nan"))
        total = 0.0
        for p, m in zip(probs[:, c], means[:, c], strict=True):
            total += (p - m) ** 2
        out["brier"].append(total / len(probs))
        out["f1"].append(100 * f1_score(target, predicted, zero_division=0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # one class in the target: scikit-learn warns, keeps the other
            out["balanced_accuracy"].append(100 * balanced_accuracy_score(target, predicted))
    return out


def _headline(values: list[float]) -> float:
    defined = [v for v in values if not np.isnan(v)]
    return sum(defined) / len(defined)


def _random_video(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    means = rng.choice(VOTES, size=(n, 3), p=[0.5, 0.2, 0.15, 0.15])
    probs = np.clip(means * 0.6 + rng.random((n, 3)) * 0.4, 0, 1)
    probs[rng.random((n, 3)) < 0.2] = 0.5  # ties, and probabilities on the threshold itself
    return probs, means


def _check(ours: dict, reference: dict[str, list[float]]) -> None:
    for key, head in (
        ("ap", "mAP"),
        ("brier", "brier"),
        ("f1", "f1"),
        ("balanced_accuracy", "balanced_accuracy"),
    ):
        assert ours[head] == pytest.approx(_headline(reference[key]), abs=1e-6)
        for name, value in zip(CRITERIA, reference[key], strict=True):
            got = ours[f"{'AP' if key == 'ap' else key}_{name}"]
            assert (got is None) if np.isnan(value) else got == pytest.approx(value, abs=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_per_frame_equals_scikit_learn_on_random_frames(seed: int) -> None:
    rng = np.random.default_rng(seed)
    probs, means = _random_video(rng, int(rng.integers(5, 80)))
    _check(cvs_scores(probs, means), _reference(probs, means))


def test_hand_made_frames() -> None:
    means = np.array([[1, 2 / 3, 0], [1 / 3, 0, 0], [0, 1, 0], [2 / 3, 1 / 3, 0]])
    probs = np.array([[0.9, 0.5, 0.2], [0.6, 0.1, 0.7], [0.1, 0.8, 0.4], [0.6, 0.7, 0.1]])
    scores = cvs_scores(probs, means)
    # C1 rounded: rows 0 and 3 positive; 0.9 (pos), then 0.6 twice (neg, pos: one threshold) -> (1 + 2/3) / 2
    assert scores["AP_C1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert scores["AP_C3"] is None and scores["mAP"] == pytest.approx((scores["AP_C1"] + scores["AP_C2"]) / 2)
    # C2: 0.5 is not above the threshold, so row 0 is a false negative: tp 1 (row 2), fp 1 (row 3), fn 1
    assert scores["f1_C2"] == pytest.approx(50.0)
    assert scores["f1_C3"] == 0.0  # no true positive; row 1 (0.7) is a false positive
    assert scores["balanced_accuracy_C3"] == pytest.approx(75.0)  # only negatives: the recall of 0 (3 of 4)
    brier_c1 = ((0.9 - 1) ** 2 + (0.6 - 1 / 3) ** 2 + 0.1**2 + (0.6 - 2 / 3) ** 2) / 4
    assert scores["brier_C1"] == pytest.approx(brier_c1)
    _check(scores, _reference(probs, means))


def test_unannotated_frames_are_left_out() -> None:
    rng = np.random.default_rng(7)
    probs, means = _random_video(rng, 30)
    holes = means.copy()
    holes[::5] = np.nan  # frames between the annotated ones (one in five annotated in Endoscapes)
    keep = ~np.isnan(holes).any(axis=1)
    assert cvs_scores(probs, holes) == cvs_scores(probs[keep], means[keep])


@pytest.mark.parametrize("average", ["per_class", "per_video"])
def test_per_video_equals_video_wise_scikit_learn(average: str) -> None:
    rng = np.random.default_rng(11)
    videos = [_random_video(rng, n) for n in (12, 30, 7, 20)]
    videos[2][1][:, 2] = 0  # a video without a positive C3: its AP is undefined there
    ours = cvs_scores_per_video([p for p, _ in videos], [m for _, m in videos], average=average)
    references = [_reference(p, m) for p, m in videos]
    for key, head in (
        ("ap", "mAP"),
        ("brier", "brier"),
        ("f1", "f1"),
        ("balanced_accuracy", "balanced_accuracy"),
    ):
        table = np.array([ref[key] for ref in references])  # [videos, criteria]
        if average == "per_class":
            expected = _headline([_headline(list(table[:, c])) for c in range(3)])
        else:
            expected = _headline([_headline(list(row)) for row in table])
        assert ours[head] == pytest.approx(expected, abs=1e-6)
        for c, name in enumerate(CRITERIA):
            got = ours[f"{'AP' if key == 'ap' else key}_{name}"]
            assert got == pytest.approx(_headline(list(table[:, c])), abs=1e-6)


def test_cvs_metrics_pools_frames_and_scores_videos() -> None:
    rng = np.random.default_rng(3)
    videos = [_random_video(rng, n) for n in (10, 25)]
    result = cvs_metrics([p for p, _ in videos], [m for _, m in videos], videos=["a", "b"])
    pooled = _reference(np.concatenate([p for p, _ in videos]), np.concatenate([m for _, m in videos]))
    assert result["per_frame"]["mAP"] == pytest.approx(_headline(pooled["ap"]), abs=1e-6)
    assert result["per_video"] == cvs_scores_per_video([p for p, _ in videos], [m for _, m in videos])


def test_absent_zero_scores_a_criterion_without_positives_zero() -> None:
    probs, means = np.full((3, 3), 0.7), np.array([[1.0, 0, 1], [1, 0, 0], [0, 0, 1]])
    assert cvs_scores(probs, means)["AP_C2"] is None
    zero = cvs_scores(probs, means, absent="zero")
    assert zero["AP_C2"] == 0.0 and zero["mAP"] == pytest.approx((zero["AP_C1"] + zero["AP_C3"] + 0) / 3)


@pytest.mark.parametrize(
    ("probs", "means", "message"),
    [
        (np.full((2, 3), 1.5), np.zeros((2, 3)), r"probabilities in \[0, 1\]; pass sigmoid\(logits\)"),
        (np.zeros((2, 2)), np.zeros((2, 2)), r"must both be \[frames, 3\]"),
        (np.zeros((2, 3)), np.full((2, 3), 2.0), r"raters' means must lie in \[0, 1\]"),
    ],
)
def test_bad_input_is_one_line(probs: np.ndarray, means: np.ndarray, message: str) -> None:
    with pytest.raises(EvaluationError, match=message) as info:
        cvs_scores(probs, means)
    assert "\n" not in str(info.value)

"""Metrics against hand-worked cases, scikit-learn, and a loop that re-implements MS-TCN's eval.py."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score, jaccard_score, precision_score, recall_score

from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics import (
    clustering_scores,
    edit_score,
    edit_scores,
    frame_accuracy,
    frame_metrics,
    macro_f1,
    macro_jaccard,
    segment_metrics,
    segmental_f1,
)

GT = np.array([1, 1, 1, 0, 0, 2, 2, 2, 2, 2])
PRED = np.array([1, 1, 0, 0, 2, 2, 2, 1, 1, 1])


# --------------------------------------------------------------------- MS-TCN semantics, written as loops
def loop_segments(labels, bg, last_end="exclusive"):
    out, start = [], 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            end = i if (i < len(labels) or last_end == "exclusive") else i - 1
            if labels[start] not in bg:
                out.append((labels[start], start, end))
            start = i
    return out


def loop_counts(pred, gt, overlap, bg, last_end="exclusive"):
    p, y = loop_segments(pred, bg, last_end), loop_segments(gt, bg, last_end)
    hit = [False] * len(y)
    tp = fp = 0
    for label, s, e in p:
        # As eval.py: IoU with every GT segment times (same label); 0/0 is nan and argmax picks nan first.
        ious = []
        for yl, ys, ye in y:
            union = max(e, ye) - min(s, ys)
            ious.append(float("nan") if union == 0 else (min(e, ye) - max(s, ys)) / union * (yl == label))
        best = next((j for j, v in enumerate(ious) if v != v), None)
        if best is None and ious:
            best = max(range(len(ious)), key=lambda j: (ious[j], -j))
        if y and ious[best] == ious[best] and ious[best] >= overlap and not hit[best]:
            tp += 1
            hit[best] = True
        else:
            fp += 1
    return tp, fp, len(y) - sum(hit)


def loop_edit(pred, gt, bg):
    p = [s[0] for s in loop_segments(pred, bg)]
    y = [s[0] for s in loop_segments(gt, bg)]
    if not p and not y:
        return 100.0
    d = [[i + j if i * j == 0 else 0 for j in range(len(y) + 1)] for i in range(len(p) + 1)]
    for i in range(1, len(p) + 1):
        for j in range(1, len(y) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (p[i - 1] != y[j - 1]))
    return (1 - d[-1][-1] / max(len(p), len(y))) * 100


def f1(tp, fp, fn):
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return 0.0 if p + r == 0 else 2 * p * r / (p + r) * 100


# ------------------------------------------------------------------------------------ hand-worked cases
def test_hand_worked_segments():
    # GT segments (bg 0 dropped): 1:[0,3) 2:[5,10).
    # Pred: 1:[0,2) IoU 2/3, 2:[4,7) IoU 1/3, 1:[7,10) no overlap.
    f = segmental_f1([PRED], [GT], overlaps=(0.1, 0.25, 0.5), bg_classes=[0])
    assert f[0.1] == pytest.approx(80.0)  # TP 2, FP 1, FN 0
    assert f[0.25] == pytest.approx(80.0)
    assert f[0.5] == pytest.approx(40.0)  # TP 1, FP 2, FN 1
    assert edit_score([PRED], [GT], bg_classes=[0]) == pytest.approx(100 * (1 - 1 / 3))  # [1,2,1] vs [1,2]
    assert frame_accuracy(PRED, GT) == pytest.approx(50.0)


def test_hand_worked_macro_scores_and_sklearn():
    m = frame_metrics([PRED], [GT])["metrics"]
    assert m["macro_f1_pooled"] == pytest.approx(50.0)  # every class has F1 0.5
    assert m["macro_jaccard_pooled"] == pytest.approx(100 / 3)
    assert m["macro_precision_pooled"] == pytest.approx(100 * (0.5 + 0.4 + 2 / 3) / 3)
    assert m["macro_recall_pooled"] == pytest.approx(100 * (0.5 + 2 / 3 + 0.4) / 3)


def test_pooled_and_per_video_conventions_match_sklearn():
    rng = np.random.default_rng(3)
    gts = [rng.integers(0, 5, 50), rng.integers(0, 3, 30), rng.integers(2, 6, 40)]
    preds = [np.where(rng.random(len(g)) < 0.6, g, rng.integers(0, 6, len(g))) for g in gts]
    m = frame_metrics(preds, gts, num_classes=6)["metrics"]
    g_all, p_all = np.concatenate(gts), np.concatenate(preds)
    for name, fn in (("precision", precision_score), ("recall", recall_score), ("f1", f1_score)):
        pooled = fn(g_all, p_all, average="macro", zero_division=0) * 100
        per_video = np.mean(
            [fn(g, p, average="macro", zero_division=0) * 100 for g, p in zip(gts, preds, strict=True)]
        )
        assert m[f"macro_{name}_pooled"] == pytest.approx(pooled)
        assert m[f"macro_{name}_video"] == pytest.approx(per_video)
    assert m["macro_jaccard_pooled"] == pytest.approx(jaccard_score(g_all, p_all, average="macro") * 100)
    assert macro_f1(preds, gts, "video") == pytest.approx(m["macro_f1_video"])
    assert macro_jaccard(preds, gts) == pytest.approx(m["macro_jaccard_pooled"])
    assert m["accuracy"] == pytest.approx((g_all == p_all).mean() * 100)


def test_unlabelled_frames_are_ignored():
    gt = np.array([0, 0, -1, -1, 1, 1])
    pred = np.array([0, 0, 1, 1, 1, 1])
    assert frame_accuracy(pred, gt) == 100.0
    assert frame_metrics([pred], [gt])["metrics"]["macro_f1_pooled"] == 100.0


def test_mstcn2_last_segment_end():
    gt, pred = np.array([1, 1, 1, 1]), np.array([0, 0, 1, 1])
    # Exclusive end (MS-TCN): pred 1:[2,4) vs GT 1:[0,4) -> IoU 1/2.
    # MS-TCN2 ends the last segment at T-1: [2,3) vs [0,3) -> IoU 1/3.
    assert segmental_f1([pred], [gt], overlaps=(0.5,))[0.5] == pytest.approx(f1(1, 1, 0))
    assert segmental_f1([pred], [gt], overlaps=(0.5,), last_end="mstcn2")[0.5] == 0.0


def test_empty_ground_truth_after_background_is_defined():
    gt = np.zeros(6, dtype=int)
    m = segment_metrics([np.array([0, 0, 1, 1, 0, 0])], [gt], bg_classes=[0])["metrics"]
    assert m["f1@10"] == 0.0 and m["edit"] == 0.0  # one FP, no GT segment
    assert edit_scores([gt], [gt], bg_classes=[0])[0] == 100.0
    # Pooled over videos, the empty video only adds its false positives.
    good = np.array([1, 1, 2, 2])
    both = segmental_f1([good, np.array([1, 1, 0, 0, 0, 0])], [good, gt], overlaps=(0.5,), bg_classes=[0])
    assert both[0.5] == pytest.approx(f1(2, 1, 0))


@pytest.mark.parametrize("seed", range(6))
def test_segments_match_mstcn_loop(seed):
    rng = np.random.default_rng(seed)
    preds, gts = [], []
    for _ in range(rng.integers(1, 6)):
        t = int(rng.integers(1, 80))
        gt = np.repeat(rng.integers(0, 4, t), rng.integers(1, 12))[:t]
        pred = gt.copy()
        flip = rng.random(t) < 0.25
        pred[flip] = rng.integers(0, 4, flip.sum())
        preds.append(pred)
        gts.append(gt)
    bg = [0] if seed % 2 else []
    for last_end in ("exclusive", "mstcn2"):
        got = segmental_f1(preds, gts, (0.1, 0.25, 0.5), bg, last_end)
        for overlap in (0.1, 0.25, 0.5):
            counts = np.sum(
                [loop_counts(p, g, overlap, bg, last_end) for p, g in zip(preds, gts, strict=True)], axis=0
            )
            assert got[overlap] == pytest.approx(f1(*counts))
    want_edit = np.mean([loop_edit(p, g, bg) for p, g in zip(preds, gts, strict=True)])
    assert edit_score(preds, gts, bg) == pytest.approx(want_edit)


def test_length_mismatch_names_the_video():
    with pytest.raises(EvaluationError, match="P03_cereals"):
        frame_metrics([PRED[:-1]], [GT], videos=["P03_cereals"])
    with pytest.raises(EvaluationError, match="no labelled frames"):
        frame_metrics([np.zeros(3, int)], [-np.ones(3, int)], videos=["v"])


def test_clustering_scores_separated_clusters():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 30)
    feats = np.eye(3)[labels] * 10 + rng.normal(size=(90, 3)) * 0.1
    scores = clustering_scores(feats, labels)
    assert scores["ari"] == pytest.approx(100.0) and scores["nmi"] == pytest.approx(100.0)
    shuffled = clustering_scores(feats, rng.permutation(labels))
    assert shuffled["ari"] < 20


def test_string_labels_as_in_mstcn_files():
    names = np.array(["background", "take", "open", "pour"])
    as_ids = segment_metrics([PRED], [GT], bg_classes=[0])["metrics"]
    as_str = segment_metrics([list(names[PRED])], [list(names[GT])], bg_classes=["background"])["metrics"]
    assert as_str == pytest.approx(as_ids)
    single = segmental_f1(list(names[PRED]), list(names[GT]), overlaps=(0.5,), bg_classes=["background"])
    assert single[0.5] == pytest.approx(40.0)

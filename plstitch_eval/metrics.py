"""Frame and segment metrics for phase recognition and action segmentation (numpy, vectorised).

Conventions (REFERENCE.md section 5). All scores are in percent (0-100), as in the paper's tables.

* Frames whose ground truth is negative (-1 = unlabelled) are ignored by every frame metric.
* Macro precision/recall/F1/Jaccard, two conventions:
  - ``*_pooled``: one confusion matrix over all frames of all videos; macro average over the classes present
    in the ground truth *or* the prediction (scikit-learn's ``average="macro"`` with ``labels=None``);
  - ``*_video``: the same per video (classes present in that video's ground truth or prediction), then the
    mean over videos (the SelfSupSurg recommendation). A class with no predicted frames has precision 0; a
    predicted class absent from the ground truth has recall 0 (scikit-learn's ``zero_division=0``).
* Segments follow MS-TCN's ``eval.py``: a segment is a maximal run of equal labels, background classes (and
  negative labels) are dropped, the end is exclusive (the last segment ends at ``T``; ``last_end="mstcn2"``
  uses MS-TCN2's ``T - 1``). Each predicted segment takes the ground-truth segment of the same label with
  the highest IoU (first one on ties); it is a TP if IoU >= threshold and that GT segment is not yet matched,
  else an FP. FN = unmatched GT segments. TP/FP/FN are summed over videos before precision/recall/F1.
* Edit = ``(1 - lev(P, Y) / max(|P|, |Y|)) * 100`` on the segment label sequences, averaged over videos.
* Empty ground truth after dropping background (MS-TCN raises or divides by zero there), defined as:
  segmental F1 - every predicted segment is an FP, no FN; Edit - 100 if the prediction has no segment
  either, else 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from plstitch_eval.errors import EvaluationError

DEFAULT_OVERLAPS = (0.1, 0.25, 0.5)


# ----------------------------------------------------------------------------------------------- checks
def _as_label_lists(
    preds: Sequence[np.ndarray] | np.ndarray,
    gts: Sequence[np.ndarray] | np.ndarray,
    videos: Sequence[str] | None = None,
    bg_classes: Iterable = (),
) -> tuple[list[np.ndarray], list[np.ndarray], list[str], list[int]]:
    """Validate per-video label arrays (one flat array = one video); return int64 lists and background ids.

    String labels (MS-TCN ground-truth files) are mapped to ids by sorted name, background names likewise.
    """
    if isinstance(preds, np.ndarray) and preds.ndim == 1:
        preds, gts = [preds], [np.asarray(gts)]
    if len(preds) and np.ndim(preds[0]) == 0:  # one video given as a plain list of labels
        preds, gts = [np.asarray(preds)], [np.asarray(gts)]
    preds, gts = [np.asarray(x) for x in preds], [np.asarray(x) for x in gts]
    bg = list(bg_classes)
    if any(x.dtype.kind not in "iub" for x in preds + gts if x.size):
        vocab = np.unique(np.concatenate([x.astype(str) for x in preds + gts]))
        preds = [np.searchsorted(vocab, x.astype(str)) for x in preds]
        gts = [np.searchsorted(vocab, x.astype(str)) for x in gts]
        bg = [int(np.searchsorted(vocab, str(b))) for b in bg if str(b) in set(vocab.tolist())]
    names = list(videos) if videos is not None else [f"#{i}" for i in range(len(gts))]
    if len(preds) != len(gts) or len(names) != len(gts):
        raise EvaluationError(
            f"{len(preds)} prediction sequences, {len(gts)} ground-truth sequences and {len(names)} video "
            "names; pass one of each per video."
        )
    out_p, out_g = [], []
    for name, p, g in zip(names, preds, gts, strict=True):
        p, g = np.asarray(p).reshape(-1), np.asarray(g).reshape(-1)
        if len(p) != len(g):
            raise EvaluationError(
                f"Video {name!r}: {len(p)} predicted labels but {len(g)} ground-truth labels; "
                "predictions must have one label per ground-truth frame."
            )
        out_p.append(p.astype(np.int64, copy=False))
        out_g.append(g.astype(np.int64, copy=False))
    return out_p, out_g, names, [int(b) for b in bg]


# ----------------------------------------------------------------------------------------- frame metrics
def frame_accuracy(preds, gts) -> float:
    """Percentage of labelled frames (gt >= 0) predicted correctly, pooled over all videos."""
    p, g, _, _ = _as_label_lists(preds, gts)
    p, g = np.concatenate(p) if p else np.zeros(0, int), np.concatenate(g) if g else np.zeros(0, int)
    keep = g >= 0
    if not keep.any():
        raise EvaluationError("No labelled frames to score (every ground-truth label is negative or empty).")
    return float((p[keep] == g[keep]).mean() * 100.0)


def _macro_from_confusion(conf: np.ndarray) -> dict[str, np.ndarray]:
    """Macro P/R/F1/Jaccard from confusion matrices [..., C, C] (rows = GT, cols = pred), in percent.

    Classes counted: those with GT support or predictions (sklearn macro, zero_division=0).
    """
    tp = np.diagonal(conf, axis1=-2, axis2=-1).astype(np.float64)
    support = conf.sum(-1).astype(np.float64)
    predicted = conf.sum(-2).astype(np.float64)
    present = (support > 0) | (predicted > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        recall = np.where(support > 0, tp / support, 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
        union = support + predicted - tp
        jaccard = np.where(union > 0, tp / union, 0.0)
        n_present = present.sum(-1)

        def avg(x: np.ndarray) -> np.ndarray:
            return np.where(n_present > 0, (x * present).sum(-1) / np.maximum(n_present, 1), np.nan) * 100.0

    return {"precision": avg(precision), "recall": avg(recall), "f1": avg(f1), "jaccard": avg(jaccard)}


def confusion_matrices(preds, gts, num_classes: int | None = None) -> np.ndarray:
    """Per-video confusion matrices [V, C, C] (rows = GT, cols = prediction), frames with gt < 0 dropped."""
    p, g, names, _ = _as_label_lists(preds, gts)
    lengths = np.array([len(x) for x in g], dtype=np.int64)
    flat_p = np.concatenate(p) if p else np.zeros(0, np.int64)
    flat_g = np.concatenate(g) if g else np.zeros(0, np.int64)
    video = np.repeat(np.arange(len(g)), lengths)
    keep = flat_g >= 0
    flat_p, flat_g, video = flat_p[keep], flat_g[keep], video[keep]
    if (flat_p < 0).any():
        raise EvaluationError("Predictions contain negative class ids; predict a class for every frame.")
    c = int(num_classes or 0)
    c = max(c, int(flat_g.max(initial=-1)) + 1, int(flat_p.max(initial=-1)) + 1, 1)
    flat = (video * c + flat_g) * c + flat_p
    return np.bincount(flat, minlength=len(g) * c * c).reshape(len(g), c, c)


def frame_metrics(preds, gts, num_classes: int | None = None, videos: Sequence[str] | None = None) -> dict:
    """Accuracy and macro P/R/F1/Jaccard in both conventions (``*_pooled`` and ``*_video``), in percent.

    Returns ``{"metrics": {...}, "per_video": {video: {"accuracy", "macro_f1", ...}}}``.
    """
    p, g, names, _ = _as_label_lists(preds, gts, videos)
    for name, gt in zip(names, g, strict=True):
        if not (gt >= 0).any():
            raise EvaluationError(
                f"Video {name!r} has no labelled frames (empty ground truth); drop it from the split."
            )
    conf = confusion_matrices(p, g, num_classes)
    pooled = _macro_from_confusion(conf.sum(0))
    per = _macro_from_confusion(conf)
    correct = np.diagonal(conf, axis1=1, axis2=2).sum(1)
    total = conf.sum((1, 2))
    acc_video = correct / np.maximum(total, 1) * 100.0
    metrics = {"accuracy": float(correct.sum() / max(total.sum(), 1) * 100.0)}
    for key in ("precision", "recall", "f1", "jaccard"):
        metrics[f"macro_{key}_pooled"] = float(pooled[key])
        metrics[f"macro_{key}_video"] = float(np.mean(per[key]))
    metrics["accuracy_video"] = float(np.mean(acc_video))
    per_video = {
        name: {
            "accuracy": float(acc_video[i]),
            **{f"macro_{k}": float(per[k][i]) for k in ("precision", "recall", "f1", "jaccard")},
        }
        for i, name in enumerate(names)
    }
    return {"metrics": metrics, "per_video": per_video}


def macro_scores(preds, gts, num_classes: int | None = None) -> dict[str, float]:
    """Frame-pooled and per-video-averaged macro P/R/F1/Jaccard plus accuracy (see module docstring)."""
    return frame_metrics(preds, gts, num_classes)["metrics"]


def _macro(name: str, preds, gts, convention: str, num_classes: int | None) -> float:
    if convention not in ("pooled", "video"):
        raise EvaluationError(
            f"convention must be 'pooled' (all frames) or 'video' (per video), got {convention!r}."
        )
    return macro_scores(preds, gts, num_classes)[f"macro_{name}_{convention}"]


def macro_f1(preds, gts, convention: str = "pooled", num_classes: int | None = None) -> float:
    """Macro F1 in percent, over all frames (``pooled``) or per video then averaged (``video``)."""
    return _macro("f1", preds, gts, convention, num_classes)


def macro_precision(preds, gts, convention: str = "pooled", num_classes: int | None = None) -> float:
    """Macro precision in percent (``pooled`` or ``video`` convention)."""
    return _macro("precision", preds, gts, convention, num_classes)


def macro_recall(preds, gts, convention: str = "pooled", num_classes: int | None = None) -> float:
    """Macro recall in percent (``pooled`` or ``video`` convention)."""
    return _macro("recall", preds, gts, convention, num_classes)


def macro_jaccard(preds, gts, convention: str = "pooled", num_classes: int | None = None) -> float:
    """Macro Jaccard (IoU) in percent (``pooled`` or ``video`` convention)."""
    return _macro("jaccard", preds, gts, convention, num_classes)


# --------------------------------------------------------------------------------------------- segments
def _segments(
    labels: list[np.ndarray], bg_classes: Iterable[int] = (), last_end: str = "exclusive"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Segments of all videos at once: (video, label, start, end) arrays, background dropped.

    End is exclusive; with ``last_end="mstcn2"`` the last segment of a video ends at T - 1 instead of T.
    """
    if last_end not in ("exclusive", "mstcn2"):
        raise EvaluationError(f"last_end must be 'exclusive' (MS-TCN) or 'mstcn2', got {last_end!r}.")
    lengths = np.array([len(x) for x in labels], dtype=np.int64)
    if len(labels) == 0 or lengths.sum() == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, empty
    flat = np.concatenate(labels)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    video_of = np.repeat(np.arange(len(labels)), lengths)
    change = np.ones(len(flat), dtype=bool)
    change[1:] = (flat[1:] != flat[:-1]) | (video_of[1:] != video_of[:-1])
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], len(flat))
    seg_video = video_of[starts]
    seg_label = flat[starts]
    rel_start = starts - offsets[seg_video]
    rel_end = ends - offsets[seg_video]
    if last_end == "mstcn2":
        is_last = np.append(seg_video[1:] != seg_video[:-1], True)
        rel_end = np.where(is_last, rel_end - 1, rel_end)
    keep = ~np.isin(seg_label, np.asarray(list(bg_classes), dtype=np.int64)) & (seg_label >= 0)
    return seg_video[keep], seg_label[keep], rel_start[keep], rel_end[keep]


def segment_counts(
    preds,
    gts,
    overlap: float,
    bg_classes: Iterable[int] = (),
    last_end: str = "exclusive",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-video TP, FP, FN at one IoU threshold with MS-TCN's greedy best-IoU matching."""
    return segment_counts_multi(preds, gts, (overlap,), bg_classes, last_end)[overlap]


def segment_counts_multi(
    preds,
    gts,
    overlaps: Sequence[float] = DEFAULT_OVERLAPS,
    bg_classes: Iterable[int] = (),
    last_end: str = "exclusive",
) -> dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``{overlap: (TP, FP, FN) per video}`` from one segmentation and one best-IoU matching."""
    for overlap in overlaps:
        if not 0 < overlap <= 1:
            raise EvaluationError(f"IoU threshold must be in (0, 1], got {overlap}.")
    p, g, _, bg = _as_label_lists(preds, gts, bg_classes=bg_classes)
    return _counts(_segments(p, bg, last_end), _segments(g, bg, last_end), len(g), overlaps, last_end)


def _counts(pseg, gseg, n_videos: int, overlaps: Sequence[float], last_end: str) -> dict:
    pv, pl, ps, pe = pseg
    gv, gl, gs, ge = gseg
    # Candidate pairs: each predicted segment x the GT segments of the same (video, label).
    n_labels = int(max(pl.max(initial=0), gl.max(initial=0))) + 1
    gkey = gv * n_labels + gl
    order = np.argsort(gkey, kind="stable")  # keeps GT order (by start) within a key
    sorted_keys = gkey[order]
    pkey = pv * n_labels + pl
    lo = np.searchsorted(sorted_keys, pkey, side="left")
    hi = np.searchsorted(sorted_keys, pkey, side="right")
    counts = hi - lo
    pair_pred = np.repeat(np.arange(len(pkey)), counts)
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    pair_gt = order[np.repeat(lo, counts) + within]
    inter = np.minimum(pe[pair_pred], ge[pair_gt]) - np.maximum(ps[pair_pred], gs[pair_gt])
    union = np.maximum(pe[pair_pred], ge[pair_gt]) - np.minimum(ps[pair_pred], gs[pair_gt])
    iou = inter / np.maximum(union, 1e-12)
    # Best GT per predicted segment: highest IoU, lowest GT index on ties (numpy argmax rule).
    rank = np.lexsort((pair_gt, -iou, pair_pred))
    first = rank[np.unique(pair_pred[rank], return_index=True)[1]]
    best_pred, best_gt, best_iou = pair_pred[first], pair_gt[first], iou[first]
    eligible = np.ones(len(best_pred), dtype=bool)
    if last_end == "mstcn2":
        # A 1-frame last segment becomes [T-1, T-1); facing an equally empty GT segment, MS-TCN2 computes
        # IoU 0/0 = nan, which numpy's argmax picks and which never counts as a hit: always an FP.
        span = int(max(ge.max(initial=0), pe.max(initial=0))) + 1
        nan_pred = (ps == pe) & np.isin(pv * span + ps, gv[gs == ge] * span + gs[gs == ge])
        eligible = ~nan_pred[best_pred]
    n_pred = np.bincount(pv, minlength=n_videos)
    n_gt = np.bincount(gv, minlength=n_videos)
    out = {}
    for overlap in overlaps:
        # A GT segment is hit once by the first qualifying prediction; later ones pointing at it are FPs.
        hit_gt = np.unique(best_gt[(best_iou >= overlap) & eligible])
        tp = np.bincount(gv[hit_gt], minlength=n_videos)
        out[overlap] = (tp, n_pred - tp, n_gt - tp)
    return out


def _f1_from_counts(tp: float, fp: float, fn: float) -> float:
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    return 0.0 if precision + recall == 0 else float(2 * precision * recall / (precision + recall) * 100.0)


def segmental_f1(
    preds_list,
    gts_list,
    overlaps: Sequence[float] = DEFAULT_OVERLAPS,
    bg_classes: Iterable[int] = (),
    last_end: str = "exclusive",
) -> dict[float, float]:
    """F1@overlap in percent with TP/FP/FN summed over videos before precision/recall (MS-TCN)."""
    counts = segment_counts_multi(preds_list, gts_list, overlaps, bg_classes, last_end)
    out = {}
    for overlap, (tp, fp, fn) in counts.items():
        out[overlap] = _f1_from_counts(tp.sum(), fp.sum(), fn.sum())
    return out


def _batched_levenshtein(rows: list[np.ndarray], cols: list[np.ndarray]) -> np.ndarray:
    """Levenshtein distance for many sequence pairs at once (row-by-row DP, vectorised over pairs/cols).

    Within a row, D[i, j] = min_k (tmp[k] + j - k) is a running minimum, so each row is O(cols) numpy work.
    """
    n = len(rows)
    row_len = np.array([len(r) for r in rows], dtype=np.int64)
    col_len = np.array([len(c) for c in cols], dtype=np.int64)
    max_r, max_c = int(row_len.max(initial=0)), int(col_len.max(initial=0))
    a = np.full((n, max_r), -1, dtype=np.int64)
    b = np.full((n, max_c), -2, dtype=np.int64)
    for i, (r, c) in enumerate(zip(rows, cols, strict=True)):
        a[i, : len(r)] = r
        b[i, : len(c)] = c
    j = np.arange(max_c + 1, dtype=np.int64)
    prev = np.broadcast_to(j, (n, max_c + 1)).copy()
    result = prev[np.arange(n), col_len].copy()  # pairs with an empty row sequence
    for i in range(1, max_r + 1):
        cost = (a[:, i - 1 : i] != b).astype(np.int64)
        tmp = np.empty_like(prev)
        tmp[:, 0] = i
        tmp[:, 1:] = np.minimum(prev[:, 1:] + 1, prev[:, :-1] + cost)
        cur = np.minimum.accumulate(tmp - j, axis=1) + j
        done = row_len == i
        result[done] = cur[done, col_len[done]]
        prev = cur
    return result


def edit_scores(
    preds_list, gts_list, bg_classes: Iterable[int] = (), last_end: str = "exclusive"
) -> np.ndarray:
    """Per-video Edit score in percent: (1 - lev(P, Y) / max(|P|, |Y|)) * 100 over segment labels."""
    p, g, _, bg = _as_label_lists(preds_list, gts_list, bg_classes=bg_classes)
    return _edits(_segments(p, bg, last_end), _segments(g, bg, last_end), len(g))


def _edits(pseg, gseg, n: int) -> np.ndarray:
    pv, pl = pseg[:2]
    gv, gl = gseg[:2]
    p_seqs = np.split(pl, np.searchsorted(pv, np.arange(1, n)))
    g_seqs = np.split(gl, np.searchsorted(gv, np.arange(1, n)))
    dist = _batched_levenshtein(g_seqs, p_seqs)  # symmetric: loop over the (usually shorter) GT side
    longest = np.maximum([len(x) for x in p_seqs], [len(x) for x in g_seqs]).astype(np.float64)
    return np.where(longest > 0, (1.0 - dist / np.maximum(longest, 1)) * 100.0, 100.0)


def edit_score(preds_list, gts_list, bg_classes: Iterable[int] = (), last_end: str = "exclusive") -> float:
    """Edit score in percent averaged over videos (MS-TCN)."""
    return float(np.mean(edit_scores(preds_list, gts_list, bg_classes, last_end)))


def segment_metrics(
    preds_list,
    gts_list,
    bg_classes: Iterable[int] = (),
    overlaps: Sequence[float] = DEFAULT_OVERLAPS,
    videos: Sequence[str] | None = None,
    last_end: str = "exclusive",
) -> dict:
    """Edit and F1@k (keys ``edit``, ``f1@10`` ...), pooled as MS-TCN does, plus per-video values."""
    for overlap in overlaps:
        if not 0 < overlap <= 1:
            raise EvaluationError(f"IoU threshold must be in (0, 1], got {overlap}.")
    p, g, names, bg = _as_label_lists(preds_list, gts_list, videos, bg_classes)
    pseg, gseg = _segments(p, bg, last_end), _segments(g, bg, last_end)
    edits = _edits(pseg, gseg, len(g))
    metrics: dict[str, float] = {"edit": float(np.mean(edits)) if len(edits) else float("nan")}
    per_video: dict[str, dict[str, float]] = {
        name: {"edit": float(e)} for name, e in zip(names, edits, strict=True)
    }
    for overlap, (tp, fp, fn) in _counts(pseg, gseg, len(g), overlaps, last_end).items():
        key = f"f1@{round(overlap * 100):d}"
        metrics[key] = _f1_from_counts(tp.sum(), fp.sum(), fn.sum())
        for i, name in enumerate(names):
            per_video[name][key] = _f1_from_counts(tp[i], fp[i], fn[i])
    return {"metrics": metrics, "per_video": per_video}


# ------------------------------------------------------------------------------------------- clustering
def clustering_scores(
    features: np.ndarray, labels: np.ndarray, num_clusters: int | None = None, seed: int = 0
) -> dict[str, float]:
    """ARI and NMI (percent) between k-means clusters (k = number of classes) of features and labels."""
    # lazy: scikit-learn costs seconds to import (python -X importtime) and only this function needs it
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    features = np.asarray(features, dtype=np.float32)
    labels = np.asarray(labels).reshape(-1)
    if len(features) != len(labels):
        raise EvaluationError(f"{len(features)} feature rows but {len(labels)} labels for clustering.")
    keep = labels >= 0
    features, labels = features[keep], labels[keep]
    if not np.isfinite(features).all():
        raise EvaluationError("Features contain NaN or inf; re-extract them before clustering.")
    k = num_clusters or len(np.unique(labels))
    if len(features) < k:
        raise EvaluationError(f"{len(features)} labelled frames cannot form {k} clusters.")
    clusters = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(features)
    return {
        "ari": float(adjusted_rand_score(labels, clusters) * 100.0),
        "nmi": float(normalized_mutual_info_score(labels, clusters) * 100.0),
    }

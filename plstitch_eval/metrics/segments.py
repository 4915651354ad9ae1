"""Segment metrics of action segmentation: segmental F1@k and Edit, as MS-TCN's ``eval.py`` (numpy).

* A segment is a maximal run of equal labels; background classes (and negative labels) are dropped; the end
  is exclusive (the last segment ends at ``T``; ``last_end="mstcn2"`` uses MS-TCN2's ``T - 1``). Each
  predicted segment takes the ground-truth segment of the same label with the highest IoU (first one on
  ties); it is a TP if IoU >= threshold and that GT segment is not yet matched, else an FP. FN = unmatched
  GT segments. TP/FP/FN are summed over videos before precision/recall/F1.
* Edit = ``(1 - lev(P, Y) / max(|P|, |Y|)) * 100`` on the segment label sequences, averaged over videos.
* Empty ground truth after dropping background (MS-TCN raises or divides by zero there), defined as:
  segmental F1 - every predicted segment is an FP, no FN; Edit - 100 if the prediction has no segment
  either, else 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.labels import as_label_lists

DEFAULT_OVERLAPS = (0.1, 0.25, 0.5)


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
    p, g, _, bg = as_label_lists(preds, gts, bg_classes=bg_classes)
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
    p, g, _, bg = as_label_lists(preds_list, gts_list, bg_classes=bg_classes)
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
    p, g, names, bg = as_label_lists(preds_list, gts_list, videos, bg_classes)
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

"""Action-triplet recognition mAPs (I, V, T, IV, IT, IVT) of CholecT50 / CholecT45, as CAMMA's `ivtmetrics`.

Equal to `ivtmetrics.Recognition` fed one video at a time (`update` then `video_end`) and read with
`compute_video_AP(component, ignore_null)`:

* a component's labels and scores per frame are the **max** over the triplets that share that component id
  (CholecT50's triplet table, `data/datasets/cholect50_vocab.py`); its classes are the ids the table uses,
  in increasing order (6 I, 10 V, 15 T, 26 IV, 59 IT, 100 IVT);
* per video, the AP of each class (scikit-learn's ``average_precision_score``: no interpolation, tied scores
  one threshold); a class with no positive frame in that video has no AP (NaN);
* per class, the mean of its APs over the videos that have it; a class absent from every video is left out;
* mAP = the mean over the classes left; with ``ignore_null`` the IVT mean leaves out the six
  ``<instrument, null_verb, null_target>`` triplets (94-99), as ivtmetrics does (IVT only).

ivtmetrics finds "no positive" by the ``-0.0`` that scikit-learn's AP used to return for such a class.
Releases that clip that AP to ``+0.0`` (1.9.1 for one) make ivtmetrics score an absent class 0 instead, which
pulls every mAP down; ``absent="zero"`` reproduces that, the default ``"ignore"`` is the convention
ivtmetrics states.

Scores are any real numbers (probabilities or logits: AP reads their order only); results in percent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plstitch_eval.data.datasets.cholect50_vocab import COMPONENT_COLUMNS, NULL_TRIPLETS, TRIPLET_MAP
from plstitch_eval.errors import EvaluationError

COMPONENTS = ("i", "v", "t", "iv", "it", "ivt")
N_TRIPLETS = len(TRIPLET_MAP)
ABSENT = ("ignore", "zero")  # a class without positives in a video: left out of its mean, or scored 0


def component_classes(component: str) -> list[int]:
    """The component ids a component's columns stand for, in column order (those CholecT50's table uses)."""
    return sorted({row[_column(component)] for row in TRIPLET_MAP})


def component_values(x: np.ndarray, component: str) -> np.ndarray:
    """Triplet labels or scores [F, 100] -> the component's [F, n]: per class, the max over its triplets."""
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != N_TRIPLETS:
        raise EvaluationError(f"triplet arrays must be [frames, {N_TRIPLETS}], got shape {x.shape}")
    if component == "ivt":
        return x
    ids = np.array([row[_column(component)] for row in TRIPLET_MAP])
    classes = component_classes(component)
    out = np.empty((x.shape[0], len(classes)), dtype=x.dtype)
    for j, cls in enumerate(classes):
        out[:, j] = x[:, ids == cls].max(axis=1) if x.shape[0] else 0
    return out


def video_aps(scores: np.ndarray, labels: np.ndarray, absent: str = "ignore") -> np.ndarray:
    """AP (percent) of each column of one video's [F, C] scores and 0/1 labels; where a column has no
    positive, NaN (``absent="ignore"``) or 0 (``"zero"``).

    scikit-learn's ``average_precision_score`` per column (sum over distinct score thresholds, highest first,
    of the recall gained times the precision there; tied scores form one threshold), for all columns at once:
    one scikit-learn call per class and video costs about a millisecond, thousands of them per test fold.
    """
    if absent not in ABSENT:
        raise EvaluationError(f"absent must be one of {', '.join(ABSENT)}, got {absent!r}")
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    n_pos = labels.sum(axis=0)
    out = np.full(labels.shape[1], np.nan if absent == "ignore" else 0.0)
    if not labels.shape[0]:
        return out
    order = np.argsort(-scores, axis=0, kind="mergesort")
    ranked = np.take_along_axis(scores, order, axis=0)
    tps = np.cumsum(np.take_along_axis(labels, order, axis=0), axis=0)
    threshold = np.ones_like(ranked, dtype=bool)  # the last frame of each run of tied scores
    threshold[:-1] = ranked[:-1] != ranked[1:]
    at = np.where(threshold, tps, 0.0)
    before = np.maximum.accumulate(np.vstack([np.zeros((1, at.shape[1])), at[:-1]]), axis=0)
    precision = tps / np.arange(1, len(tps) + 1)[:, None]
    gained = np.where(threshold, tps - before, 0.0)
    has = n_pos > 0
    out[has] = (gained * precision).sum(axis=0)[has] / n_pos[has] * 100.0
    return out


def triplet_aps(
    scores: Sequence[np.ndarray],
    labels: Sequence[np.ndarray],
    component: str = "ivt",
    videos: Sequence[str] | None = None,
    absent: str = "ignore",
) -> np.ndarray:
    """Per-class AP (percent) of `component` over videos: each class's mean AP over the videos with a positive
    of it (NaN for a class no video has). `scores` and `labels`: one [F, 100] array per video."""
    return defined_means(_per_video(scores, labels, component, videos, absent))


def defined_means(values: np.ndarray) -> np.ndarray:
    """Column means of [rows, columns] over the rows where a column is defined (not NaN); NaN for a column
    defined in no row (ivtmetrics' mean over the videos that have a class)."""
    defined = ~np.isnan(values)
    n = defined.sum(axis=0)
    total = np.where(defined, values, 0.0).sum(axis=0)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def triplet_maps(
    scores: Sequence[np.ndarray],
    labels: Sequence[np.ndarray],
    videos: Sequence[str] | None = None,
    ignore_null: bool = False,
    absent: str = "ignore",
) -> dict[str, float]:
    """``{"mAP_i", "mAP_v", "mAP_t", "mAP_iv", "mAP_it", "mAP_ivt"}`` in percent (NaN where no class has a
    positive in any video). `ignore_null` leaves triplets 94-99 out of ``mAP_ivt``, as ivtmetrics does."""
    out = {}
    for component in COMPONENTS:
        aps = triplet_aps(scores, labels, component, videos, absent)
        if ignore_null and component == "ivt":
            aps = np.delete(aps, list(NULL_TRIPLETS))
        out[f"mAP_{component}"] = float(np.mean(aps[~np.isnan(aps)])) if (~np.isnan(aps)).any() else np.nan
    return out


def _column(component: str) -> int:
    if component not in COMPONENT_COLUMNS:
        raise EvaluationError(f"unknown triplet component {component!r}; use one of {', '.join(COMPONENTS)}")
    return COMPONENT_COLUMNS[component]


def _per_video(
    scores: Sequence[np.ndarray],
    labels: Sequence[np.ndarray],
    component: str,
    videos: Sequence[str] | None,
    absent: str,
) -> np.ndarray:
    """[V, n] AP per video and class of `component` (NaN where the video has no positive of the class)."""
    names = list(videos) if videos is not None else [f"#{i}" for i in range(len(labels))]
    if not (len(scores) == len(labels) == len(names)) or not names:
        raise EvaluationError(
            f"{len(scores)} score arrays, {len(labels)} label arrays and {len(names)} video names; "
            "pass one of each per video (at least one video)."
        )
    rows = []
    for name, s, y in zip(names, scores, labels, strict=True):
        s, y = np.asarray(s, dtype=np.float64), np.asarray(y)
        if s.shape != y.shape or s.ndim != 2 or s.shape[1] != N_TRIPLETS:
            raise EvaluationError(
                f"Video {name!r}: scores {s.shape} and labels {y.shape} must both be [frames, {N_TRIPLETS}]"
            )
        if not np.isin(y, (0, 1)).all():
            raise EvaluationError(
                f"Video {name!r}: triplet labels must be 0/1; drop unlabelled frames (-1) before scoring"
            )
        y = component_values(y.astype(np.int64), component)
        rows.append(video_aps(component_values(s, component), y, absent))
    return np.stack(rows)

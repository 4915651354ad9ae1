"""Metrics of phase recognition and action segmentation, one job per module (numpy, scores in percent).

- `labels.py`: per-video label arrays checked and made comparable (string labels mapped to ids);
- `frames.py`: accuracy and macro precision / recall / F1 / Jaccard, pooled and per-video conventions;
- `segments.py`: segmental F1@k and Edit as MS-TCN's ``eval.py``;
- `relaxed.py`: the relaxed-boundary block of the Cholec80 / M2CAI16 challenge script, its bugs fixed;
- `clustering.py`: ARI / NMI of k-means clusters of features;
- `triplets.py`: action-triplet mAPs (I, V, T, IV, IT, IVT) as CAMMA's ivtmetrics computes them;
- `cvs.py`: critical view of safety (AP / mAP, Brier, F1, balanced accuracy) as SurgLatentGraph's CVSMetric;
- `skill.py`: per-video skill scores (Spearman's rho, MAE), LOSO / LOUO folds and their reference rows;
- `scoring.py`: what a dataset is scored with (headline metrics per family, background ids, frame +
  segment metrics per video, where the relaxed block sits in a results dict).

Conventions: REFERENCE.md section 5, docs/metrics.md. The frame, segment and clustering metrics import from
here (`plstitch_eval.metrics`, the path the README and docs name).
"""

from plstitch_eval.metrics.clustering import clustering_scores
from plstitch_eval.metrics.frames import (
    confusion_matrices,
    frame_accuracy,
    frame_metrics,
    macro_f1,
    macro_jaccard,
    macro_precision,
    macro_recall,
    macro_scores,
)
from plstitch_eval.metrics.segments import (
    DEFAULT_OVERLAPS,
    edit_score,
    edit_scores,
    segment_counts,
    segment_counts_multi,
    segment_metrics,
    segmental_f1,
)

__all__ = [
    "DEFAULT_OVERLAPS",
    "clustering_scores",
    "confusion_matrices",
    "edit_score",
    "edit_scores",
    "frame_accuracy",
    "frame_metrics",
    "macro_f1",
    "macro_jaccard",
    "macro_precision",
    "macro_recall",
    "macro_scores",
    "segment_counts",
    "segment_counts_multi",
    "segment_metrics",
    "segmental_f1",
]

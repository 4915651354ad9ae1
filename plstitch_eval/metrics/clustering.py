"""How well features cluster by label: ARI and NMI of k-means clusters (the t-SNE figures' scores)."""

from __future__ import annotations

import numpy as np

from plstitch_eval.errors import EvaluationError


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

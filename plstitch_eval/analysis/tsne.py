"""t-SNE of frame features coloured by phase, one panel per perplexity, with k-means ARI/NMI in the titles.

ARI and NMI (percent) compare k-means clusters of the *features* (k = number of classes present in the sample,
labelled frames only) with the labels; they do not depend on the t-SNE perplexity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from plstitch_eval.analysis.style import UNLABELLED, class_colors, new_figure, write_outputs
from plstitch_eval.errors import ConfigError
from plstitch_eval.metrics.clustering import clustering_scores
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.utils.console import logger


@dataclass
class TsneConfig:
    """Settings of `plstitch analyze tsne`."""

    features: str
    perplexities: list[float] = field(default_factory=lambda: [30.0])
    split: str = "test"
    max_points: int = 5000
    seed: int = 0
    threads: int = 0
    out: Path = Path("figs")
    name: str = "tsne"


def load_points(store_path: str | Path, split: str) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """Frames of a split ("all" = every video): features [N, D], labels [N], video per row, class names."""
    store = FeatureStore(store_path)
    items = store.read_many(store.videos()) if split == "all" else store.read_split(split)
    if not items:
        raise ConfigError(f"{store_path}: split {split!r} holds no videos.")
    feats = np.concatenate([v.features for v in items]).astype(np.float32)
    labels = np.concatenate([v.labels for v in items]).astype(np.int64)
    videos = [v.video for v in items for _ in range(len(v.labels))]
    return feats, labels, videos, store.class_names


def subsample(n: int, max_points: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded uniform sample of `max_points` of `n` rows (all rows if fewer)."""
    if max_points <= 0 or n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))


def embed(features: np.ndarray, perplexity: float, seed: int) -> np.ndarray:
    """2-D t-SNE embedding (scikit-learn, PCA init, automatic learning rate, fixed seed)."""
    # lazy: scikit-learn costs seconds to import (python -X importtime); only the embedding needs it
    from sklearn.manifold import TSNE

    if perplexity >= len(features):
        raise ConfigError(
            f"--perplexity {perplexity} must be smaller than the number of points ({len(features)}); "
            "lower it or raise --max-points."
        )
    tsne = TSNE(n_components=2, perplexity=perplexity, init="pca", learning_rate="auto", random_state=seed)
    return tsne.fit_transform(np.asarray(features, dtype=np.float32)).astype(np.float64)


def plot_tsne(
    embeddings: dict[float, np.ndarray],
    labels: np.ndarray,
    class_names: list[str],
    scores: dict[str, float],
    title: str,
):
    """One scatter panel per perplexity, one colour per class, a shared legend with the class names."""
    n = len(embeddings)
    legend_in = max(1.6, 0.6 + 0.07 * max((len(c) for c in class_names), default=0))  # room for long names
    fig = new_figure(4.0 * n + 0.2 + legend_in, 4.3)
    colors = class_colors(max(len(class_names), int(labels.max(initial=-1)) + 1))
    handles = {}
    for i, (perplexity, xy) in enumerate(embeddings.items()):
        ax = fig.add_subplot(1, n, i + 1)
        for cls in sorted(set(labels.tolist())):
            sel = labels == cls
            name = (
                class_names[cls] if 0 <= cls < len(class_names) else ("unlabelled" if cls < 0 else str(cls))
            )
            color = UNLABELLED if cls < 0 else colors[cls]
            handles[name] = ax.scatter(xy[sel, 0], xy[sel, 1], s=6, color=color, alpha=0.8, linewidths=0)
        ax.set_title(f"perplexity {perplexity:g}\nk-means ARI {scores['ari']:.1f}  NMI {scores['nmi']:.1f}")
        ax.set_xlabel("t-SNE 1")
        ax.set_ylabel("t-SNE 2")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.legend(
        list(handles.values()), list(handles), loc="center right", title="class", markerscale=2, frameon=False
    )
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1 - legend_in / fig.get_figwidth(), 1))
    return fig


def run_tsne(config: TsneConfig) -> tuple[Path, Path, dict[str, Any]]:
    """Sample frames of a store split, cluster and embed them, draw and save the panels."""
    if not config.perplexities:
        raise ConfigError("Give at least one --perplexity.")
    feats, labels, videos, class_names = load_points(config.features, config.split)
    idx = subsample(len(feats), config.max_points, config.seed)
    feats, labels = feats[idx], labels[idx]
    # OpenMP spin-waiting makes Barnes-Hut t-SNE many times slower on busy machines; let the user cap threads
    with threadpool_limits(limits=config.threads or None):
        scores = clustering_scores(feats, labels, seed=config.seed)
        embeddings = {}
        for p in config.perplexities:
            logger.info("t-SNE of %d points, perplexity %g", len(feats), p)
            embeddings[float(p)] = embed(feats, p, config.seed)
    title = f"t-SNE of {Path(config.features).name} ({config.split}, {len(feats)} frames)"
    fig = plot_tsne(embeddings, labels, class_names, scores, title)
    data = {
        "analysis": "tsne",
        "features": str(config.features),
        "split": config.split,
        "seed": config.seed,
        "n_points": len(feats),
        "class_names": class_names,
        "clustering": {**scores, "k": int(len(np.unique(labels[labels >= 0]))), "unit": "percent"},
        "perplexities": [float(p) for p in config.perplexities],
        "points": {
            "video": [videos[i] for i in idx],
            "label": labels.tolist(),
            "embedding": {f"{p:g}": np.round(xy, 4).tolist() for p, xy in embeddings.items()},
        },
    }
    png, js = write_outputs(fig, data, config.out, config.name)
    return png, js, data

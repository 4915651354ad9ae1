"""`--train-fraction` draws the same subsets for every encoder: through every protocol taking it, a store of
another encoder (another model name and weights digest, other features of another width, the same videos and
labels) gets the subsets of the first, seed by seed. The copy is renamed so that a draw depending on the model
(its name seeding the draw, say) cannot pass by comparing a store with itself."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols import run_cv, run_knn, run_linear, run_tool_linear
from plstitch_eval.protocols.fractions import TrainFraction
from plstitch_eval.protocols.temporal import temporal_run
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.temporal.fit import TemporalConfig
from tests.eval.evaluate.conftest import make_store

from .stores import write_store

LINEAR = LinearConfig(lrs=(0.1,), weight_decays=(0.0,), epochs=2, batch_size=64, device="cpu")
TEMPORAL = TemporalConfig(stages=1, layers=2, channels=8, epochs=1)
FRACTION = TrainFraction(0.5, (0, 1, 2))
OTHER_MODEL = {"spec": "another-encoder-vitl", "provenance": {"sha256": "f" * 64}}

RUNS = {
    "knn": lambda s: run_knn(s, KnnConfig(k=5), train_fraction=FRACTION),
    "linear": lambda s: run_linear(s, LINEAR, train_fraction=FRACTION),
    "tools": lambda s: run_tool_linear(s, replace(LINEAR, balance_classes=True), train_fraction=FRACTION),
    "cv-knn": lambda s: run_cv(s, folds=3, knn_config=KnnConfig(k=5), train_fraction=FRACTION),
    "temporal": lambda s: temporal_run(s, TEMPORAL, train_fraction=FRACTION, progress=False).results,
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Per kind of store (phases; phases and tools): one encoder's store and another encoder's."""
    tmp = tmp_path_factory.mktemp("fraction-models")
    phases = make_store(tmp / "phases", n_videos=16, with_val=False, seed=1)
    tools = write_store(tmp / "tools")
    return {
        "phases": (phases.root, _other_encoder(phases, tmp / "phases-other").root),
        "tools": (tools.root, _other_encoder(tools, tmp / "tools-other").root),
    }


def _other_encoder(store: FeatureStore, root: Path) -> FeatureStore:
    """The same videos, labels and tools as `store`, as another encoder saw them: the manifest names
    OTHER_MODEL, the features are a random projection to another width plus noise."""
    other = FeatureStore.create(root, {**store.manifest, "model": OTHER_MODEL})
    rng = np.random.default_rng(7)
    width = store.read(store.videos()[0]).features.shape[1]
    projection = rng.normal(size=(width, width + 8))
    for video in store.videos():
        item = store.read(video)
        features = item.features @ projection + rng.normal(scale=1.0, size=(len(item.features), width + 8))
        other.write(
            VideoFeatures(video, features.astype(np.float32), item.labels, item.frame_times, item.tools)
        )
    return other


def _subsets(results: dict[str, Any]) -> list[tuple[int, list[list[str]]]]:
    """Each seed with the training videos it drew (one list per fold for CV)."""
    drawn = []
    for subset in results["train_fraction"]["subsets"]:
        folds = subset.get("folds") or [subset]
        drawn.append((subset["seed"], [fold["videos"] for fold in folds]))
    return drawn


@pytest.mark.parametrize("protocol", list(RUNS))
def test_another_encoder_gets_the_same_subsets(protocol: str, stores: dict[str, tuple[Path, Path]]) -> None:
    first, other = stores["tools" if protocol == "tools" else "phases"]
    assert FeatureStore(other).manifest["model"] != FeatureStore(first).manifest["model"]
    mine = _subsets(RUNS[protocol](first))
    assert [seed for seed, _ in mine] == list(FRACTION.seeds)
    assert len({str(videos) for _, videos in mine}) > 1  # the seeds draw different subsets
    assert _subsets(RUNS[protocol](other)) == mine

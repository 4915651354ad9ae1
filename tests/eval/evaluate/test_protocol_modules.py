"""protocols.py was cut into splits, metrics/scoring, results_json and protocols/prediction_files; the names
still import from `plstitch_eval.protocols`."""

from __future__ import annotations

from plstitch_eval import protocols, results_json, splits
from plstitch_eval.metrics import scoring
from plstitch_eval.protocols import prediction_files


def test_protocols_reexports_the_moved_names() -> None:
    homes = {
        splits: ("resolve_splits", "holdout_by_video", "kfold_by_video"),
        scoring: ("default_metrics", "background_ids", "score_videos", "with_relaxed", "COOKING_METRICS"),
        results_json: ("SCHEMA", "build_results", "write_results"),
        prediction_files: ("score_files", "read_label_file", "read_mapping", "video_key", "MSTCN_HEADER"),
    }
    for module, names in homes.items():
        for name in names:
            assert getattr(protocols, name) is getattr(module, name), name
            assert name in protocols.__all__


def test_schema_and_headline_metrics_of_a_built_result() -> None:
    import numpy as np

    scored = scoring.score_videos({"v": np.array([0, 0, 1])}, {"v": np.array([0, 1, 1])}, 2)
    manifest = {"dataset": "gtea", "model": {"spec": "x", "provenance": {}}}
    built = results_json.build_results("knn", manifest, None, {}, {"test": ["v"]}, ["a", "b"], scored, {})
    assert built["schema"] == results_json.SCHEMA == "plstitch.results/v1"
    assert built["headline_metrics"] == list(scoring.COOKING_METRICS)
    assert abs(built["metrics"]["accuracy"] - 100 * 2 / 3) < 1e-9

import json

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from typer.testing import CliRunner

from plstitch_eval.analysis.tsne import subsample
from plstitch_eval.cli import app
from plstitch_eval.store.features import FeatureStore
from tests.eval.analysis.conftest import CLASS_NAMES, check_png

runner = CliRunner()


def test_subsample_is_seeded_and_bounded():
    a, b = subsample(100, 10, 3), subsample(100, 10, 3)
    np.testing.assert_array_equal(a, b)
    assert len(a) == 10 and len(set(a.tolist())) == 10 and np.all(np.diff(a) > 0)
    np.testing.assert_array_equal(subsample(5, 10, 0), np.arange(5))


def test_tsne_cli_two_perplexities(tmp_path, store_dir):
    args = ["analyze", "tsne", "--features", str(store_dir), "--perplexity", "5", "--perplexity", "15"]
    args += ["--split", "test", "--max-points", "40", "--threads", "1", "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = (
        result.stdout.strip().splitlines()
    )  # stdout: one summary line and the two paths, logs go to stderr
    assert (
        len(lines) == 3
        and "ARI" in lines[0]
        and lines[1].endswith("tsne.png")
        and lines[2].endswith("tsne.json")
    )
    check_png(tmp_path / "tsne.png", 4.0 * 2 + 1.8, 4.3)
    data = json.loads((tmp_path / "tsne.json").read_text())
    assert (
        data["class_names"] == CLASS_NAMES and data["n_points"] == 40 and data["perplexities"] == [5.0, 15.0]
    )
    assert set(data["points"]["embedding"]) == {"5", "15"}
    assert np.asarray(data["points"]["embedding"]["15"]).shape == (40, 2)
    # ARI / NMI recomputed from the same sample with scikit-learn directly
    store = FeatureStore(store_dir)
    items = store.read_split("test")
    feats = np.concatenate([v.features for v in items])
    labels = np.concatenate([v.labels for v in items])
    idx = subsample(len(feats), 40, 0)
    assert data["points"]["label"] == labels[idx].tolist()
    clusters = KMeans(n_clusters=3, n_init=10, random_state=0).fit_predict(feats[idx])
    assert abs(data["clustering"]["ari"] - 100 * adjusted_rand_score(labels[idx], clusters)) < 1e-6
    assert abs(data["clustering"]["nmi"] - 100 * normalized_mutual_info_score(labels[idx], clusters)) < 1e-6
    assert data["clustering"]["ari"] > 50  # well separated toy classes


def test_tsne_rejects_too_high_perplexity(tmp_path, store_dir):
    args = ["analyze", "tsne", "--features", str(store_dir), "--perplexity", "50", "--max-points", "20"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 1 and "perplexity" in result.output
    assert not (tmp_path / "tsne.png").exists()

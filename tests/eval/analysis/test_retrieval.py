import json

import numpy as np
from typer.testing import CliRunner

from plstitch_eval.analysis.retrieval import nearest_frames, parse_query
from plstitch_eval.cli import app
from plstitch_eval.store.features import FeatureStore
from tests.eval.analysis.conftest import CLASS_NAMES, check_png

runner = CliRunner()


def test_parse_query():
    assert parse_query("video41:120") == ("video41", 120.0)
    assert parse_query("a:b:2.5") == ("a:b", 2.5)


def test_nearest_frames_match_brute_force():
    rng = np.random.default_rng(0)
    bank = {"a": rng.normal(size=(9, 5)), "b": rng.normal(size=(4, 5)), "c": rng.normal(size=(0, 5))}
    q = rng.normal(size=5)
    rows = [
        (v, i, float(f @ q / np.linalg.norm(f) / np.linalg.norm(q)))
        for v, fs in bank.items()
        for i, f in enumerate(fs)
    ]
    rows.sort(key=lambda r: -r[2])
    got = nearest_frames(q, bank, 5)
    assert [(v, i) for v, i, _ in got] == [(v, i) for v, i, _ in rows[:5]]
    np.testing.assert_allclose([s for *_, s in got], [s for *_, s in rows[:5]])
    distinct = nearest_frames(q, bank, 5, distinct_videos=True)
    assert len(distinct) == 2 and {v for v, *_ in distinct} == {"a", "b"}


def test_retrieval_cli_metadata_tiles(tmp_path, store_dir):
    args = ["analyze", "retrieval", "--features", str(store_dir), "--query", "video41:10.2", "--top", "4"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "precision@4" in result.stdout
    check_png(tmp_path / "retrieval.png", 2.4 * 5, 3.0)
    data = json.loads((tmp_path / "retrieval.json").read_text())
    store = FeatureStore(store_dir)
    q = store.read("video41")
    assert data["query"]["index"] == 10 and data["query"]["time"] == 10.0
    assert data["query"]["class_name"] == CLASS_NAMES[q.labels[10]]
    # brute force over the other videos
    qf = q.features[10] / np.linalg.norm(q.features[10])
    rows = []
    for v in store.videos():
        if v == "video41":
            continue
        item = store.read(v)
        for i, f in enumerate(item.features):
            rows.append((float(f @ qf / np.linalg.norm(f)), v, i, int(item.labels[i])))
    rows.sort(key=lambda r: -r[0])
    assert [(n["video"], n["index"]) for n in data["neighbours"]] == [(v, i) for _, v, i, _ in rows[:4]]
    for nb, (sim, _, _, label) in zip(data["neighbours"], rows[:4], strict=True):
        assert abs(nb["similarity"] - sim) < 1e-6
        assert nb["correct"] == (label == q.labels[10])
    assert data["precision_at_k"] == np.mean([nb["correct"] for nb in data["neighbours"]])


def test_retrieval_cli_with_frames(tmp_path, video_root):
    from plstitch_eval.store.features import VideoFeatures

    rng = np.random.default_rng(0)
    store = FeatureStore.create(
        tmp_path / "s", {"dataset": "cholec80", "class_names": ["p0", "p1"], "splits": {}}
    )
    for v in ("video01", "video02", "video03"):
        store.write(
            VideoFeatures(v, rng.normal(size=(8, 4)).astype(np.float32), np.arange(8) % 2, np.arange(8) * 1.0)
        )
    args = ["analyze", "retrieval", "--features", str(store.root), "--query", "video02:3", "--top", "2"]
    args += ["--dataset", "cholec80", "--root", str(video_root), "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    check_png(tmp_path / "retrieval.png", 2.4 * 3, 3.6)
    data = json.loads((tmp_path / "retrieval.json").read_text())
    assert all(nb["video"] != "video02" for nb in data["neighbours"])


def test_retrieval_unknown_video(tmp_path, store_dir):
    result = runner.invoke(app, ["analyze", "retrieval", "--features", str(store_dir), "--query", "nope:1"])
    assert result.exit_code == 1 and "nope" in result.output

import json

import numpy as np
from typer.testing import CliRunner

from plstitch_eval.analysis.timeline import resolve_videos, segments
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.store.features import FeatureStore
from tests.eval.analysis.conftest import CLASS_NAMES, check_png

runner = CliRunner()


def test_segments_match_loop():
    labels = np.array([0, 0, 1, 1, 1, 0, 2, 2])
    runs, start = [], 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            runs.append((start, i, int(labels[start])))
            start = i
    assert segments(labels) == runs == [(0, 2, 0), (2, 5, 1), (5, 6, 0), (6, 8, 2)]
    assert segments(np.array([], dtype=int)) == []


def test_resolve_videos():
    names = ["video41", "video42", "video141"]
    assert resolve_videos(["41", "video42"], names, 4) == ["video41", "video42"]
    assert resolve_videos(None, names, 2) == ["video41", "video42"]
    try:
        resolve_videos(["7"], names, 4)
        raise AssertionError("expected ConfigError")
    except ConfigError as exc:
        assert "'7'" in str(exc)


def test_timeline_cli(tmp_path, store_dir):
    store = FeatureStore(store_dir)
    rng = np.random.default_rng(0)
    preds = {}
    for v in ("video41", "video42"):
        gt = store.read(v).labels
        p = gt.copy()
        flip = rng.choice(len(p), size=5, replace=False)
        p[flip] = (p[flip] + 1) % 3
        preds[v] = p.tolist()
    results = {"schema": "plstitch.results/v1", "task": "knn", "dataset": "toy", "class_names": CLASS_NAMES}
    (tmp_path / "res.json").write_text(json.dumps({**results, "predictions": preds}))
    args = ["analyze", "timeline", "--features", str(store_dir), "--pred", str(tmp_path / "res.json")]
    result = runner.invoke(app, [*args, "--videos", "41,42", "--out", str(tmp_path / "figs")])
    assert result.exit_code == 0, result.output
    # issue 44: it says what it wrote, as every analyze command (a summary line, then one line per file)
    accuracy, *wrote = result.stdout.strip().splitlines()
    assert accuracy.startswith("accuracy: video41 ") and ", video42 " in accuracy
    assert wrote == [
        f"wrote {tmp_path / 'figs' / 'timeline.png'}",
        f"wrote {tmp_path / 'figs' / 'timeline.json'}",
    ]
    check_png(tmp_path / "figs" / "timeline.png", 9.0, 1.25 * 2 + 1.2)
    data = json.loads((tmp_path / "figs" / "timeline.json").read_text())
    assert data["videos"] == ["video41", "video42"] and data["class_names"] == CLASS_NAMES
    for v, p in preds.items():
        gt = store.read(v).labels
        assert abs(data["per_video"][v]["accuracy"] - 100 * np.mean(np.array(p) == gt)) < 1e-9
        assert data["per_video"][v]["gt_segments"][0] == [0, int(np.argmax(gt != 0)), 0]
        assert data["per_video"][v]["n_frames"] == len(gt)
    # deterministic: the same inputs give byte-identical PNG and JSON
    png_bytes = (tmp_path / "figs" / "timeline.png").read_bytes()
    json_text = (tmp_path / "figs" / "timeline.json").read_text()
    again = runner.invoke(app, [*args, "--videos", "41,42", "--out", str(tmp_path / "figs2")])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "figs2" / "timeline.png").read_bytes() == png_bytes
    assert (tmp_path / "figs2" / "timeline.json").read_text() == json_text


def test_timeline_length_mismatch_names_video(tmp_path, store_dir):
    (tmp_path / "res.json").write_text(json.dumps({"predictions": {"video41": [0, 1]}}))
    args = ["analyze", "timeline", "--features", str(store_dir), "--pred", str(tmp_path / "res.json")]
    result = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 1 and "video41" in result.output and "2 predictions" in result.output

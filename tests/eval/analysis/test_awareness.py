import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.analysis.awareness import cosine_distances, parse_pair, render_awareness, summarize
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from tests.eval.analysis.conftest import check_png

runner = CliRunner()


def test_cosine_distances_match_loop():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(20, 7)), rng.normal(size=(20, 7))
    expected = [1 - np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)) for x, y in zip(a, b, strict=True)]
    np.testing.assert_allclose(cosine_distances(a, b), expected, rtol=1e-12)
    np.testing.assert_allclose(cosine_distances(a, 3 * a), 0, atol=1e-12)
    np.testing.assert_allclose(cosine_distances(a, -a), 2, atol=1e-12)


def test_summarize_and_render(tmp_path):
    d = np.linspace(0, 1, 101)
    s = summarize(d)
    assert s["n"] == 101
    np.testing.assert_allclose([s["mean"], s["median"], s["quantiles"]["q25"]], [0.5, 0.5, 0.25], atol=1e-12)
    np.testing.assert_allclose(s["std"], np.sqrt(np.mean((d - 0.5) ** 2)), rtol=1e-12)
    png, js, stats = render_awareness({"a": d, "b": d / 2}, tmp_path, "aw", {"dataset": "toy"})
    check_png(png, 4.8, 4.0)
    data = json.loads(js.read_text())
    assert abs(data["stats"]["b"]["mean"] - 0.25) < 1e-12 and len(data["distances"]["a"]) == 101


def test_parse_pair():
    p = parse_pair("pl=runs/f,hf-hub:org/name")
    assert (p.name, p.forward, p.backward) == ("pl", "runs/f", "hf-hub:org/name")
    try:
        parse_pair("pl=runs/f")
        raise AssertionError("expected ConfigError")
    except ConfigError as exc:
        assert "NAME=FORWARD,BACKWARD" in str(exc)


def test_awareness_cli(tmp_path, vit_dirs, video_root):
    fwd, bwd = map(str, vit_dirs)
    args = ["analyze", "awareness", "--forward", fwd, "--backward", bwd, "--label", "tiny"]
    args += ["--pair", "same", fwd, fwd, "--pair", f"swap={bwd},{fwd}"]
    args += ["--dataset", "cholec80", "--root", str(video_root), "--split", "all", "--max-frames", "0"]
    args += ["--device", "cpu", "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "cosine distance" in result.stdout
    check_png(tmp_path / "awareness.png", 1.4 * 3 + 2, 4.0)
    data = json.loads((tmp_path / "awareness.json").read_text())
    assert set(data["stats"]) == {"tiny", "same", "swap"}
    assert data["videos"] == ["video01", "video02", "video03"]
    # independent recomputation: decode at 1 fps, each encoder's transform, CLS features, textbook cosine
    from plstitch_eval.data.datasets import decode, get_dataset
    from plstitch_eval.hub import load_encoder

    encoders = [load_encoder(fwd), load_encoder(bwd)]
    expected = []
    for record in get_dataset("cholec80", root=video_root).videos("all"):
        images = [f.image for f in decode(record, fps=1.0)]
        with torch.no_grad():
            a, b = (e(torch.stack([e.transform(im) for im in images])).numpy() for e in encoders)
        expected += [1 - x @ y / np.linalg.norm(x) / np.linalg.norm(y) for x, y in zip(a, b, strict=True)]
    assert data["stats"]["tiny"]["n"] == len(expected) >= 24
    np.testing.assert_allclose(data["distances"]["tiny"], expected, atol=1e-5)
    for key in ("mean", "median", "std", "quantiles"):
        assert key in data["stats"]["tiny"]
    np.testing.assert_allclose(data["distances"]["same"], 0, atol=1e-5)  # one encoder against itself
    np.testing.assert_allclose(data["distances"]["swap"], data["distances"]["tiny"], atol=1e-6)  # symmetric
    assert data["stats"]["tiny"]["mean"] > 1e-3


def control_store(root, feats: dict[str, np.ndarray], times: dict[str, np.ndarray] | None = None):
    from plstitch_eval.features import FeatureStore, VideoFeatures

    manifest = {
        "dataset": "toy",
        "class_names": ["a"],
        "splits": {"train": [], "test": list(feats)},
        "model": {"spec": str(root), "provenance": {}},
        "fps": 1.0,
    }
    store = FeatureStore.create(root, manifest)
    for video, x in feats.items():
        t = np.arange(len(x), dtype=np.float64) if times is None else times[video]
        store.write(VideoFeatures(video, x.astype(np.float32), np.zeros(len(x), np.int64), t))
    return root


def test_control_distances_and_summary():
    from plstitch_eval.analysis.awareness import GROUPS, control_distances, control_summary

    rng = np.random.default_rng(2)
    f = {f"F{i}": rng.normal(size=(15, 4)) for i in (1, 2, 3)}
    r = {f"R{i}": rng.normal(size=(15, 4)) for i in (1, 2)}
    groups = control_distances(f, r)
    assert list(groups) == list(GROUPS)
    assert list(groups["forward vs reversed"]) == [
        "F1 vs R1",
        "F1 vs R2",
        "F2 vs R1",
        "F2 vs R2",
        "F3 vs R1",
        "F3 vs R2",
    ]
    assert list(groups["forward vs forward"]) == ["F1 vs F2", "F1 vs F3", "F2 vs F3"]
    assert list(groups["reversed vs reversed"]) == ["R1 vs R2"]
    np.testing.assert_allclose(groups["forward vs forward"]["F1 vs F3"], cosine_distances(f["F1"], f["F3"]))
    s = control_summary(groups)
    cross = np.concatenate(list(groups["forward vs reversed"].values()))
    same = np.concatenate([*groups["forward vs forward"].values(), *groups["reversed vs reversed"].values()])
    assert s["contrast"] == pytest.approx(cross.mean() - same.mean(), abs=1e-12)
    assert s["stats"]["reversed vs reversed"]["n"] == 15 and s["stats"]["forward vs reversed"]["n"] == 90
    assert s["pair_means"]["forward vs reversed"]["F2 vs R1"] == pytest.approx(
        cosine_distances(f["F2"], r["R1"]).mean()
    )
    twins = control_summary(groups, matched={"F1": "R1", "F2": "R2"})["cross_split"]
    same_seed = np.concatenate([cosine_distances(f["F1"], r["R1"]), cosine_distances(f["F2"], r["R2"])])
    assert twins["direction only (same seed)"]["mean"] == pytest.approx(same_seed.mean(), abs=1e-12)
    assert twins["direction only (same seed)"]["n"] == 30 and twins["direction and seed"]["n"] == 60
    with pytest.raises(ConfigError, match="F3 vs R3"):
        control_summary(groups, matched={"F3": "R3"})
    with pytest.raises(ConfigError, match="two forward or two reversed"):
        control_distances({"F1": f["F1"]}, {"R1": r["R1"]})
    with pytest.raises(ConfigError, match="both forward and reversed"):
        control_distances(f, {"F1": r["R1"]})


def test_run_awareness_controls_from_stores(tmp_path):
    from plstitch_eval.analysis.awareness import run_awareness_controls
    from plstitch_eval.errors import FeatureStoreError

    rng = np.random.default_rng(3)
    base = {"v1": rng.normal(size=(12, 5)), "v2": rng.normal(size=(9, 5))}
    stores = {
        name: control_store(tmp_path / name, {v: x + rng.normal(size=x.shape) * s for v, x in base.items()})
        for name, s in (("F1", 0.1), ("F2", 0.1), ("R1", 1.0), ("R2", 1.0))
    }
    png, js, summary = run_awareness_controls(
        {"F1": stores["F1"], "F2": stores["F2"]}, {"R1": stores["R1"], "R2": stores["R2"]}, tmp_path / "out"
    )
    check_png(png, 1.4 * 3 + 2, 4.0)
    data = json.loads(js.read_text())
    assert data["analysis"] == "awareness_controls" and data["figure"] == "awareness_controls.png"
    assert data["contrast_definition"] == "forward-vs-reversed minus mean same-direction distance"
    assert set(data["stats"]) == {"forward vs reversed", "forward vs forward", "reversed vs reversed"}
    assert data["stats"]["forward vs forward"]["n"] == 21
    assert data["contrast"] == pytest.approx(summary["contrast"])
    f1 = np.concatenate([read_features(stores["F1"], v) for v in ("v1", "v2")])
    r2 = np.concatenate([read_features(stores["R2"], v) for v in ("v1", "v2")])
    assert data["pair_means"]["forward vs reversed"]["F1 vs R2"] == pytest.approx(
        cosine_distances(f1, r2).mean(), abs=1e-9
    )
    shifted = control_store(tmp_path / "bad", base, {"v1": np.arange(12) + 0.5, "v2": np.arange(9.0)})
    with pytest.raises(FeatureStoreError, match="different test frames"):
        run_awareness_controls({"F1": stores["F1"], "F2": shifted}, {"R1": stores["R1"]}, tmp_path / "out")


def read_features(root, video: str) -> np.ndarray:
    from plstitch_eval.features import FeatureStore

    return FeatureStore(root).read(video).features

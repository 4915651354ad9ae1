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
    from plstitch_eval.store.features import FeatureStore, VideoFeatures

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
    from plstitch_eval.store.features import FeatureStore

    return FeatureStore(root).read(video).features


def test_seed_contrasts_by_hand():
    from plstitch_eval.analysis.awareness import seed_contrasts

    pair_means = {
        "forward vs reversed": {
            "F1 vs R1": 0.5,
            "F1 vs R2": 0.6,  # other seed: neither twin nor control
            "F2 vs R1": 0.55,
            "F2 vs R2": 0.4,
            "F10 vs R1": 0.7,
            "F10 vs R2": 0.8,
        },
        "forward vs forward": {"F1 vs F2": 0.1, "F1 vs F10": 0.2, "F2 vs F10": 0.3},  # F10 is not F1
        "reversed vs reversed": {"R1 vs R2": 0.15},
    }
    out = seed_contrasts(pair_means, {"F1": "R1", "F2": "R2"})
    assert list(out) == ["F1", "F2"]
    # F1: twin 0.5, controls F1-F2 0.1, F1-F10 0.2, R1-R2 0.15 -> 0.15, contrast 0.35
    assert out["F1"] == pytest.approx({"twin": 0.5, "control": 0.15, "contrast": 0.35})
    # F2: twin 0.4, controls F1-F2 0.1, F2-F10 0.3, R1-R2 0.15 -> 0.55 / 3
    assert out["F2"] == pytest.approx({"twin": 0.4, "control": 0.55 / 3, "contrast": 0.4 - 0.55 / 3})
    # one forward run: the reversed-reversed pairs with its twin are the only control
    only_reversed = {
        "forward vs reversed": {"F1 vs R1": 0.3, "F1 vs R2": 0.9},
        "forward vs forward": {},
        "reversed vs reversed": {"R1 vs R2": 0.1},
    }
    assert seed_contrasts(only_reversed, {"F1": "R1"})["F1"] == pytest.approx(
        {"twin": 0.3, "control": 0.1, "contrast": 0.2}
    )
    with pytest.raises(ConfigError, match="'F3 vs R3'"):
        seed_contrasts(pair_means, {"F1": "R1", "F3": "R3"})
    no_controls = {**only_reversed, "reversed vs reversed": {"R2 vs R3": 0.1}}
    with pytest.raises(ConfigError, match="no same-direction pair involves 'F1' or 'R1'"):
        seed_contrasts(no_controls, {"F1": "R1"})


def test_control_summary_adds_seed_contrasts():
    from plstitch_eval.analysis.awareness import control_distances, control_summary

    rng = np.random.default_rng(5)
    f = {f"F{i}": rng.normal(size=(11, 6)) for i in (1, 2, 3)}
    r = {f"R{i}": rng.normal(size=(11, 6)) for i in (1, 2)}
    groups = control_distances(f, r)
    assert "seed_contrasts" not in control_summary(groups)
    s = control_summary(groups, matched={"F1": "R1", "F2": "R2"})
    assert set(s) == {
        "stats",
        "pair_means",
        "same_direction_mean",
        "contrast",
        "contrast_definition",
        "cross_split",
        "seed_contrasts",
    }
    assert s["contrast"] == pytest.approx(control_summary(groups)["contrast"])

    def mean_distance(x, y):
        return float(np.mean(1 - (x * y).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1))))

    for fwd, rev, others in (("F1", "R1", ("F2", "F3")), ("F2", "R2", ("F1", "F3"))):
        other_rev = "R2" if rev == "R1" else "R1"
        twin = mean_distance(f[fwd], r[rev])
        controls = [mean_distance(f[fwd], f[o]) for o in others] + [mean_distance(r[rev], r[other_rev])]
        expected = {"twin": twin, "control": np.mean(controls), "contrast": twin - np.mean(controls)}
        assert s["seed_contrasts"][fwd] == pytest.approx(expected, abs=1e-12)
    # a matched run without any same-direction pair: no seed contrasts, the rest as before
    hand = {
        "forward vs reversed": {"F1 vs R1": cosine_distances(f["F1"], r["R1"])},
        "forward vs forward": {},
        "reversed vs reversed": {"R2 vs R3": cosine_distances(r["R2"], r["R1"])},
    }
    partial = control_summary(hand, matched={"F1": "R1"})
    assert "seed_contrasts" not in partial and "cross_split" in partial

import json

import numpy as np
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

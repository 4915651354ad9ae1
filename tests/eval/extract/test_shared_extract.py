"""Several encoders in one pass (`extract_many`): each video decoded once, each store byte for byte the
store a one-model run writes (centre crop, whole frame, raw pixels and a clip model in one pass), resumable
per model, also after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import (
    ExtractOptions,
    ExtractTarget,
    chunks,
    extract_features,
    extract_many,
    shared,
    store_name,
    store_targets,
)
from plstitch_eval.hub import load_encoder
from plstitch_eval.store.features import MANIFEST, FeatureStore
from tests.eval.extract.test_clip_extract import clip_models  # noqa: F401 - the fixture, used by name

FPS = 5.0
TIMING_FIELDS = ("created",)  # manifest fields a run's time sets


def _options(**kwargs) -> ExtractOptions:
    base = {"fps": FPS, "batch_size": 4, "num_workers": 0, "device": "cpu", "progress": False}
    return ExtractOptions(**{**base, **kwargs})


def _encoders(tiny_model_dir: Path, clip: bool = True) -> dict[str, object]:
    """Four preprocessing kinds: centre crop 32, the same net on the whole frame, raw pixels, a clip net."""
    encoders = {
        "crop": load_encoder(str(tiny_model_dir)),
        "whole": load_encoder(str(tiny_model_dir), transform="whole-frame"),
        "pixels": load_encoder("raw-pixels"),
    }
    if clip:
        encoders["clip"] = load_encoder("tiny-clip-videomae")
    return encoders


def _store_files(root: Path) -> dict[str, bytes]:
    """Every file of a store but the manifest and the lock folder."""
    return {
        p.name: p.read_bytes()
        for p in sorted(root.iterdir())
        if p.is_file() and p.name != MANIFEST and not p.name.startswith(".")
    }


def _manifest(root: Path) -> dict:
    data = json.loads((root / MANIFEST).read_text())
    return {k: v for k, v in data.items() if k not in TIMING_FIELDS}


def _assert_same_store(ours: Path, alone: Path) -> None:
    assert _store_files(ours) == _store_files(alone)
    assert _manifest(ours) == _manifest(alone)


@pytest.mark.usefixtures("clip_models")
@pytest.mark.parametrize("crop_black_margin", [False, True])
def test_each_store_equals_a_one_model_run(cholec_root, tiny_model_dir, tmp_path, crop_black_margin):
    encoders = _encoders(tiny_model_dir)
    options = _options(crop_black_margin=crop_black_margin)
    targets = [ExtractTarget(enc, tmp_path / "many" / name, name) for name, enc in encoders.items()]
    summary = extract_many("cholec80", targets, options, root=cholec_root)
    assert summary.ok and [s.store for s in summary.stores] == [t.out for t in targets]
    assert all(r.status == "done" for s in summary.stores for r in s.results)
    for name, encoder in encoders.items():
        alone = tmp_path / "alone" / name
        extract_features("cholec80", encoder, alone, options, root=cholec_root)
        _assert_same_store(tmp_path / "many" / name, alone)
    listed = summary.to_dict()["stores"]
    assert [s["model"] for s in listed] == list(encoders) and summary.to_dict()["ok"]


def test_each_video_is_decoded_once_and_only_for_the_models_that_need_it(
    cholec_root, tiny_model_dir, monkeypatch, tmp_path
):
    encoders = _encoders(tiny_model_dir, clip=False)
    decoded: list[str] = []
    real = chunks.read_frames

    def counting(source, *args, **kwargs):
        decoded.append(Path(source).stem)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(chunks, "read_frames", counting)
    targets = [ExtractTarget(enc, tmp_path / name, name) for name, enc in encoders.items()]
    extract_many("cholec80", targets, _options(), root=cholec_root)
    assert sorted(decoded) == ["video01", "video02", "video03"]  # three models, one decode per video

    # the first store loses a video: only that video is decoded again, for that model only
    (tmp_path / "crop" / "video02.safetensors").unlink()
    models_asked: list[tuple[str, tuple[int, ...]]] = []
    real_chunks = shared.iter_shared_chunks

    def spying(job, plans, *args, **kwargs):
        models_asked.append((job.video, job.models))
        return real_chunks(job, plans, *args, **kwargs)

    monkeypatch.setattr("plstitch_eval.extract.loader.iter_shared_chunks", spying)
    summary = extract_many("cholec80", targets, _options(), root=cholec_root)
    assert models_asked == [("video02", (0,))]
    assert [r.status for r in summary.stores[0].results] == ["skipped", "done", "skipped"]
    alone = tmp_path / "alone"
    extract_features("cholec80", encoders["crop"], alone, _options(), root=cholec_root)
    assert _store_files(tmp_path / "crop") == _store_files(alone)


class _Interrupt(Exception):
    pass


def test_an_interrupted_pass_resumes_per_model(cholec_root, tiny_model_dir, tmp_path):
    encoders = _encoders(tiny_model_dir, clip=False)
    targets = [ExtractTarget(enc, tmp_path / name, name) for name, enc in encoders.items()]
    seen: list[str] = []

    def stop_after_four(result):
        seen.append(result.video)
        if len(seen) == 4:  # the first video in all three stores, and one more in one of them
            raise _Interrupt

    with pytest.raises(_Interrupt):
        extract_many("cholec80", targets, _options(), root=cholec_root, on_video_done=stop_after_four)
    written = {name: FeatureStore(tmp_path / name).videos() for name in encoders}
    assert sum(len(v) for v in written.values()) == 4
    summary = extract_many("cholec80", targets, _options(), root=cholec_root)
    for name, store in zip(encoders, summary.stores, strict=True):
        assert sum(r.status == "skipped" for r in store.results) == len(written[name])
        alone = tmp_path / "alone" / name
        extract_features("cholec80", encoders[name], alone, _options(), root=cholec_root)
        _assert_same_store(tmp_path / name, alone)


KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
from plstitch_eval.extract import ExtractOptions, extract_many, store_targets
root, out, model = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
done = []
def kill_after_two(result):
    done.append(result.video)
    if len(done) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
options = ExtractOptions(fps=5.0, batch_size=4, num_workers=2, device="cpu", progress=False)
extract_many("cholec80", store_targets([model, "raw-pixels"], out), options, root=root,
             on_video_done=kill_after_two)
"""


def test_a_pass_killed_with_sigkill_resumes(cholec_root, tiny_model_dir, tmp_path):
    out = tmp_path / "feats"
    log = tmp_path / "killed.log"
    with log.open("w") as stream:  # a file, not a pipe: the test waits for the killed process only
        run = subprocess.run(
            [sys.executable, "-c", KILL_SCRIPT, str(cholec_root), str(out), str(tiny_model_dir)],
            stdout=stream,
            stderr=subprocess.STDOUT,
            timeout=300,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
    assert run.returncode == -signal.SIGKILL, log.read_text()
    targets = store_targets([str(tiny_model_dir), "raw-pixels"], out)
    assert sum(len(FeatureStore(t.out).videos()) for t in targets) == 2
    summary = extract_many("cholec80", targets, _options(), root=cholec_root)
    assert summary.ok and sum(r.status == "skipped" for s in summary.stores for r in s.results) == 2
    for target in targets:
        alone = tmp_path / "alone" / target.out.name
        extract_features("cholec80", target.encoder, alone, _options(), root=cholec_root)
        _assert_same_store(target.out, alone)


def test_store_names_are_filesystem_safe_and_distinct(tmp_path):
    assert store_name("raw-pixels") == "raw-pixels"
    assert store_name("hf-hub:org/name") == "hf-hub_org_name"
    assert [t.out for t in store_targets(["a", "hf-hub:x/y"], tmp_path)] == [
        tmp_path / "a",
        tmp_path / "hf-hub_x_y",
    ]
    with pytest.raises(ConfigError, match=r"--model 'a/b' and --model 'a:b' would both write"):
        store_targets(["a/b", "a:b"], tmp_path)
    with pytest.raises(ConfigError, match="same store folder"):
        extract_many("synthetic", [ExtractTarget("x", tmp_path / "s"), ExtractTarget("y", tmp_path / "s")])


def _cli(*args: str):
    from typer.testing import CliRunner

    from plstitch_eval.cli import app

    return CliRunner().invoke(app, ["extract", "--device", "cpu", "--num-workers", "0", *args])


def test_the_cli_writes_one_store_per_model_and_lists_them(cholec_root, tiny_model_dir, tmp_path):
    out = tmp_path / "feats"
    common = ["--dataset", "cholec80", "--root", str(cholec_root), "--fps", "5", "--batch-size", "4"]
    models = ["--model", str(tiny_model_dir), "--model", "raw-pixels"]
    result = _cli(*common, *models, "--out", str(out), "--json", "-")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    stores = {s["model"]: Path(s["store"]) for s in summary["stores"]}
    assert stores == {
        str(tiny_model_dir): out / store_name(str(tiny_model_dir)),
        "raw-pixels": out / "raw-pixels",
    }
    assert summary["ok"] and summary["frames"] == 2 * summary["stores"][0]["frames"]
    alone = tmp_path / "alone"
    assert _cli(*common, "--model", "raw-pixels", "--out", str(alone)).exit_code == 0
    _assert_same_store(out / "raw-pixels", alone)
    again = _cli(*common, *models, "--out", str(out), "--json", "-")  # a rerun resumes every store
    assert {v["status"] for s in json.loads(again.stdout)["stores"] for v in s["videos"]} == {"skipped"}

    # a one-model store is not a folder of stores: one line, nothing written
    refused = _cli(*common, *models, "--out", str(alone))
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.exit_code == 1 and len(lines) == 1 and "is the feature store of one model" in lines[0]
    assert sorted(p.name for p in alone.iterdir() if p.is_dir() and not p.name.startswith(".")) == []

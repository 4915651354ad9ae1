"""Issue 27: extraction verifies what it skips and redoes a damaged file; "made differently" reads as
`key: old -> new`; the dataset is checked before a model loads."""

from __future__ import annotations

import json
import shutil

import pytest
from safetensors.numpy import save_file
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.store.features import FeatureStore

from .conftest import make_cholec80

runner = CliRunner()
FPS = 2.0


@pytest.fixture(scope="module")
def knn_root(tmp_path_factory):
    """Cholec80 layout with videos 39 and 40 (train of the 40-40 split) and 41 (test), so k-NN can run."""
    return make_cholec80(tmp_path_factory.mktemp("c80knn"), (2, 2, 2), start=39)


def _args(root, model, out):
    return ["extract", "--dataset", "cholec80", "--root", str(root), "--model", str(model), "--out", str(out),
            "--fps", "2", "--batch-size", "3", "--num-workers", "0", "--device", "cpu"]  # fmt: skip


def _run(root, model, out, **kwargs):
    options = {"fps": FPS, "batch_size": 3, "num_workers": 0, "device": "cpu", "progress": False, **kwargs}
    return extract_features("cholec80", str(model), out, ExtractOptions(**options), root=root)


def _files(store):
    return {p.name: p.read_bytes() for p in sorted(store.glob("*.safetensors"))}


def _manifest_without_time(store):
    manifest = json.loads((store / "manifest.json").read_text())
    manifest.pop("created")
    return manifest


def test_a_truncated_feature_file_is_extracted_again_and_knn_works(knn_root, tiny_model_dir, tmp_path):
    clean, store = tmp_path / "clean", tmp_path / "store"
    assert runner.invoke(app, _args(knn_root, tiny_model_dir, clean)).exit_code == 0
    assert runner.invoke(app, _args(knn_root, tiny_model_dir, store)).exit_code == 0
    damaged = store / "video41.safetensors"
    damaged.write_bytes(damaged.read_bytes()[:-40])  # a copy cut short
    knn = ["knn", "--features", str(store), "--k", "3", "--device", "cpu", "--json", "-"]
    broken = runner.invoke(app, knn)
    assert broken.exit_code == 1 and "video41.safetensors is not a readable safetensors file" in broken.stderr

    again = runner.invoke(app, [*_args(knn_root, tiny_model_dir, store), "--json", "-"])
    assert again.exit_code == 0, again.output
    line = next(x for x in again.stderr.splitlines() if "video41" in x and "unreadable" in x)
    assert "video41: stored file unreadable (" in line and "extracting again" in line
    statuses = {v["video"]: v["status"] for v in json.loads(again.stdout)["videos"]}
    assert statuses == {"video39": "skipped", "video40": "skipped", "video41": "done"}
    assert _files(store) == _files(clean)
    assert _manifest_without_time(store) == _manifest_without_time(clean)
    scored = runner.invoke(app, knn)
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.stdout)


@pytest.mark.parametrize("damage", ["garbage", "fewer_frames", "no_labels"])
def test_every_damaged_file_is_redone_the_sound_ones_skipped(cholec_root, tiny_model_dir, tmp_path, damage):
    clean, out = tmp_path / "clean", tmp_path / "store"
    _run(cholec_root, tiny_model_dir, clean)
    shutil.copytree(clean, out)
    path = FeatureStore(out).path("video02")
    if damage == "garbage":
        path.write_bytes(b"not a safetensors file at all")
    else:  # whole, readable files that are not what the run wrote
        item = FeatureStore(out).read("video02")
        tensors = {
            "features": item.features[:-1],
            "labels": item.labels[:-1],
            "frame_times": item.frame_times[:-1],
        }
        if damage == "no_labels":
            tensors = {"features": item.features, "frame_times": item.frame_times}
        save_file(tensors, str(path))
    summary = _run(cholec_root, tiny_model_dir, out)
    assert [r.status for r in summary.results] == ["skipped", "done", "skipped"]
    assert _files(out) == _files(clean)


def test_a_store_from_before_the_frame_record_gets_it_when_resumed(cholec_root, tiny_model_dir, tmp_path):
    out = tmp_path / "store"
    _run(cholec_root, tiny_model_dir, out, videos=["video01", "video02"])
    manifest = json.loads((out / "manifest.json").read_text())
    recorded = manifest.pop("video_frames")
    (out / "manifest.json").write_text(json.dumps(manifest))  # as an older version wrote it
    summary = _run(cholec_root, tiny_model_dir, out)
    assert [r.status for r in summary.results] == ["skipped", "skipped", "done"]
    assert FeatureStore(out).manifest["video_frames"] == {**recorded, "video03": 8}


def test_made_differently_lists_old_to_new_pairs(cholec_root, tiny_model_dir, tmp_path):
    out = tmp_path / "store"
    _run(cholec_root, tiny_model_dir, out, videos=["video02"])
    with pytest.raises(FeatureStoreError) as info:
        _run(cholec_root, tiny_model_dir, out, videos=["video02"], fps=1.0, precision="bf16")
    message = str(info.value)
    assert "(fps: 2.0 -> 1.0; precision: fp32 -> bf16; as stored -> this run)" in message
    with pytest.raises(FeatureStoreError) as info:
        _run(cholec_root, tiny_model_dir, out, videos=["video02"], resize_on_decode=True)
    assert "preprocessing.resize_on_decode: (none) -> true;" in str(info.value)
    for text in (message, str(info.value)):
        assert "{" not in text and "'" not in text and "\n" not in text


def test_cli_made_differently_is_one_readable_line(cholec_root, tiny_model_dir, tmp_path):
    args = [*_args(cholec_root, tiny_model_dir, tmp_path / "s"), "--videos", "video02"]
    assert runner.invoke(app, args).exit_code == 0
    refused = runner.invoke(app, [*args, "--precision", "bf16"])
    assert refused.exit_code == 1
    lines = [x for x in refused.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "precision: fp32 -> bf16" in lines[0] and "Traceback" not in refused.output


# ------------------------------------------------------------------- issue 44: a store that lost its manifest


def test_a_store_whose_manifest_was_deleted_is_extracted_again_with_overwrite(
    cholec_root, tiny_model_dir, tmp_path
):
    clean, store = tmp_path / "clean", tmp_path / "store"
    assert runner.invoke(app, _args(cholec_root, tiny_model_dir, clean)).exit_code == 0
    assert runner.invoke(app, _args(cholec_root, tiny_model_dir, store)).exit_code == 0
    (store / "manifest.json").unlink()
    item = FeatureStore(store).read("video02")  # readable, right shapes, made some other way
    save_file(
        {"features": item.features + 1, "labels": item.labels, "frame_times": item.frame_times},
        str(store / "video02.safetensors"),
    )
    save_file({"features": item.features}, str(store / "video99.safetensors"))  # a video of another run
    before = _files(store)

    refused = runner.invoke(app, _args(cholec_root, tiny_model_dir, store))
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    lines = [x for x in refused.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "no manifest.json" in lines[0] and "--overwrite" in lines[0], lines
    assert _files(store) == before and not (store / "manifest.json").exists()  # nothing lost

    again = runner.invoke(app, [*_args(cholec_root, tiny_model_dir, store), "--overwrite", "--json", "-"])
    assert again.exit_code == 0, again.output
    statuses = {v["video"]: v["status"] for v in json.loads(again.stdout)["videos"]}
    assert statuses == {"video01": "done", "video02": "done", "video03": "done"}  # none adopted unseen
    assert _files(store) == _files(clean)  # video02 made again, video99 gone
    assert _manifest_without_time(store) == _manifest_without_time(clean)


def test_overwrite_never_deletes_a_foreign_file_of_a_manifest_less_folder(
    cholec_root, tiny_model_dir, tmp_path
):
    store = tmp_path / "store"
    assert runner.invoke(app, _args(cholec_root, tiny_model_dir, store)).exit_code == 0
    (store / "manifest.json").unlink()
    (store / "notes.txt").write_text("mine")
    before = _files(store)
    refused = runner.invoke(app, [*_args(cholec_root, tiny_model_dir, store), "--overwrite"])
    assert refused.exit_code == 1 and "not a feature store" in refused.stderr
    assert _files(store) == before and (store / "notes.txt").read_text() == "mine"

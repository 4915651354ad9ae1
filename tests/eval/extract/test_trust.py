"""Issue 59, the feature store as a user meets it: `extract --overwrite` never deletes a user's file; a file
damaged after it was written (same size) is refused by readers and extracted again on resume; the advice of
each error is a command that works (`--redo` of a NaN video, `--overwrite` of a half-written manifest, the
`--split train` a test-only store lacks); an unknown dataset is told before a missing --model."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.store.features import FeatureStore

from .conftest import make_cholec80

runner = CliRunner()


@pytest.fixture(scope="module")
def knn_root(tmp_path_factory):
    """Cholec80 layout with videos 39 and 40 (train of the 40-40 split) and 41 (test), so k-NN can run."""
    return make_cholec80(tmp_path_factory.mktemp("c80trust"), (2, 2, 2), start=39)


@pytest.fixture(scope="module")
def clean(knn_root, tiny_model_dir, tmp_path_factory):
    """One extraction, copied by each test (extracting is the slow part)."""
    out = tmp_path_factory.mktemp("clean") / "store"
    result = runner.invoke(app, _extract(knn_root, tiny_model_dir, out))
    assert result.exit_code == 0, result.output
    return out


def _extract(root, model, out, *more):
    return ["extract", "--dataset", "cholec80", "--root", str(root), "--model", str(model), "--out", str(out),
            "--fps", "2", "--batch-size", "3", "--num-workers", "0", "--device", "cpu", *more]  # fmt: skip


def _knn(store):
    return ["knn", "--features", str(store), "--k", "3", "--device", "cpu", "--json", "-"]


def _files(store):
    return {
        p.name: p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file() and ".locks" not in p.parts
    }


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("note")]
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def _advised_command(line: str, marker: str) -> list[str]:
    """The `plstitch extract ...` an error line ends with, as CLI arguments (run on the CPU, no workers)."""
    words = shlex.split(line.split(marker, 1)[1])
    assert words[:2] == ["plstitch", "extract"], words
    return [*words[1:], "--num-workers", "0", "--device", "cpu", "--json", "-"]


def _statuses(result) -> dict[str, str]:
    assert result.exit_code == 0, result.output
    return {v["video"]: v["status"] for v in json.loads(result.stdout)["videos"]}


def test_overwrite_refuses_a_store_holding_a_users_files_and_deletes_nothing(
    knn_root, tiny_model_dir, clean, tmp_path
):
    store = tmp_path / "s5"
    shutil.copytree(clean, store)
    (store / "notes.txt").write_text("x")
    (store / "my_analysis").mkdir()
    before = _files(store)
    refused = runner.invoke(app, _extract(knn_root, tiny_model_dir, store, "--overwrite"))
    line = _one_error_line(refused)
    assert "holds my_analysis/, which plstitch did not write" in line and "--overwrite deletes only" in line
    assert _files(store) == before and (store / "my_analysis").is_dir()


def test_same_size_damage_is_refused_by_readers_and_extracted_again_on_resume(
    knn_root, tiny_model_dir, clean, tmp_path
):
    store = tmp_path / "store"
    shutil.copytree(clean, store)
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["sha256"] == {
        p.stem: hashlib.sha256(p.read_bytes()).hexdigest() for p in store.glob("*.safetensors")
    }
    damaged = store / "video41.safetensors"
    data = bytearray(damaged.read_bytes())
    data[-150:-50] = bytes(b ^ 0xFF for b in data[-150:-50])  # 100 bytes flipped near the end
    damaged.write_bytes(bytes(data))
    line = _one_error_line(runner.invoke(app, _knn(store)))
    assert "video41.safetensors changed after it was written" in line and "--redo video41" in line
    statuses = _statuses(runner.invoke(app, [*_extract(knn_root, tiny_model_dir, store), "--json", "-"]))
    assert statuses == {"video39": "skipped", "video40": "skipped", "video41": "done"}
    assert damaged.read_bytes() == (clean / damaged.name).read_bytes()
    assert runner.invoke(app, _knn(store)).exit_code == 0


def test_a_deleted_feature_file_is_named_and_the_advised_command_extracts_it_again(clean, tmp_path):
    """Issue 64: a file the manifest records as written is not "extracted with --split or --videos"."""
    store = tmp_path / "store"
    shutil.copytree(clean, store)
    (store / "video40.safetensors").unlink()
    line = _one_error_line(runner.invoke(app, _knn(store)))
    assert line.startswith(f"error: {store / 'video40.safetensors'} is missing: the manifest records it"), (
        line
    )
    assert "--split or --videos" not in line and line.endswith("--redo video40"), line
    statuses = _statuses(runner.invoke(app, _advised_command(line, "(the other videos are kept): ")))
    assert statuses == {"video39": "skipped", "video40": "done", "video41": "skipped"}
    assert runner.invoke(app, _knn(store)).exit_code == 0


def test_nan_features_give_the_command_that_redoes_the_video(clean, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(clean, store)
    item = FeatureStore(store).read("video40")
    item.features[3, 0] = np.nan
    FeatureStore(store).write(item)  # a sound file holding NaN: the file checks out, its contents do not
    line = _one_error_line(runner.invoke(app, _knn(store)))
    assert "Video 'video40': frame 3 has NaN/inf features; extract it again: plstitch extract" in line
    statuses = _statuses(runner.invoke(app, _advised_command(line, "extract it again: ")))
    assert statuses == {"video39": "skipped", "video40": "done", "video41": "skipped"}
    assert runner.invoke(app, _knn(store)).exit_code == 0


def test_a_half_written_manifest_says_so_and_overwrite_extracts_the_store_again(
    knn_root, tiny_model_dir, clean, tmp_path
):
    store = tmp_path / "store"
    shutil.copytree(clean, store)
    text = (store / "manifest.json").read_text()
    (store / "manifest.json").write_text(text[: len(text) // 2])
    for args in (_knn(store), _extract(knn_root, tiny_model_dir, store)):
        line = _one_error_line(runner.invoke(app, args))
        assert "manifest.json is damaged (invalid JSON at line" in line and "with --overwrite" in line
    again = runner.invoke(app, [*_extract(knn_root, tiny_model_dir, store, "--overwrite"), "--json", "-"])
    assert set(_statuses(again).values()) == {"done"}
    assert {k: v for k, v in _files(store).items() if k != "manifest.json"} == {
        k: v for k, v in _files(clean).items() if k != "manifest.json"
    }


def test_a_test_split_store_names_the_missing_split_and_the_command_adds_it(
    knn_root, tiny_model_dir, tmp_path
):
    store = tmp_path / "store"
    assert runner.invoke(app, _extract(knn_root, tiny_model_dir, store, "--split", "test")).exit_code == 0
    for command in ("knn", "linear", "temporal"):
        line = _one_error_line(runner.invoke(app, [command, "--features", str(store), "--device", "cpu"]))
        assert f"{store} lacks videos of split 'train' (video" in line, line  # linear holds one out
        assert line.endswith(f"--out {store} --split train"), line
    statuses = _statuses(runner.invoke(app, _advised_command(line, "are kept): ")))
    assert statuses == {"video39": "done", "video40": "done"}
    assert runner.invoke(app, _knn(store)).exit_code == 0


def test_redo_of_a_video_the_run_does_not_take_is_one_line(knn_root, tiny_model_dir, tmp_path):
    line = _one_error_line(
        runner.invoke(app, _extract(knn_root, tiny_model_dir, tmp_path / "s", "--redo", "v9"))
    )
    assert "--redo v9: not among the videos this run extracts" in line


@pytest.mark.parametrize(
    ("dataset", "told"), [("nope", "Unknown dataset 'nope'"), ("cholec8", "Did you mean 'cholec80'")]
)
def test_an_unknown_dataset_is_told_before_a_missing_model(tmp_path, dataset, told):
    line = _one_error_line(
        runner.invoke(app, ["extract", "--dataset", dataset, "--out", str(tmp_path / "x")])
    )
    assert told in line and "--model is required" not in line
    assert not (tmp_path / "x").exists()

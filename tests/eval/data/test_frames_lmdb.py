"""Evaluation frame caches: `plstitch write-lmdb --eval-frames` and `FrameCache`, on real LMDBs of real
PyAV-decoded videos (a tiny synthetic dataset in Cholec80's layout, read by the `cholec80` adapter): JPEG
caches (`--image-format jpeg`) within JPEG's loss, and the default lossless PNG caches equal to the decoder's
frames exactly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lmdb
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset
from typer.testing import CliRunner

import plstitch_eval.data.video as video_module
from plstitch_eval.cli import app
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.decoders import read_frames
from plstitch_eval.data.frames_lmdb import (
    SIDECAR_NAME,
    TIMES_NAME,
    FrameCache,
    _decode_rgb,
    _lmdb_folder,
    _reader,
    is_png,
    read_frame_times,
)
from plstitch_eval.data.synthetic import generate_synthetic
from plstitch_eval.errors import DataError, DecodeError
from plstitch_train.frames_lmdb import LmdbFrameStore, write_frames_lmdb
from plstitch_train.videos import TrainingVideo
from tests.eval.data.media import write_index_frames

# JPEG at quality 90 against the decoded frames of the 64 px synthetic videos: measured per-frame mean
# absolute difference 2.9 grey levels on average, 3.2 at worst (128 px: 2.1 / 2.2; 256 px: 1.7 / 1.8); see
# docs/frame-cache.md.
JPEG_MEAN_BOUND = 4.0
SIZE = 64
JPEG_FLAGS = ("--image-format", "jpeg")  # --eval-frames caches are PNG unless told


def one_error_line(result) -> str:
    """The CLI's one error line (exit 1, no traceback; log lines may come before it)."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1 and "Traceback" not in result.output, result.output
    return errors[0]


def mean_abs(a: np.ndarray | torch.Tensor, b: np.ndarray | torch.Tensor) -> float:
    return float(np.abs(np.asarray(a, dtype=np.int32) - np.asarray(b, dtype=np.int32)).mean())


@pytest.fixture(scope="module")
def dataset_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three 6-8 s synthetic videos (25 fps, 64 px) in Cholec80's layout."""
    root = tmp_path_factory.mktemp("eval_cache") / "cholec"
    return generate_synthetic(root, n_videos=3, size=SIZE, min_seconds=6, max_seconds=8, workers=1)


def write_eval_cache(root: Path, out: Path, *flags: str) -> dict:
    """`plstitch write-lmdb --dataset cholec80 --root R --eval-frames FLAGS --out OUT`; its summary."""
    args = [
        "write-lmdb",
        "--dataset",
        "cholec80",
        "--root",
        str(root),
        "--eval-frames",
        *flags,
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{") :])


@pytest.fixture(scope="module")
def eval_cache(dataset_root: Path) -> tuple[Path, dict]:
    """A JPEG cache (`--eval-frames --image-format jpeg`, quality 90): the cache and the printed summary."""
    out = dataset_root.parent / "eval.lmdb"
    return out, write_eval_cache(dataset_root, out, *JPEG_FLAGS)


@pytest.fixture(scope="module")
def png_cache(dataset_root: Path) -> tuple[Path, dict]:
    """`plstitch write-lmdb --eval-frames` as it is by default (lossless PNG): the cache and its summary."""
    out = dataset_root.parent / "eval-png.lmdb"
    return out, write_eval_cache(dataset_root, out)


def test_eval_frames_are_the_frames_extraction_decodes(
    dataset_root: Path, eval_cache: tuple[Path, dict]
) -> None:
    out, summary = eval_cache
    adapter = get_dataset("cholec80", root=dataset_root)
    records = adapter.videos()
    assert summary["fps"] == adapter.eval_fps == 1.0 and summary["frame_size"] is None
    assert summary["frame_times"] is True and summary["videos"] == len(records) and summary["quality"] == 90
    cache = FrameCache.open(out / "data.mdb")
    assert cache.names == [r.name for r in records] and cache.fps == 1.0
    cache.check([r.name for r in records], adapter.eval_fps)
    for record in records:
        reference = list(read_frames(record.source, adapter.eval_fps))
        cached = list(cache.frames(record.name))
        assert [f.time for f in cached] == [f.time for f in reference]  # exactly the decoder's times
        assert [f.index for f in cached] == [f.index for f in reference] == list(range(len(reference)))
        for ours, theirs in zip(cached, reference, strict=True):
            assert ours.image.dtype == np.uint8 and ours.image.shape == theirs.image.shape == (SIZE, SIZE, 3)
            assert mean_abs(ours.image, theirs.image) < JPEG_MEAN_BOUND
    assert cache.record() == {
        "frames": "jpeg-lmdb",
        "jpeg_quality": 90,
        "frame_size": None,
        "swap_rb": True,
        "frames_decoder": "pyav",
    }
    json.dumps(cache.record())
    sidecar = json.loads((out / SIDECAR_NAME).read_text())
    assert sidecar["format"] == "plstitch-frames-lmdb/2" and sidecar["frame_times"] == TIMES_NAME
    # the authors' keys only: <video>_<t>, nothing else in the LMDB
    with _reader(out).begin() as txn:
        keys = {key.decode() for key in txn.cursor().iternext(values=False)}
    assert keys == {f"{name}_{t}" for name, n in cache.counts.items() for t in range(n)}
    assert LmdbFrameStore.open(out, fps=1.0).lengths == [cache.counts[n] for n in cache.names]  # trains too


def test_eval_frames_refuses_a_contradicting_fps_or_size_in_one_line(
    dataset_root: Path, eval_cache: tuple[Path, dict], tmp_path: Path
) -> None:
    runner, out = CliRunner(), tmp_path / "c.lmdb"
    base = ["write-lmdb", "--dataset", "cholec80", "--root", str(dataset_root), "--eval-frames", *JPEG_FLAGS]
    line = one_error_line(runner.invoke(app, [*base, "--fps", "2", "--out", str(out)]))
    assert "evaluation rate, 1 fps; --fps 2 contradicts it" in line and "leave out --fps" in line
    line = one_error_line(runner.invoke(app, [*base, "--size", "256", "--out", str(out)]))
    assert "--size 256 contradicts it" in line and "leave out --size" in line
    line = one_error_line(
        runner.invoke(app, [*base[:1], "--data", str(dataset_root), "--eval-frames", "--out", str(out)])
    )
    assert "give --dataset NAME" in line
    assert not out.exists() and not out.with_name("c.lmdb.partial").exists()
    # settings that agree with it are the same cache: finished, nothing to do
    again = runner.invoke(app, [*base, "--fps", "1", "--size", "0", "--out", str(eval_cache[0])])
    assert again.exit_code == 0, again.output


def test_both_colour_orders_read_back_the_same_rgb(
    dataset_root: Path, eval_cache: tuple[Path, dict], tmp_path: Path
) -> None:
    adapter = get_dataset("cholec80", root=dataset_root)
    videos = [TrainingVideo(r.name, r.source, r.folder_fps) for r in adapter.videos()]
    standard = FrameCache.open(write_frames_lmdb(videos, tmp_path / "std.lmdb", 1.0, None, swap_rb=False))
    swapped = FrameCache.open(eval_cache[0])
    assert standard.record()["swap_rb"] is False and swapped.record()["swap_rb"] is True
    name = videos[0].name
    with _reader(standard.folder).begin() as a, _reader(swapped.folder).begin() as b:
        assert a.get(f"{name}_0".encode()) != b.get(f"{name}_0".encode())  # the bytes differ...
    reference = list(read_frames(videos[0].source, 1.0))
    for ours, theirs, truth in zip(standard.frames(name), swapped.frames(name), reference, strict=True):
        assert ours.time == theirs.time == truth.time
        assert mean_abs(ours.image, truth.image) < JPEG_MEAN_BOUND  # ...the RGB frames agree
        assert mean_abs(theirs.image, truth.image) < JPEG_MEAN_BOUND
        assert mean_abs(ours.image[..., ::-1], truth.image) > 2 * JPEG_MEAN_BOUND  # red/blue do differ here
    for cache in (standard, swapped):
        times, batch = next(cache.batches(name, 64, "cpu"))
        stacked = np.stack([f.image for f in cache.frames(name)])
        assert torch.equal(batch, torch.from_numpy(stacked).permute(0, 3, 1, 2))


def test_batches_on_the_cpu_are_the_frames_stacked(eval_cache: tuple[Path, dict]) -> None:
    cache = FrameCache.open(eval_cache[0])
    for name in cache.names:
        frames = list(cache.frames(name))
        batches = list(cache.batches(name, 3, torch.device("cpu")))
        assert [len(times) for times, _ in batches[:-1]] == [3] * (len(batches) - 1)
        assert [t for times, _ in batches for t in times] == [f.time for f in frames]
        images = torch.cat([images for _, images in batches])
        assert images.dtype == torch.uint8 and images.shape == (len(frames), 3, SIZE, SIZE)
        assert torch.equal(images, torch.from_numpy(np.stack([f.image for f in frames])).permute(0, 3, 1, 2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="nvJPEG decoding needs a CUDA device")
def test_batches_on_cuda_decode_with_nvjpeg_like_the_cpu(eval_cache: tuple[Path, dict]) -> None:
    cache = FrameCache.open(eval_cache[0])
    for name in cache.names:
        cpu = list(cache.batches(name, 4, "cpu"))
        cuda = list(cache.batches(name, 4, "cuda"))
        assert [times for times, _ in cuda] == [times for times, _ in cpu]
        for (_, on_gpu), (_, on_cpu) in zip(cuda, cpu, strict=True):
            assert on_gpu.is_cuda and on_gpu.dtype == torch.uint8 and on_gpu.shape == on_cpu.shape
            # nvJPEG and libjpeg-turbo may upsample chroma and round differently (not yet measured on a GPU)
            assert mean_abs(on_gpu.cpu(), on_cpu) < 2.0


def test_eval_frames_are_lossless_png_by_default_the_decoders_frames_exactly(
    dataset_root: Path, png_cache: tuple[Path, dict]
) -> None:
    out, summary = png_cache
    assert summary["image_format"] == "png" and summary["quality"] is None and summary["frame_times"] is True
    adapter = get_dataset("cholec80", root=dataset_root)
    cache = FrameCache.open(out)
    assert cache.lossless and cache.record() == {
        "frames": "png-lmdb",
        "frame_size": None,
        "swap_rb": True,
        "frames_decoder": "pyav",
    }
    sidecar = json.loads((out / SIDECAR_NAME).read_text())
    assert sidecar["layout"]["image_format"] == "png" and sidecar["format"] == "plstitch-frames-lmdb/2"
    training = LmdbFrameStore.open(out, fps=1.0)  # trains too (PNG values, as cv2.imdecode reads them)
    for v, record in enumerate(adapter.videos()):
        reference = list(read_frames(record.source, adapter.eval_fps))
        cached = list(cache.frames(record.name))
        assert [f.time for f in cached] == [f.time for f in reference]
        for ours, theirs in zip(cached, reference, strict=True):
            assert ours.image.dtype == theirs.image.dtype and np.array_equal(ours.image, theirs.image)
        stacked = np.stack([f.image for f in reference])
        batches = torch.cat([images for _, images in cache.batches(record.name, 3, "cpu")])
        assert torch.equal(batches, torch.from_numpy(stacked).permute(0, 3, 1, 2))
        assert np.array_equal(training.frames(v, list(range(len(reference)))), stacked)
        with _reader(out).begin() as txn:
            value = txn.get(f"{record.name}_0".encode())
        # the authors' cv2 order: a standard decoder reads red and blue swapped, cv2.imdecode reads the frame
        assert is_png(value) and np.array_equal(_decode_rgb(value)[..., ::-1], reference[0].image)


def test_training_frames_stay_jpeg_90(dataset_root: Path, tmp_path: Path) -> None:
    args = ["write-lmdb", "--dataset", "cholec80", "--root", str(dataset_root), "--fps", "1", "--size", "0",
            "--out", str(tmp_path / "train.lmdb")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert summary["image_format"] == "jpeg" and summary["quality"] == 90


def test_jpeg_options_on_png_frames_are_one_line_naming_the_fix(
    dataset_root: Path, png_cache: tuple[Path, dict], tmp_path: Path
) -> None:
    runner, out = CliRunner(), tmp_path / "c.lmdb"
    base = ["write-lmdb", "--dataset", "cholec80", "--root", str(dataset_root), "--eval-frames"]
    line = one_error_line(runner.invoke(app, [*base, "--quality", "95", "--out", str(out)]))
    assert "--quality 95 sets JPEG quality, but the frames are PNG (the default of --eval-frames" in line
    assert "add --image-format jpeg" in line
    line = one_error_line(
        runner.invoke(app, [*base, "--image-format", "png", "--quality", "95", "--out", str(out)])
    )
    assert "but the frames are PNG:" in line and "leave out --quality" in line
    line = one_error_line(runner.invoke(app, [*base, "--image-format", "webp", "--out", str(out)]))
    assert "--image-format must be jpeg or png, got 'webp'" in line
    assert not out.exists() and not out.with_name("c.lmdb.partial").exists()
    # a finished PNG cache is never rewritten as JPEG: the difference is named
    line = one_error_line(runner.invoke(app, [*base, *JPEG_FLAGS, "--out", str(png_cache[0])]))
    assert "already holds frames" in line and "image_format: 'png' there, 'jpeg' now" in line


@pytest.mark.skipif(not torch.cuda.is_available(), reason="decoding a cache on CUDA needs a CUDA device")
def test_png_batches_on_cuda_are_the_cpu_frames_exactly(png_cache: tuple[Path, dict]) -> None:
    cache = FrameCache.open(png_cache[0])
    for name in cache.names:
        cpu = list(cache.batches(name, 4, "cpu"))
        cuda = list(cache.batches(name, 4, "cuda"))
        assert [times for times, _ in cuda] == [times for times, _ in cpu]
        for (_, on_gpu), (_, on_cpu) in zip(cuda, cpu, strict=True):
            assert on_gpu.is_cuda and torch.equal(on_gpu.cpu(), on_cpu)


def test_a_missing_video_or_another_fps_is_one_line_naming_the_fix(
    dataset_root: Path, eval_cache: tuple[Path, dict]
) -> None:
    cache = FrameCache.open(eval_cache[0])
    fix = f"plstitch write-lmdb --dataset cholec80 --root {dataset_root.resolve()}"
    with pytest.raises(DataError) as missing:
        cache.check([*cache.names, "video98", "video99"], 1.0)
    text = str(missing.value)
    assert "\n" not in text and str(cache.folder) in text and "2 of the 5 videos (video98, video99)" in text
    assert f"{fix} --eval-frames --out" in text
    with pytest.raises(DataError) as other_fps:
        cache.check(cache.names, 2.0)
    text = str(other_fps.value)
    assert "\n" not in text and str(cache.folder) in text and "at 1 fps, this run samples 2 fps" in text
    assert f"{fix} --fps 2 --size 0 --image-format png --out" in text
    with pytest.raises(DecodeError, match="no video 'video99'"):
        next(cache.frames("video99"))


def test_caches_without_frame_times_are_refused_with_the_fix(
    dataset_root: Path, eval_cache: tuple[Path, dict], tmp_path: Path
) -> None:
    old = tmp_path / "old.lmdb"
    shutil.copytree(eval_cache[0], old)
    sidecar = json.loads((old / SIDECAR_NAME).read_text())
    sidecar["format"] = "plstitch-frames-lmdb/1"  # as written before frame times were recorded
    del sidecar["frame_times"]
    (old / SIDECAR_NAME).write_text(json.dumps(sidecar))
    (old / TIMES_NAME).unlink()
    with pytest.raises(DataError) as refused:
        FrameCache.open(old)
    text = str(refused.value)
    assert "\n" not in text and str(old) in text and "no frame times recorded for 3 of 3 videos" in text
    fix = f"plstitch write-lmdb --dataset cholec80 --root {dataset_root.resolve()} --eval-frames"
    assert f"rewrite it with {fix}" in text
    assert LmdbFrameStore.open(old, fps=1.0).lengths  # training still reads it
    args = ["write-lmdb", "--dataset", "cholec80", "--root", str(dataset_root), "--eval-frames", *JPEG_FLAGS,
            "--out", str(old)]  # fmt: skip
    line = one_error_line(CliRunner().invoke(app, args))  # finished with these settings, but no times
    assert "finished before plstitch recorded frame times" in line and "choose another --out" in line

    (old / SIDECAR_NAME).unlink()  # the authors' LMDB: no record at all
    with pytest.raises(DataError, match=r"without plstitch's record .*--eval-frames --out"):
        FrameCache.open(old)
    with pytest.raises(
        DataError, match=r"not a frames LMDB \(no data.mdb\); write one with plstitch write-lmdb"
    ):
        FrameCache.open(tmp_path)


def test_a_missing_frame_names_the_cache_video_and_index(
    eval_cache: tuple[Path, dict], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.lmdb"
    shutil.copytree(eval_cache[0], broken)
    name = FrameCache.open(eval_cache[0]).names[1]
    env = lmdb.open(str(broken), map_size=1 << 28)
    with env.begin(write=True) as txn:
        assert txn.delete(f"{name}_2".encode())
    env.close()
    cache = FrameCache.open(broken)
    with pytest.raises(DecodeError, match=rf"{broken}: frame 2 of {name} is missing"):
        list(cache.frames(name))
    with pytest.raises(DecodeError, match=rf"frame 2 of {name} is missing"):
        list(cache.batches(name, 2, "cpu"))


def test_frame_folder_times_are_recorded(tmp_path: Path) -> None:
    folder = write_index_frames(tmp_path / "frames" / "clip", 10)
    out = write_frames_lmdb([TrainingVideo("clip", folder, 5.0)], tmp_path / "f.lmdb", 2.0, None)
    cache = FrameCache.open(out)
    expected = [f.time for f in read_frames(folder, 2.0, folder_fps=5.0)]
    assert [f.time for f in cache.frames("clip")] == expected and len(expected) == 4


class _VideoFrames(Dataset):
    def __init__(self, cache: FrameCache) -> None:
        self.cache = cache

    def __len__(self) -> int:
        return len(self.cache.names)

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.cat([images for _, images in self.cache.batches(self.cache.names[i], 4, "cpu")])


def test_forked_workers_read_what_the_parent_reads(eval_cache: tuple[Path, dict]) -> None:
    cache = FrameCache.open(eval_cache[0])
    first = _VideoFrames(cache)[0]  # the parent holds an open environment when the workers fork
    frames = cache.frames(cache.names[1])
    next(frames)  # and a reader in the middle of a video
    loader = DataLoader(_VideoFrames(cache), batch_size=None, num_workers=2, multiprocessing_context="fork")
    read = list(loader)
    assert torch.equal(read[0], first) and len(read) == len(cache.names)
    assert len(list(frames)) == cache.counts[cache.names[1]] - 1  # the parent's reader goes on after the fork


def test_resume_after_a_crash_records_every_videos_times_once(
    dataset_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = get_dataset("cholec80", root=dataset_root)
    videos = [TrainingVideo(r.name, r.source, r.folder_fps) for r in adapter.videos()]
    reference = FrameCache.open(write_frames_lmdb(videos, tmp_path / "whole", 1.0, None))
    real = video_module.read_frames

    def crashing(source, *args, **kwargs):
        if Path(source).stem == videos[2].name:
            raise RuntimeError("disk on fire")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(video_module, "read_frames", crashing)
    with pytest.raises(RuntimeError):
        write_frames_lmdb(videos, tmp_path / "out", 1.0, None)
    partial = tmp_path / "out.partial"
    assert set(read_frame_times(partial)) == {videos[0].name, videos[1].name}
    # an older writer's partial: format /1, no times; and a torn line from a kill mid-append
    sidecar = json.loads((partial / SIDECAR_NAME).read_text())
    (partial / SIDECAR_NAME).write_text(json.dumps({**sidecar, "format": "plstitch-frames-lmdb/1"}))
    times_file = partial / TIMES_NAME
    lines = times_file.read_text().splitlines(keepends=True)
    times_file.write_text(lines[0] + '{"video": "video03", "times": [0.0, 1.')
    decoded: list[str] = []
    monkeypatch.setattr(
        video_module, "read_frames", lambda s, *a, **k: (decoded.append(Path(s).stem), real(s, *a, **k))[1]
    )
    cache = FrameCache.open(write_frames_lmdb(videos, tmp_path / "out", 1.0, None))
    assert decoded == [videos[1].name, videos[2].name]  # video 1's times were lost: decoded again
    assert cache.frame_times == reference.frame_times and cache.counts == reference.counts
    assert len((cache.folder / TIMES_NAME).read_text().splitlines()) == len(videos)
    for name in cache.names:
        for ours, theirs in zip(cache.frames(name), reference.frames(name), strict=True):
            assert ours.time == theirs.time and np.array_equal(ours.image, theirs.image)


def test_the_data_file_and_its_folder_open_the_same_cache(eval_cache: tuple[Path, dict]) -> None:
    assert _lmdb_folder(eval_cache[0] / "data.mdb") == eval_cache[0]
    partial = eval_cache[0].with_name("x.lmdb.partial")
    with pytest.raises(DataError, match="unfinished"):
        FrameCache.open(partial)

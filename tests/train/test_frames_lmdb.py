"""Frames LMDB in the authors' layout: reader, writer (colour order, resume after a crash and a kill),
workers, and `plstitch train --data LMDB` on an LMDB the test writes itself from synthetic videos."""

from __future__ import annotations

import io
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import lmdb
import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader
from typer.testing import CliRunner

import plstitch_eval.data.video as video_module
from plstitch_eval.cli import app
from plstitch_eval.data.video import read_frames
from plstitch_eval.errors import ConfigError, DataError
from plstitch_train.data import (
    FrameStore,
    LmdbFrameStore,
    build_training_data,
    discover_videos,
    open_frame_store,
)
from plstitch_train.frames_lmdb import (
    SIDECAR_NAME,
    TIMES_NAME,
    lmdb_summary,
    read_frame_times,
    read_layout,
    write_frames_lmdb,
)
from plstitch_train.presets import TrainConfig, get_preset
from tests.train.conftest import VIDEO_FPS, tiny_config, write_mp4

REPO = Path(__file__).resolve().parents[2]


def authors_lmdb(
    path: Path, videos: dict[str, dict[int, np.ndarray]], extra_keys: tuple[bytes, ...] = ()
) -> None:
    """An LMDB as the authors' writer leaves it: keys `<video>_<t>`, values what `cv2.imencode` makes of an
    RGB array - an image whose standard RGB decoding is the array with its channels reversed (PNG here)."""
    env = lmdb.open(str(path), map_size=1 << 28)
    with env.begin(write=True) as txn:
        for name, frames in videos.items():
            for t, image in frames.items():
                buffer = io.BytesIO()
                Image.fromarray(np.ascontiguousarray(image[..., ::-1])).save(buffer, format="PNG")
                txn.put(f"{name}_{t}".encode(), buffer.getvalue())
        for key in extra_keys:
            txn.put(key, b"not an image")
    env.close()


def _frames(seed: int, ts: list[int], shape: tuple[int, int] = (12, 16)) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t: rng.integers(0, 256, size=(*shape, 3), dtype=np.uint8) for t in ts}


def _all_items(path: Path) -> dict[bytes, bytes]:
    env = lmdb.open(str(path), readonly=True, lock=False)
    with env.begin() as txn:
        items = dict(txn.cursor().iternext())
    env.close()
    return items


def _standard_decode(value: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(value)).convert("RGB"))


def test_reader_indexes_the_authors_keys_and_returns_their_frames(tmp_path: Path) -> None:
    case = _frames(0, [0, 1, 2, 4, 5])  # index 3 missing: positions skip it
    other = _frames(1, [0, 1, 2, 3])
    authors_lmdb(tmp_path / "db", {"case_01": case, "b": other}, extra_keys=(b"junk", b"meta_x"))

    store = LmdbFrameStore.open(tmp_path / "db", fps=1.0)
    assert store.names == ["b", "case_01"] and store.lengths == [4, 5] and store.fps == 1.0
    np.testing.assert_array_equal(store.frames(1, [0, 3, 4]), np.stack([case[0], case[4], case[5]]))
    np.testing.assert_array_equal(store.frames(0, [2]), other[2][None])
    assert store.keys(1, [3]) == [b"case_01_4"]

    reversed_store = LmdbFrameStore.open(tmp_path / "db" / "data.mdb", reverse_time=True)
    np.testing.assert_array_equal(reversed_store.frames(1, [0, 1]), np.stack([case[5], case[4]]))

    short = LmdbFrameStore.open(tmp_path / "db", min_frames=5)
    assert short.names == ["case_01"]
    with pytest.raises(DataError, match="at least 6 frames"):
        LmdbFrameStore.open(tmp_path / "db", min_frames=6)


def test_a_training_fps_other_than_the_stores_is_refused_with_the_fix(tmp_path: Path) -> None:
    authors_lmdb(tmp_path / "db", {"v": _frames(0, [0, 1])})
    with pytest.raises(ConfigError, match=r"1 fps.*--fps 1"):
        LmdbFrameStore.open(tmp_path / "db", fps=2.0)
    with pytest.raises(DataError, match="not an LMDB"):
        LmdbFrameStore.open(tmp_path)


def test_writer_keys_values_and_colour_order(video_dir: Path, tmp_path: Path) -> None:
    videos = discover_videos(video_dir, folder_fps=VIDEO_FPS)
    out = write_frames_lmdb(videos, tmp_path / "authors.lmdb", VIDEO_FPS, 36, quality=95)
    items = _all_items(out)
    decoded = {v.name: [f.image for f in read_frames(v.source, fps=VIDEO_FPS, size=36)] for v in videos}
    assert set(items) == {
        f"{name}_{t}".encode() for name, frames in decoded.items() for t in range(len(frames))
    }
    for name, frames in decoded.items():
        for t, frame in enumerate(frames):
            value = items[f"{name}_{t}".encode()]
            assert value[:2] == b"\xff\xd8"  # JPEG
            # the authors' reader: cv2.imdecode = standard decoding with the channels reversed
            assert np.abs(_standard_decode(value)[..., ::-1].astype(int) - frame).mean() < 8
    store = LmdbFrameStore.open(out, fps=VIDEO_FPS)
    first = decoded[store.names[0]]
    assert np.abs(store.frames(0, [0, 1]).astype(int) - np.stack(first[:2])).mean() < 8
    assert json.loads((out / SIDECAR_NAME).read_text())["videos"] == {n: len(f) for n, f in decoded.items()}

    standard = write_frames_lmdb(videos, tmp_path / "std.lmdb", VIDEO_FPS, 36, quality=95, swap_rb=False)
    value = _all_items(standard)[f"{store.names[0]}_0".encode()]
    assert np.abs(_standard_decode(value).astype(int) - first[0]).mean() < 8
    assert np.abs(_standard_decode(value)[..., ::-1].astype(int) - first[0]).mean() > 20  # red <-> blue
    both = LmdbFrameStore.open(standard).frames(0, [0]).astype(int) - store.frames(0, [0])
    assert np.abs(both).mean() < 8  # either colour order reads back as the same RGB frame


def test_writer_resumes_after_a_crash_and_never_overwrites(
    video_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    videos = discover_videos(video_dir, folder_fps=VIDEO_FPS)
    reference = _all_items(write_frames_lmdb(videos, tmp_path / "whole", VIDEO_FPS, 36))
    real = video_module.read_frames
    decoded: list[str] = []

    def crashing(source, *args, **kwargs):
        decoded.append(Path(source).stem)
        if Path(source).stem == videos[1].name:
            raise RuntimeError("disk on fire")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(video_module, "read_frames", crashing)
    with pytest.raises(RuntimeError):
        write_frames_lmdb(videos, tmp_path / "out", VIDEO_FPS, 36)
    assert not (tmp_path / "out").exists() and (tmp_path / "out.partial").is_dir()
    decoded.clear()
    monkeypatch.setattr(
        video_module, "read_frames", lambda s, *a, **k: (decoded.append(Path(s).stem), real(s, *a, **k))[1]
    )
    write_frames_lmdb(videos, tmp_path / "out", VIDEO_FPS, 36)
    assert decoded == [videos[1].name]  # the finished video is not decoded again
    assert _all_items(tmp_path / "out") == reference and not (tmp_path / "out.partial").exists()

    decoded.clear()
    write_frames_lmdb(videos, tmp_path / "out", VIDEO_FPS, 36)  # finished, same settings: nothing to do
    assert decoded == []
    with pytest.raises(DataError, match="quality: 90 there, 80 now"):
        write_frames_lmdb(videos, tmp_path / "out", VIDEO_FPS, 36, quality=80)
    assert _all_items(tmp_path / "out") == reference


def test_the_format_lives_in_plstitch_eval_and_is_re_exported_as_the_same_objects() -> None:
    import plstitch_eval.data.frames_lmdb as layout_module
    import plstitch_train.frames_lmdb as training_module

    names = (
        "LMDB_DATA_FILE SIDECAR_NAME LAYOUT_FORMAT AUTHORS_FPS MAP_SIZE LmdbLayout is_frames_lmdb "
        "_lmdb_folder _open_env _reader _READERS _close_readers read_layout _write_layout scan_keys "
        "decode_frame encode_frame"
    )
    for name in names.split():
        assert getattr(training_module, name) is getattr(layout_module, name), name


def test_frame_times_are_recorded_and_format_1_sidecars_still_read(video_dir: Path, tmp_path: Path) -> None:
    videos = discover_videos(video_dir, folder_fps=VIDEO_FPS)
    out = write_frames_lmdb(videos, tmp_path / "frames.lmdb", VIDEO_FPS, 36)
    sidecar = json.loads((out / SIDECAR_NAME).read_text())
    assert sidecar["format"] == "plstitch-frames-lmdb/2" and lmdb_summary(out)["frame_times"] is True
    times = read_frame_times(out)
    for video in videos:
        decoded = [f.time for f in read_frames(video.source, fps=VIDEO_FPS, size=36)]
        assert times[video.name] == decoded and sidecar["videos"][video.name] == len(decoded)
    # as an older plstitch wrote it: format /1, no times; it trains and is up to date, without times
    del sidecar["frame_times"]
    (out / SIDECAR_NAME).write_text(json.dumps({**sidecar, "format": "plstitch-frames-lmdb/1"}))
    (out / TIMES_NAME).unlink()
    assert read_layout(out)[1] == sidecar["videos"]
    assert write_frames_lmdb(videos, out, VIDEO_FPS, 36) == out
    assert lmdb_summary(out)["frame_times"] is False
    assert LmdbFrameStore.open(out, fps=VIDEO_FPS).lengths == [sidecar["videos"][v.name] for v in videos]
    (out / SIDECAR_NAME).write_text(json.dumps({**sidecar, "format": "plstitch-frames-lmdb/9"}))
    with pytest.raises(DataError, match="plstitch-frames-lmdb/9"):
        read_layout(out)


def test_writer_resumes_after_a_kill(tmp_path: Path) -> None:
    data = tmp_path / "videos"
    for i in range(8):
        write_mp4(data / f"v{i}.mp4", 48, seed=i)
    script = (
        "import sys; from plstitch_train.data import discover_videos; "
        "from plstitch_train.frames_lmdb import write_frames_lmdb; "
        f"write_frames_lmdb(discover_videos(sys.argv[1], 4.0), sys.argv[2], {VIDEO_FPS}, 36)"
    )
    out, sidecar = tmp_path / "out", tmp_path / "out.partial" / SIDECAR_NAME
    env = {**os.environ, "PYTHONPATH": str(REPO), "PLSTITCH_NO_LIVE": "1"}
    child = subprocess.Popen([sys.executable, "-c", script, str(data), str(out)], env=env, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        if sidecar.is_file() and json.loads(sidecar.read_text())["videos"]:
            break
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert not out.exists(), "the writer finished before the kill; the test needs more videos"
    videos = discover_videos(data, folder_fps=VIDEO_FPS)
    write_frames_lmdb(videos, out, VIDEO_FPS, 36)
    assert _all_items(out) == _all_items(write_frames_lmdb(videos, tmp_path / "whole", VIDEO_FPS, 36))


def test_training_from_videos_uses_an_lmdb_of_the_raw_frames(video_dir: Path, tmp_path: Path) -> None:
    config = tiny_config(video_dir, tmp_path / "cache")
    store = open_frame_store(config, tmp_path / "cache")
    raw = open_frame_store(config.replace(frame_store="raw"), tmp_path / "cache")
    assert isinstance(store, LmdbFrameStore) and isinstance(raw, FrameStore)
    assert [p.suffix for p in (tmp_path / "cache").glob("frames-*")] == [".lmdb"]
    assert store.names == raw.names and store.lengths == raw.lengths
    for video, length in enumerate(raw.lengths):
        assert (
            np.abs(store.frames(video, range(length)).astype(int) - raw.frames(video, range(length))).mean()
            < 8
        )
    again = open_frame_store(config, tmp_path / "cache")  # the second run reads the same LMDB
    assert again.folder == store.folder


def test_workers_read_the_same_items_as_the_main_process(video_dir: Path, tmp_path: Path) -> None:
    config = tiny_config(video_dir, tmp_path / "cache")
    store = open_frame_store(config, tmp_path / "cache")
    first = store.frames(0, [0])  # the parent has an open environment before the workers fork
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(store)).frames(0, [0]), first)  # spawn
    dataset, sampler = build_training_data(config, store, (4, 4))

    def batches(workers: int) -> list[dict[str, torch.Tensor]]:
        loader = DataLoader(dataset, batch_sampler=sampler, num_workers=workers)
        return list(loader)

    serial, parallel = batches(0), batches(2)
    assert len(serial) == len(parallel) > 1
    for a, b in zip(serial, parallel, strict=True):
        for key in a:
            assert torch.equal(a[key], b[key]), key


def test_configs_saved_before_the_lmdb_store_keep_the_raw_cache() -> None:
    saved = TrainConfig().to_flat_dict()  # the form run folders saved then
    del saved["frame_store"]
    assert TrainConfig.from_dict(saved).frame_store == "raw"
    assert TrainConfig().frame_store == "lmdb"
    with pytest.raises(ConfigError, match="frame_store"):
        TrainConfig(frame_store="npy")


def test_train_reads_an_lmdb_in_the_authors_layout_at_its_own_frame_rate(tmp_path: Path) -> None:
    """`--data LMDB` with the tiny-cpu preset (fps 2) and no --fps trains at the LMDB's 1 fps and records it;
    an explicit --fps the LMDB does not hold is one line naming the LMDB and the fix."""
    from plstitch_eval.data.synthetic import generate_synthetic

    root = generate_synthetic(
        tmp_path / "synthetic", n_videos=3, size=32, min_seconds=6, max_seconds=8, workers=1
    )
    videos = {
        path.stem: {t: f.image for t, f in enumerate(read_frames(path, fps=1.0))}
        for path in sorted((root / "videos").glob("*.mp4"))
    }
    authors_lmdb(tmp_path / "lemon", videos)
    assert get_preset("tiny-cpu").fps != 1.0
    runner = CliRunner()
    args = ["train", "--data", str(tmp_path / "lemon"), "--preset", "tiny-cpu", "--steps", "2"]
    run = tmp_path / "run"
    result = runner.invoke(app, [*args, "--batch-size", "4", "--out", str(run)])
    assert result.exit_code == 0, result.output
    assert json.loads((run / "train_config.json").read_text())["frames"]["fps"] == 1.0
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 2 and np.isfinite(log[-1]["loss"])
    assert not (run / "frame_cache").exists()  # nothing decoded into a cache
    # the same command with the matching rate given explicitly is the same run: finished, nothing to do
    again = runner.invoke(app, [*args, "--batch-size", "4", "--fps", "1", "--out", str(run)])
    assert again.exit_code == 0 and json.loads(again.stdout)["already_finished"] is True, again.output

    wrong = runner.invoke(app, [*args, "--fps", "2", "--out", str(tmp_path / "run2")])
    assert wrong.exit_code == 1 and "Traceback" not in wrong.output
    errors = [line for line in wrong.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, wrong.stderr
    assert f"--data {tmp_path / 'lemon'} holds frames at 1 fps" in errors[0]
    assert "leave out --fps" in errors[0] and not (tmp_path / "run2").exists()


def test_write_lmdb_command_prints_json_and_never_overwrites(video_dir: Path, tmp_path: Path) -> None:
    runner, out = CliRunner(), tmp_path / "frames.lmdb"
    args = [
        "write-lmdb",
        "--data",
        str(video_dir),
        "--out",
        str(out),
        "--fps",
        str(VIDEO_FPS),
        "--size",
        "36",
    ]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout[first.stdout.index("{") :])
    lengths = LmdbFrameStore.open(out, fps=VIDEO_FPS).lengths
    assert summary["videos"] == 2 and summary["frames"] == sum(lengths) and summary["swap_rb"] is True
    assert runner.invoke(app, args).exit_code == 0  # finished with the same settings: nothing to do
    other = runner.invoke(app, [*args, "--quality", "50"])
    assert other.exit_code == 1 and "already holds frames" in other.output and "Traceback" not in other.output


def test_write_lmdb_size_default_and_zero_keep_what_the_help_says(video_dir: Path, tmp_path: Path) -> None:
    """`--size` help and behaviour agree: 256 by default, 0 keeps the decoded size (issue 27)."""
    runner = CliRunner()
    help_text = " ".join(runner.invoke(app, ["write-lmdb", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "0 keeps each video's decoded size" in help_text and "default: 256" in help_text
    base = ["write-lmdb", "--data", str(video_dir), "--fps", str(VIDEO_FPS)]
    for size, name in (("0", "raw.lmdb"), (None, "default.lmdb")):
        args = [*base, "--out", str(tmp_path / name), *(["--size", size] if size else [])]
        assert runner.invoke(app, args).exit_code == 0
    videos = discover_videos(video_dir, folder_fps=VIDEO_FPS)
    decoded = next(read_frames(videos[0].source, fps=VIDEO_FPS)).image.shape[:2]
    raw = LmdbFrameStore.open(tmp_path / "raw.lmdb", fps=VIDEO_FPS)
    default = LmdbFrameStore.open(tmp_path / "default.lmdb", fps=VIDEO_FPS)
    index = raw.names.index(videos[0].name)
    assert raw.frames(index, [0]).shape[1:3] == decoded
    assert min(default.frames(default.names.index(videos[0].name), [0]).shape[1:3]) == 256

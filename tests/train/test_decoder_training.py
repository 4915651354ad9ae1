"""Training from videos with either decoder: `TrainConfig.decoder` checked, the frame caches keyed by it
(PyAV's keys as before), the LMDB sidecar records it and refuses to resume with another, and `plstitch
train --decoder torchcodec` without TorchCodec is one line."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data import decoders
from plstitch_eval.data.decoders import Decoding
from plstitch_eval.errors import ConfigError, DataError
from plstitch_train import presets
from plstitch_train.data import FrameStore, _cache_file, discover_videos
from plstitch_train.frames_lmdb import SIDECAR_NAME, LmdbFrameStore, write_frames_lmdb
from plstitch_train.presets import TrainConfig
from tests.train.conftest import VIDEO_FPS

pytestmark = pytest.mark.usefixtures("fresh_torchcodec_detection")  # some tests hide TorchCodec

TORCHCODEC = Decoding("torchcodec")


def test_decoder_setting_is_checked_and_defaults_to_pyav():
    assert presets.DECODER_CHOICES == decoders.DECODER_CHOICES  # the torch-free copy stays in step
    with pytest.raises(ConfigError, match="decoder must be one of pyav, torchcodec, auto"):
        TrainConfig(decoder="ffmpeg")
    saved = TrainConfig().to_flat_dict()
    del saved["decoder"]  # a train_config.json written before the setting existed
    assert TrainConfig.from_dict(saved).decoder == "pyav"


def test_pyav_cache_keys_are_unchanged_and_decoders_never_share_a_cache(video_dir, tmp_path):
    video = discover_videos(video_dir, folder_fps=VIDEO_FPS)[0]
    stat = video.source.stat()
    before = f"{video.source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{2.0}|{16}|{None}"  # the old key
    digest = hashlib.sha1(before.encode()).hexdigest()[:16]
    assert _cache_file(video, 2.0, 16, tmp_path).name.endswith(f"-{digest}.npy")
    assert _cache_file(video, 2.0, 16, tmp_path, TORCHCODEC) != _cache_file(video, 2.0, 16, tmp_path)


def test_raw_frame_store_from_torchcodec(torchcodec_ready, video_dir, tmp_path):
    videos = discover_videos(video_dir, folder_fps=VIDEO_FPS)
    pyav = FrameStore.build(videos, 2.0, 16, tmp_path / "cache")
    ours = FrameStore.build(videos, 2.0, 16, tmp_path / "cache", decoding=TORCHCODEC)
    assert ours.lengths == pyav.lengths and len(list((tmp_path / "cache").glob("*.npy"))) == 2 * len(videos)
    for i, n in enumerate(pyav.lengths):
        diff = np.abs(ours.frames(i, range(n)).astype(int) - pyav.frames(i, range(n)).astype(int))
        assert diff.mean() < 4  # resized on decode: within decoder rounding


def test_lmdb_records_the_decoder_and_refuses_another(torchcodec_ready, video_dir, tmp_path):
    videos = discover_videos(video_dir, folder_fps=VIDEO_FPS)
    out = write_frames_lmdb(videos, tmp_path / "tc.lmdb", VIDEO_FPS, 36, decoding=TORCHCODEC)
    assert json.loads((out / SIDECAR_NAME).read_text())["layout"]["decoder"] == "torchcodec"
    pyav = write_frames_lmdb(videos, tmp_path / "pyav.lmdb", VIDEO_FPS, 36)
    assert json.loads((pyav / SIDECAR_NAME).read_text())["layout"]["decoder"] == "pyav"
    a, b = LmdbFrameStore.open(out, fps=VIDEO_FPS), LmdbFrameStore.open(pyav, fps=VIDEO_FPS)
    assert a.lengths == b.lengths
    assert np.abs(a.frames(0, [0, 1]).astype(int) - b.frames(0, [0, 1]).astype(int)).mean() < 8
    with pytest.raises(DataError, match="decoder: 'pyav' there, 'torchcodec' now"):
        write_frames_lmdb(videos, pyav, VIDEO_FPS, 36, decoding=TORCHCODEC)


def test_lmdb_sidecars_without_a_decoder_read_as_pyav(video_dir, tmp_path):
    videos = discover_videos(video_dir, folder_fps=VIDEO_FPS)
    out = write_frames_lmdb(videos, tmp_path / "old.lmdb", VIDEO_FPS, 36)
    sidecar = json.loads((out / SIDECAR_NAME).read_text())
    del sidecar["layout"]["decoder"]  # as written before decoders were recorded
    (out / SIDECAR_NAME).write_text(json.dumps(sidecar))
    assert write_frames_lmdb(videos, out, VIDEO_FPS, 36) == out  # up to date, not refused


def test_train_without_torchcodec_is_one_line(monkeypatch, video_dir, tmp_path):
    monkeypatch.setitem(sys.modules, "torchcodec", None)
    args = ["train", "--data", str(video_dir), "--out", str(tmp_path / "run"), "--decoder", "torchcodec"]
    result = CliRunner().invoke(app, [*args, "--preset", "tiny-cpu"])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert 'pip install "plstitch[torchcodec]"' in lines[0] and not Path(tmp_path / "run").exists()

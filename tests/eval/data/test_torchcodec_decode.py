"""TorchCodec beside PyAV: the same frames (indices and times) on the real MP4s of the data tests (25 fps,
29.97 fps, variable frame rate, B-frames), pixels within decoder rounding; `auto` and the one-line errors
when TorchCodec or FFmpeg is missing; files TorchCodec cannot open or number go to PyAV.

The frame choice is also checked against the documented rule written out here (`test_video._expected_samples`
on every frame's time), each frame read back from its pixels (`media.decode_index`).
"""

from __future__ import annotations

import sys
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from plstitch_eval.data import decoders, pyav_cuda, torchcodec_decode, video
from plstitch_eval.data.decoders import Decoding, check_decoder_options, recorded_decoder, resolve_decoding
from plstitch_eval.data.video import ClipSampling
from plstitch_eval.errors import ConfigError, DecodeError
from tests.eval.data.media import decode_index, write_index_frames, write_index_video
from tests.eval.data.test_video import _expected_samples

pytestmark = pytest.mark.usefixtures("fresh_torchcodec_detection")  # some tests hide TorchCodec

TORCHCODEC = Decoding("torchcodec")
VFR_MS = [0, 40, 80, 120, 500, 540, 1000, 1040, 1080, 2600, 2640, 3000, 3100, 4900]
CASES = {  # name -> write_index_video arguments: the real-MP4 kinds the PyAV tests build
    "25fps": {"n_frames": 80, "fps": 25},
    "29.97fps": {"n_frames": 100, "fps": Fraction(30000, 1001)},
    "vfr": {"n_frames": len(VFR_MS), "pts_ms": VFR_MS},
    "bframes": {"n_frames": 90, "bframes": 3},
    "bframes-vfr": {"n_frames": len(VFR_MS), "pts_ms": VFR_MS, "bframes": 3},
}
RESIZE_TOLERANCE = 12  # grey levels: bilinear in RGB (TorchCodec) vs swscale scaling in YUV (PyAV; flat
# areas come out 2 levels apart, edges more)


@pytest.fixture
def no_torchcodec(monkeypatch: pytest.MonkeyPatch) -> None:
    """TorchCodec not importable (as on a default install)."""
    monkeypatch.setitem(sys.modules, "torchcodec", None)
    torchcodec_decode.unavailable_reason.cache_clear()


@pytest.fixture
def torchcodec_importable() -> None:
    """Skip (with the reason) unless `import torchcodec` works: a test that fakes TorchCodec's FFmpeg check or
    its frame timeline still opens its decoder classes (the optional `torchcodec` extra)."""
    pytest.importorskip("torchcodec", reason='needs the optional extra: pip install "plstitch[torchcodec]"')


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tc-videos")
    return {
        name: write_index_video(folder / f"{name}.mp4", size=(64, 48), **kw) for name, kw in CASES.items()
    }


def _all_times(path: Path) -> list[float]:
    return [f.time for f in video.read_frames(path)]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fps", [None, 1.0, 2.0, 0.5])
def test_same_frames_and_pixels_as_pyav(torchcodec_ready, videos, case, fps):
    path = videos[case]
    pyav = list(video.read_frames(path, fps))
    ours = list(decoders.read_frames(path, fps, decoding=TORCHCODEC))
    assert [(f.index, f.time) for f in ours] == [(f.index, f.time) for f in pyav]
    for a, b in zip(ours, pyav, strict=True):
        assert a.image.dtype == np.uint8 and a.image.shape == (48, 64, 3)
        np.testing.assert_array_equal(a.image, b.image)  # both convert with FFmpeg's swscale
    times = _all_times(path)
    expected = _expected_samples(times, fps) if fps is not None else list(range(len(times)))
    assert [decode_index(f.image) for f in ours] == expected


@pytest.mark.parametrize("case", ["25fps", "bframes-vfr"])
def test_resize_on_decode_within_rounding(torchcodec_ready, videos, case):
    pyav = list(video.read_frames(videos[case], 2.0, size=24))
    ours = list(decoders.read_frames(videos[case], 2.0, size=24, decoding=TORCHCODEC))
    assert [f.time for f in ours] == [f.time for f in pyav]
    for a, b in zip(ours, pyav, strict=True):
        assert a.image.shape == b.image.shape == (24, 32, 3)
        diff = np.abs(a.image.astype(int) - b.image.astype(int))
        assert diff.max() <= RESIZE_TOLERANCE and diff.mean() <= 3.0
        assert decode_index(a.image) == decode_index(b.image)


@pytest.mark.parametrize("case", ["29.97fps", "bframes-vfr"])
def test_clip_windows_equal_pyav(torchcodec_ready, videos, case):
    clip = ClipSampling(num_frames=5, frame_stride=3)
    pyav = list(video.read_clips(videos[case], 2.0, clip))
    ours = list(decoders.read_clips(videos[case], 2.0, clip, decoding=TORCHCODEC))
    assert [(w.index, w.time, w.frame_times) for w in ours] == [
        (w.index, w.time, w.frame_times) for w in pyav
    ]
    for a, b in zip(ours, pyav, strict=True):
        for x, y in zip(a.frames, b.frames, strict=True):
            np.testing.assert_array_equal(x, y)


def test_batches_are_channels_first_on_the_decoding_device(torchcodec_ready, videos):
    batches = list(decoders.frame_batches(videos["bframes"], 1.0, decoding=TORCHCODEC))
    times = [t for ts, _ in batches for t in ts]
    images = torch.cat([images for _, images in batches])
    assert times == [f.time for f in video.read_frames(videos["bframes"], 1.0)]
    assert images.dtype == torch.uint8 and tuple(images.shape) == (len(times), 3, 48, 64)
    assert [decode_index(im.permute(1, 2, 0).numpy()) for im in images] == [0, 25, 50, 75]


def test_batches_hold_bounded_memory(torchcodec_ready, videos, monkeypatch):
    monkeypatch.setattr(torchcodec_decode, "BATCH_BYTES", 3 * 64 * 48 * 3)  # three frames
    sizes = [len(ts) for ts, _ in decoders.frame_batches(videos["25fps"], None, decoding=TORCHCODEC)]
    assert max(sizes) == 3 and sum(sizes) == 80


def test_corrupt_and_truncated_files_name_the_file(torchcodec_ready, tmp_path):
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all" * 50)
    with pytest.raises(DecodeError, match="junk.mp4"):
        list(decoders.read_frames(junk, 1.0, decoding=TORCHCODEC))
    whole = write_index_video(tmp_path / "fast.mp4", n_frames=200, faststart=True).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DecodeError, match=r"cut\.mp4: decoded \d+ of 200 frames"):
        list(decoders.read_frames(cut, 1.0, decoding=TORCHCODEC))


def test_frame_folders_keep_their_path(tmp_path):
    folder = write_index_frames(tmp_path / "frames", 6, pattern="{}.png")
    frames = list(decoders.read_frames(folder, 1.0, folder_fps=2, decoding=TORCHCODEC))
    assert [decode_index(f.image) for f in frames] == [0, 2, 4]


# ----------------------------------------------------------------------------------- fallbacks and errors


def test_auto_falls_back_to_pyav_without_torchcodec(no_torchcodec, videos, capsys):
    decoding = resolve_decoding("auto", "auto", "cpu", videos["25fps"])
    assert decoding == Decoding("pyav", "cpu", fallback=True)
    decoders.announce_decoding("auto", decoding)
    line = capsys.readouterr().err.strip()
    assert line.startswith("decoder: auto chose pyav on cpu") and 'pip install "plstitch[torchcodec]"' in line
    frames = list(decoders.read_frames(videos["25fps"], 1.0, decoding=decoding))
    assert [decode_index(f.image) for f in frames] == [0, 25, 50, 75]
    nvdec = pyav_cuda.nvdec_unavailable_reason() is None  # PyAV keeps a CUDA device only with NVDEC
    assert resolve_decoding("auto", "cuda", "cpu").device == ("cuda" if nvdec else "cpu")


def test_explicit_torchcodec_without_it_is_one_line_with_the_fix(no_torchcodec):
    with pytest.raises(ConfigError) as info:
        check_decoder_options("torchcodec")
    message = str(info.value)
    assert "\n" not in message and message.startswith("--decoder torchcodec: TorchCodec is not installed")
    assert 'pip install "plstitch[torchcodec]"' in message and "apt-get install ffmpeg" in message


def test_missing_ffmpeg_is_one_line_with_the_fix(monkeypatch):
    import importlib

    real = importlib.import_module
    fake = types.SimpleNamespace(ffmpeg_major_version=None)  # what TorchCodec is when no FFmpeg loads
    monkeypatch.setattr(importlib, "import_module", lambda name: fake if name == "torchcodec" else real(name))
    with pytest.raises(ConfigError) as info:
        check_decoder_options("torchcodec")
    message = str(info.value)
    assert "\n" not in message and "finds no FFmpeg libraries" in message
    assert "apt-get install ffmpeg" in message and "brew install ffmpeg" in message


def test_a_file_torchcodec_cannot_open_goes_to_pyav_only_under_auto(videos, monkeypatch):
    def refuse(*args, **kwargs):
        raise DecodeError("x.mp4: TorchCodec cannot open the video")

    monkeypatch.setattr(torchcodec_decode, "TorchcodecVideo", refuse)
    path = videos["25fps"]
    auto = list(decoders.read_frames(path, 1.0, decoding=Decoding("torchcodec", fallback=True)))
    assert [decode_index(f.image) for f in auto] == [0, 25, 50, 75]
    with pytest.raises(DecodeError, match="cannot open"):
        decoders.read_frames(path, 1.0, decoding=TORCHCODEC)


def test_frames_torchcodec_cannot_number_go_to_pyav_with_a_warning(
    torchcodec_importable, videos, monkeypatch, caplog
):
    def unnumbered(path):
        raise torchcodec_decode.UnnumberedFrames(f"{path}: its packets carry no (or repeated) timestamps")

    monkeypatch.setattr(torchcodec_decode, "frame_timeline", unnumbered)
    monkeypatch.setattr(torchcodec_decode, "require_torchcodec", lambda *a: None)
    frames = list(decoders.read_frames(videos["vfr"], 1.0, decoding=TORCHCODEC))
    assert [decode_index(f.image) for f in frames] == _expected_samples(_all_times(videos["vfr"]), 1.0)
    assert "decoding it with PyAV instead" in caplog.text and "vfr.mp4" in caplog.text


@pytest.mark.parametrize(
    ("decoder", "device", "match"),
    [
        ("ffmpeg", "auto", "--decoder must be one of pyav, torchcodec, auto"),
        ("pyav", "tpu", "--decode-device must be auto, cpu, cuda or cuda:N"),
    ],
)
def test_bad_settings_are_one_line(decoder, device, match):
    with pytest.raises(ConfigError, match=match):
        check_decoder_options(decoder, device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_cuda_decoding_without_cuda_is_refused(torchcodec_ready):
    with pytest.raises(ConfigError, match="CUDA is not available"):
        resolve_decoding("torchcodec", "cuda", "cpu")


def test_the_store_record_names_only_other_decoders():
    assert Decoding().record() == {} and recorded_decoder({"crop_mode": "center"}) == "pyav"
    assert (
        TORCHCODEC.record() == {"decoder": "torchcodec"}
        and recorded_decoder(TORCHCODEC.record()) == "torchcodec"
    )
    assert Decoding("torchcodec", "cuda:1").record() == {"decoder": "torchcodec", "decode_device": "cuda"}
    assert Decoding("pyav", "cuda:0").record() == {"decode_device": "cuda"}  # NVDEC through PyAV
    if pyav_cuda.nvdec_unavailable_reason() is not None:  # no NVDEC here: PyAV decodes on the CPU
        assert resolve_decoding("pyav", "auto", "cuda:0") == Decoding()

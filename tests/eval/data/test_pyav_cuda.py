"""PyAV on NVDEC (`plstitch_eval.data.pyav_cuda`) beside PyAV on the CPU.

Everywhere: `Decoding("pyav", "cuda")` and how `--decode-device` resolves to it (CUDA and NVDEC faked where
the test says so), what a store records, the one-line refusals without CUDA or without NVDEC in the PyAV
build, the NV12/P010 -> RGB conversion against swscale (PyAV's own `to_ndarray(format="rgb24")`) on planes
made with numpy, the batching and frame choice of the reader fed by the CPU decoder, and the one-line CPU
fallback for a stream NVDEC refuses (at opening or mid-stream).

Where CUDA and PyAV's NVDEC are (skipped with the reason elsewhere): NVDEC's frame indices and times equal
the CPU path's on the 25 fps, 29.97 fps, VFR and B-frame MP4s, pixels within `PIXEL_TOLERANCE` (8-bit
H.264 is expected bit-identical), a resize within `RESIZE_TOLERANCE`, a stream without an NVDEC decoder
falls back in one line, and `--decode-device auto` picks NVDEC.
"""

from __future__ import annotations

import logging
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from plstitch_eval.data import decoders, pyav_cuda, video
from plstitch_eval.data.decoders import Decoding, check_decoder_options, recorded_decoder, resolve_decoding
from plstitch_eval.errors import ConfigError, DecodeError
from tests.eval.data.media import decode_index, index_image, write_index_video
from tests.eval.data.test_video import _expected_samples
from tests.media import write_video

VFR_MS = [0, 40, 80, 120, 500, 540, 1000, 1040, 1080, 2600, 2640, 3000, 3100, 4900]
CASES = {  # name -> (frames, fps, pts_ms, B-frames): the real-MP4 kinds the PyAV tests build
    "25fps": (80, 25, None, 0),
    "29.97fps": (100, Fraction(30000, 1001), None, 0),
    "vfr": (len(VFR_MS), 25, VFR_MS, 0),
    "bframes": (90, 25, None, 3),
    "bframes-vfr": (len(VFR_MS), 25, VFR_MS, 3),
}
SIZE = (128, 96)  # width, height: above NVDEC's H.264 minimum (48 x 16)
PIXEL_TOLERANCE = 2  # grey levels, NVDEC against the CPU path at full size (8-bit H.264: expected 0)
RESIZE_TOLERANCE = 12  # grey levels: bilinear in RGB on the GPU vs swscale scaling in YUV (flat areas ~2)
CPU = torch.device("cpu")
NVDEC_MISSING = pyav_cuda.nvdec_unavailable_reason()


def _write(path: Path, n_frames: int, fps: int | Fraction, pts_ms: list[int] | None, bframes: int) -> Path:
    """An index video NVDEC can decode: H.264 High profile 4:2:0 (qp 10; x264's lossless mode would be the
    High 4:4:4 Predictive profile), B-frames as `media.write_index_video` makes them."""
    options = {"qp": "10", "preset": "veryfast", "bframes": str(bframes), "threads": "1"}
    if bframes:
        options.update({"b-pyramid": "normal", "b-adapt": "0"})
    return write_video(
        path, lambda i: index_image(i, *SIZE), n_frames, fps=fps, options=options, pts_ms=pts_ms
    )


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("nvdec-videos")
    return {name: _write(folder / f"{name}.mp4", *case) for name, case in CASES.items()}


def _cpu_frames(path: Path, fps: float | None, size: int | None = None) -> list[video.DecodedFrame]:
    return list(video.read_frames(path, fps, size))


def _unbatched(batches) -> tuple[list[float], list[np.ndarray]]:
    """(times, HWC uint8 host images) of (times, [n, 3, H, W]) batches."""
    times: list[float] = []
    images: list[np.ndarray] = []
    for batch_times, batch in batches:
        assert batch.dtype == torch.uint8 and batch.dim() == 4 and batch.shape[1] == 3
        times += batch_times
        images += list(batch.permute(0, 2, 3, 1).cpu().numpy())
    return times, images


def _nvdec_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "NVDEC cannot decode" in r.getMessage()]


@pytest.fixture
def fake_nvdec(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA 'available' and a PyAV 'with' NVDEC, for the settings logic alone (nothing decodes)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(pyav_cuda, "hwdevices_available", lambda: ["cuda", "vaapi"])


# ------------------------------------------------------------------------------------------------ settings


def test_pyav_on_cuda_is_a_decoding_recorded_as_nvdec():
    check_decoder_options("pyav", "cuda")
    check_decoder_options("pyav", "cuda:1")
    nvdec = Decoding("pyav", "cuda:1")
    assert nvdec.on_cuda and nvdec.describe() == "pyav on cuda:1" and nvdec.on_cpu() == Decoding()
    assert nvdec.record() == {"decode_device": "cuda"} and recorded_decoder(nvdec.record()) == "pyav"
    assert Decoding().record() == {} and Decoding("pyav", "cpu").record() == {}


def test_without_cuda_nothing_changes(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_decoding("pyav", "auto", "cuda:0") == Decoding()
    assert resolve_decoding("pyav", "auto", "cpu") == Decoding()
    with pytest.raises(ConfigError) as info:
        resolve_decoding("pyav", "cuda", "cpu")
    assert str(info.value) == "--decode-device cuda: CUDA is not available here; use --decode-device cpu."


def test_a_pyav_without_nvdec_is_refused_in_one_line_with_the_fix(fake_nvdec, monkeypatch):
    monkeypatch.setattr(pyav_cuda, "hwdevices_available", lambda: ["vaapi"])
    with pytest.raises(ConfigError) as info:
        resolve_decoding("pyav", "cuda:0", "cuda:0")
    message = str(info.value)
    assert "\n" not in message and message.startswith("--decode-device cuda:0: this PyAV (av ")
    assert "has no NVDEC" in message and "pip install" in message and "--decode-device cpu" in message
    assert resolve_decoding("pyav", "auto", "cuda:0") == Decoding()  # auto: the CPU, as before


def test_auto_picks_nvdec_when_it_decodes_the_first_video(fake_nvdec, monkeypatch, tmp_path):
    sample = write_index_video(tmp_path / "v.mp4", n_frames=3)
    tried = []

    def decodes(path, device):
        tried.append((Path(path), str(device)))
        return decodes.answer

    monkeypatch.setattr(pyav_cuda, "nvdec_decodes", decodes)
    decodes.answer = True
    assert resolve_decoding("pyav", "auto", "cuda:0", sample) == Decoding("pyav", "cuda:0")
    assert tried == [(sample, "cuda:0")]
    assert resolve_decoding("pyav", "auto", "cpu", sample) == Decoding()  # the model's device is the CPU
    assert resolve_decoding("pyav", "auto", "cuda:0", tmp_path) == Decoding("pyav", "cuda:0")  # a folder
    decodes.answer = False
    assert resolve_decoding("pyav", "auto", "cuda:0", sample) == Decoding()
    assert resolve_decoding("pyav", "cuda", "cpu", sample) == Decoding("pyav", "cuda")  # explicit: no probe
    monkeypatch.setattr(decoders, "_torchcodec_opens", lambda sample: False)  # auto falls back to PyAV
    assert resolve_decoding("auto", "cuda", "cpu", sample) == Decoding("pyav", "cpu", fallback=True)
    decodes.answer = True
    assert resolve_decoding("auto", "auto", "cuda", sample) == Decoding("pyav", "cuda", fallback=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_the_reader_refuses_cuda_without_it(videos):
    with pytest.raises(ConfigError) as info:
        pyav_cuda.decode_batches(videos["25fps"], 1.0, device="cuda")
    message = str(info.value)
    assert (
        "\n" not in message and "CUDA is not available here" in message and "--decode-device cpu" in message
    )
    with pytest.raises(ConfigError, match="CUDA is not available here"):
        decoders.frame_batches(videos["25fps"], 1.0, decoding=Decoding("pyav", "cuda"))
    with pytest.raises(ConfigError, match="NVDEC decodes onto a CUDA device"):
        pyav_cuda.decode_batches(videos["25fps"], 1.0, device="cpu")


def test_host_readers_stay_on_the_cpu_path(videos):
    """`read_frames` / `read_clips` with PyAV on CUDA decode on the CPU, as before (host frames)."""
    path = videos["bframes"]
    nvdec = Decoding("pyav", "cuda")
    ours = list(decoders.read_frames(path, 1.0, decoding=nvdec))
    assert [(f.index, f.time) for f in ours] == [(f.index, f.time) for f in _cpu_frames(path, 1.0)]


# --------------------------------------------------------------------------------------- colour conversion


def _planes(frame: av.VideoFrame) -> list[np.ndarray]:
    """The Y, U, V planes of a yuv420p frame (line padding cut)."""
    out = []
    for plane in frame.planes:
        rows = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)
        out.append(rows[:, : plane.width].copy())
    return out


@pytest.fixture(scope="module")
def noisy_frame(tmp_path_factory: pytest.TempPathFactory) -> av.VideoFrame:
    """A CPU-decoded yuv420p frame of colourful noise (chroma changes at every sample)."""
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (96, 128, 3), dtype=np.uint8) for _ in range(2)]
    path = write_video(tmp_path_factory.mktemp("noise") / "noise.mp4", images, options={"qp": "4"})
    with av.open(str(path)) as container:
        frame = next(container.decode(video=0))
    assert frame.format.name == "yuv420p"
    return frame


@pytest.mark.parametrize(
    ("colorspace", "color_range"),
    [(2, 0), (1, 1), (5, 2), (6, 1), (9, 1), (7, 1)],  # unspecified, BT.709, BT.601 full, 170M, 2020, 240M
)
def test_nv12_to_rgb_is_swscales_conversion(noisy_frame, colorspace, color_range):
    """NV12 planes made with numpy from a decoded frame convert to PyAV's own rgb24 of that frame (swscale:
    bit-identical on x86; 1 level allowed for other builds)."""
    noisy_frame.colorspace, noisy_frame.color_range = colorspace, color_range
    expected = noisy_frame.to_ndarray(format="rgb24").astype(int)
    y, u, v = _planes(noisy_frame)
    nv12 = torch.from_numpy(y), torch.from_numpy(np.stack([u, v], axis=-1))
    ours = pyav_cuda.yuv_to_rgb(*nv12, colorspace, color_range).permute(1, 2, 0).numpy().astype(int)
    assert ours.shape == expected.shape and np.abs(ours - expected).max() <= 1
    # the same through DLPack, as NVDEC frames go: PyAV's own NV12 frame of it, on the host
    through = pyav_cuda.frame_to_rgb(noisy_frame.reformat(format="nv12"), CPU, Path("x.mp4"))
    assert np.abs(through.permute(1, 2, 0).numpy().astype(int) - expected).max() <= 1
    # 16-bit planes (P010's layout: samples in the high bits) in floating point: rounded where swscale's
    # 8-bit path truncates, so about one level above it on average
    p010 = tuple(torch.from_numpy(p.astype(np.uint16) << 8) for p in (y, np.stack([u, v], axis=-1)))
    wide = pyav_cuda.yuv_to_rgb(*p010, colorspace, color_range).permute(1, 2, 0).numpy().astype(int)
    assert np.abs(wide - expected).max() <= 3 and np.abs(wide - expected).mean() <= 1.5
    noisy_frame.colorspace, noisy_frame.color_range = 2, 0


def test_frames_dlpack_cannot_export_are_converted_by_swscale(noisy_frame):
    frame = noisy_frame.reformat(format="yuv444p")
    ours = pyav_cuda.frame_to_rgb(frame, CPU, Path("x.mp4"))
    assert ours.shape == (3, 96, 128)
    np.testing.assert_array_equal(ours.permute(1, 2, 0).numpy(), frame.to_ndarray(format="rgb24"))


# ---------------------------------------------------------------------------------- the reader, on the CPU


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fps", [None, 1.0, 0.5])
def test_the_reader_chooses_the_cpu_paths_frames(videos, case, fps, monkeypatch):
    """The NVDEC reader's loop fed by the CPU decoder (`open_container`): the CPU path's frames, batched."""
    monkeypatch.setattr(pyav_cuda, "MAX_BATCH", 3)
    path = videos[case]
    times, images = _unbatched(pyav_cuda._batches(path, fps, None, CPU, 0, video.open_video))
    cpu = _cpu_frames(path, fps)
    assert times == [f.time for f in cpu]
    for ours, theirs in zip(images, cpu, strict=True):
        np.testing.assert_array_equal(ours, theirs.image)
    every = [f.time for f in _cpu_frames(path, None)]
    expected = _expected_samples(every, fps) if fps is not None else list(range(len(every)))
    assert [decode_index(image) for image in images] == expected


def test_the_reader_resizes_the_batch(videos):
    path = videos["bframes-vfr"]
    times, images = _unbatched(pyav_cuda._batches(path, 2.0, 24, CPU, 0, video.open_video))
    cpu = _cpu_frames(path, 2.0, 24)
    assert times == [f.time for f in cpu]
    for ours, theirs in zip(images, cpu, strict=True):
        assert ours.shape == theirs.image.shape == (24, 32, 3)
        diff = np.abs(ours.astype(int) - theirs.image.astype(int))
        assert diff.max() <= RESIZE_TOLERANCE and diff.mean() <= 3.0
        assert decode_index(ours) == decode_index(theirs.image)


def test_a_stream_nvdec_refuses_is_decoded_on_the_cpu_with_one_line(videos, caplog):
    def refuse(path):
        raise pyav_cuda.NvdecRefused(f"{path}: NVDEC has no decoder for its ffv1 stream")

    path = videos["bframes"]
    with caplog.at_level(logging.WARNING, logger="plstitch"):
        times, images = _unbatched(pyav_cuda._batches(path, 1.0, None, CPU, 0, refuse))
    cpu = _cpu_frames(path, 1.0)
    assert times == [f.time for f in cpu] and [decode_index(i) for i in images] == [0, 25, 50, 75]
    (line,) = _nvdec_warnings(caplog)
    why = "NVDEC has no decoder for its ffv1 stream"
    assert line == f"{path}: NVDEC cannot decode it ({why}); decoding it on the CPU"


def test_a_failure_mid_stream_resumes_on_the_cpu_after_the_frames_given(videos, caplog, monkeypatch):
    monkeypatch.setattr(pyav_cuda, "MAX_BATCH", 2)
    real = pyav_cuda.frame_to_rgb
    calls = []

    def fails_at_the_fifth(frame, device, path):
        calls.append(frame.time)
        if len(calls) == 5:
            raise DecodeError(f"{path}: decoding failed after 40 frames (boom); the file is corrupt")
        return real(frame, device, path)

    monkeypatch.setattr(pyav_cuda, "frame_to_rgb", fails_at_the_fifth)
    path = videos["29.97fps"]
    with caplog.at_level(logging.WARNING, logger="plstitch"):
        times, images = _unbatched(pyav_cuda._batches(path, 8.0, None, CPU, 0, video.open_video))
    cpu = _cpu_frames(path, 8.0)
    assert len(cpu) > 6 and times == [f.time for f in cpu]
    for ours, theirs in zip(images, cpu, strict=True):
        np.testing.assert_array_equal(ours, theirs.image)
    (line,) = _nvdec_warnings(caplog)
    assert line.startswith(f"{path}: NVDEC cannot decode it (") and line.endswith("from its sampled frame 4")


def test_a_truncated_file_is_an_error_not_a_fallback(tmp_path, caplog):
    whole = write_index_video(tmp_path / "fast.mp4", n_frames=200, faststart=True).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole[: len(whole) // 2])
    with caplog.at_level(logging.WARNING, logger="plstitch"), pytest.raises(DecodeError, match=r"cut\.mp4"):
        _unbatched(pyav_cuda._batches(cut, 1.0, None, CPU, 0, video.open_video))
    assert not _nvdec_warnings(caplog)


# ------------------------------------------------------------------------------------------ on NVDEC itself

needs_nvdec = pytest.mark.skipif(
    NVDEC_MISSING is not None, reason=f"needs CUDA and PyAV's NVDEC: {NVDEC_MISSING}"
)


@pytest.fixture(scope="module")
def nvdec_works(videos) -> None:
    if NVDEC_MISSING is not None:
        pytest.skip(f"needs CUDA and PyAV's NVDEC: {NVDEC_MISSING}")
    if not pyav_cuda.nvdec_decodes(videos["25fps"]):
        pytest.skip("NVDEC does not decode H.264 here (a driver without libnvcuvid?)")


@needs_nvdec
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fps", [None, 1.0, 2.0, 0.5])
def test_nvdec_chooses_the_cpu_paths_frames(nvdec_works, videos, case, fps, caplog):
    path = videos[case]
    with caplog.at_level(logging.WARNING, logger="plstitch"):
        batches = list(decoders.frame_batches(path, fps, decoding=Decoding("pyav", "cuda")))
    assert not _nvdec_warnings(caplog)  # NVDEC decoded it: no fallback
    assert all(images.device.type == "cuda" for _, images in batches)
    times, images = _unbatched(batches)
    cpu = _cpu_frames(path, fps)
    assert times == [f.time for f in cpu]
    every = [f.time for f in _cpu_frames(path, None)]
    expected = _expected_samples(every, fps) if fps is not None else list(range(len(every)))
    assert [decode_index(image) for image in images] == expected
    diffs = [
        np.abs(ours.astype(int) - theirs.image.astype(int)) for ours, theirs in zip(images, cpu, strict=True)
    ]
    assert max(d.max() for d in diffs) <= PIXEL_TOLERANCE


@needs_nvdec
def test_nvdec_resize_on_the_gpu(nvdec_works, videos):
    path = videos["bframes-vfr"]
    times, images = _unbatched(pyav_cuda.decode_batches(path, 2.0, 48, device="cuda"))
    cpu = _cpu_frames(path, 2.0, 48)
    assert times == [f.time for f in cpu]
    for ours, theirs in zip(images, cpu, strict=True):
        assert ours.shape == theirs.image.shape == (48, 64, 3)
        diff = np.abs(ours.astype(int) - theirs.image.astype(int))
        assert diff.max() <= RESIZE_TOLERANCE and diff.mean() <= 3.0


@needs_nvdec
def test_nvdec_falls_back_in_one_line_for_a_codec_it_lacks(nvdec_works, tmp_path, caplog):
    path = write_video(tmp_path / "ffv1.mkv", lambda i: index_image(i, *SIZE), 60, codec="ffv1")
    with caplog.at_level(logging.WARNING, logger="plstitch"):
        times, images = _unbatched(pyav_cuda.decode_batches(path, 1.0, device="cuda"))
    assert times == [f.time for f in _cpu_frames(path, 1.0)] and [decode_index(i) for i in images] == [
        0,
        25,
        50,
    ]
    (line,) = _nvdec_warnings(caplog)
    assert line.startswith(f"{path}: NVDEC cannot decode it (") and "\n" not in line
    assert not pyav_cuda.nvdec_decodes(path)


@needs_nvdec
def test_auto_chooses_nvdec_on_a_cuda_model(nvdec_works, videos):
    assert resolve_decoding("pyav", "auto", "cuda", videos["25fps"]) == Decoding("pyav", "cuda")
    assert resolve_decoding("pyav", "cuda", "cpu", videos["25fps"]) == Decoding("pyav", "cuda")


@needs_nvdec
def test_nvdec_on_x264_lossless_keeps_the_frame_choice(nvdec_works, tmp_path):
    """x264's lossless mode (High 4:4:4 Predictive profile, 4:2:0): NVDEC decodes it or the CPU does."""
    path = write_index_video(tmp_path / "lossless.mp4", n_frames=60, size=SIZE, bframes=0)
    times, images = _unbatched(pyav_cuda.decode_batches(path, 1.0, device="cuda"))
    assert times == [f.time for f in _cpu_frames(path, 1.0)] and [decode_index(i) for i in images] == [
        0,
        25,
        50,
    ]

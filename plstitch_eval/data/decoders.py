"""Video decoders by name - `pyav` (the default install), `torchcodec` (an extra) - and `auto` between them.

`READERS` maps a decoder's name to its reader; `read_frames`, `read_clips` and `frame_batches` here send a
video file to the reader its `Decoding` names. Frame folders take `plstitch_eval.data.video`'s folder path
whatever the decoder. `resolve_decoding` turns the `--decoder` and `--decode-device` settings into what a run
uses, once before its first video: `auto` is TorchCodec when it loads and opens the run's first video file,
else PyAV. Both decode on the CPU or with NVDEC on a CUDA device: PyAV through its wheel's own FFmpeg
(`plstitch_eval.data.pyav_cuda`), TorchCodec through the system's. The decoding device `auto` is the model's
device when the model is on CUDA and the decoder can use NVDEC there (TorchCodec: assumed; PyAV: CUDA, a
PyAV built with the `cuda` hwdevice, and NVDEC decoding the run's first video), else the CPU. Under `auto`, a
file TorchCodec cannot open is read by PyAV; a file whose frames TorchCodec cannot number as PyAV's path does
(`torchcodec_decode.UnnumberedFrames`) is read by PyAV with a warning. Only `frame_batches` decodes on the
GPU; `read_frames` and `read_clips` give host frames, decoded on the CPU.

A feature store records the decoder in its preprocessing (`Decoding.record`; nothing for PyAV on the CPU, so
stores made before decoders were recorded read as PyAV's: `recorded_decoder`; NVDEC as
`decode_device: cuda`, since its pixels may differ).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from rich.text import Text

from plstitch_eval.data import pyav_cuda, torchcodec_decode, video
from plstitch_eval.data.video import ClipSampling, DecodedClip, DecodedFrame, assemble_clips, check_sampling
from plstitch_eval.errors import ConfigError, DecodeError
from plstitch_eval.utils.console import console, logger

DECODERS = ("pyav", "torchcodec")
DECODER_CHOICES = (*DECODERS, "auto")
DECODER_FIELDS = ("decoder", "decode_device")  # the keys `Decoding.record` may add to a preprocessing record

T = TypeVar("T")
Frames = Iterator[tuple[float, Callable[[], np.ndarray]]]


@dataclass(frozen=True)
class VideoReader:
    """One decoder's entry points for a video file (the values of `READERS`).

    `frames(path, fps, size, threads)`: sampled `DecodedFrame`s (uint8 HWC on the host);
    `clip_frames(path, size, threads)`: (native fps, (time, loader) of every frame) for `assemble_clips`;
    `batches(path, fps, size, threads, device)`: (times, uint8 [n, 3, H, W] on `device`) of sampled frames.
    """

    frames: Callable[[Path, float | None, int | None, int], Iterator[DecodedFrame]]
    clip_frames: Callable[[Path, int | None, int], tuple[float, Frames]]
    batches: Callable[[Path, float | None, int | None, int, str], Iterator[tuple[list[float], torch.Tensor]]]


def _pyav_clip_frames(path: Path, size: int | None, threads: int) -> tuple[float, Frames]:
    return video.every_frame(path, size, threads=threads)


def _pyav_batches(
    path: Path, fps: float | None, size: int | None, threads: int, device: str
) -> Iterator[tuple[list[float], torch.Tensor]]:
    """PyAV's sampled frames on `device`: NVDEC batches on CUDA (`pyav_cuda.decode_batches`), else host frames
    one at a time - also on CUDA with a PyAV built without NVDEC (a file `auto` could not give TorchCodec)."""
    if torch.device(device).type != "cuda":
        return _pyav_host_batches(path, fps, size, threads, device)
    if torch.cuda.is_available() and not pyav_cuda.pyav_has_nvdec():
        return _pyav_host_batches(path, fps, size, threads, device)
    return pyav_cuda.decode_batches(path, fps, size, device=device, threads=threads)  # refuses without CUDA


def _pyav_host_batches(
    path: Path, fps: float | None, size: int | None, threads: int, device: str
) -> Iterator[tuple[list[float], torch.Tensor]]:
    """PyAV's CPU frames one at a time as [1, 3, H, W] on `device`."""
    for frame in video._read_video(path, fps, size, threads):
        yield [frame.time], torch.from_numpy(frame.image).permute(2, 0, 1)[None].to(device)


def _torchcodec_frames(
    path: Path, fps: float | None, size: int | None, threads: int
) -> Iterator[DecodedFrame]:
    return torchcodec_decode.read_frames(path, fps, size, threads=threads)


def _torchcodec_clip_frames(path: Path, size: int | None, threads: int) -> tuple[float, Frames]:
    return torchcodec_decode.video_frames(path, size, threads=threads)


def _torchcodec_batches(
    path: Path, fps: float | None, size: int | None, threads: int, device: str
) -> Iterator[tuple[list[float], torch.Tensor]]:
    return torchcodec_decode.TorchcodecVideo(path, device=device, threads=threads, size=size).batches(fps)


READERS: dict[str, VideoReader] = {
    "pyav": VideoReader(video._read_video, _pyav_clip_frames, _pyav_batches),
    "torchcodec": VideoReader(_torchcodec_frames, _torchcodec_clip_frames, _torchcodec_batches),
}


# ------------------------------------------------------------------------------------------------ settings


def _parse_device(device: str | torch.device) -> torch.device:
    """A cpu or cuda device (ConfigError naming --decode-device otherwise)."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"--decode-device must be auto, cpu, cuda or cuda:N, got {device!r}.") from exc
    if parsed.type not in ("cpu", "cuda"):
        raise ConfigError(f"--decode-device must be auto, cpu, cuda or cuda:N, got {device!r}.")
    return parsed


@dataclass(frozen=True)
class Decoding:
    """How a run decodes video files: `decoder` (a `READERS` name) on `device` (cpu, cuda, cuda:N); `fallback`
    (chosen by `auto`): a file TorchCodec cannot open is read by PyAV."""

    decoder: str = "pyav"
    device: str = "cpu"
    fallback: bool = False

    def __post_init__(self) -> None:
        if self.decoder not in READERS:
            raise ConfigError(f"Unknown decoder {self.decoder!r}; choose one of {', '.join(READERS)}.")
        object.__setattr__(self, "device", str(_parse_device(self.device)))

    @property
    def on_cuda(self) -> bool:
        """True when frames are decoded on a CUDA device (NVDEC) and stay there."""
        return torch.device(self.device).type == "cuda"

    def record(self) -> dict[str, str]:
        """What a feature store's preprocessing records of it: a decoder other than PyAV (so older stores,
        which record nothing, read as PyAV's) and a CUDA decoding device (NVDEC: its pixels may differ)."""
        named = {} if self.decoder == "pyav" else {"decoder": self.decoder}
        return {**named, **({"decode_device": "cuda"} if self.on_cuda else {})}

    def on_cpu(self) -> Decoding:
        """The same decoder on the CPU (for readers that hand frames to the host)."""
        return Decoding(self.decoder, "cpu", self.fallback)

    def describe(self) -> str:
        """`torchcodec on cuda:0`."""
        return f"{self.decoder} on {self.device}"


PYAV = Decoding()


def check_decoder_options(decoder: str, decode_device: str = "auto") -> None:
    """Refuse a `--decoder` / `--decode-device` pair that cannot work, in one line with the fix; an explicit
    `torchcodec` must be usable here (installed, with FFmpeg). Whether CUDA and NVDEC are here is
    `resolve_decoding`'s to check, when a run starts."""
    if decoder not in DECODER_CHOICES:
        raise ConfigError(f"--decoder must be one of {', '.join(DECODER_CHOICES)}, got {decoder!r}.")
    if decode_device != "auto":
        _parse_device(decode_device)
    if decoder == "torchcodec":
        torchcodec_decode.require_torchcodec()


def resolve_decoding(
    decoder: str, decode_device: str, model_device: str | torch.device, sample: str | Path | None = None
) -> Decoding:
    """The `Decoding` a run uses for the settings `decoder` / `decode_device` and the model's device.

    `auto` picks TorchCodec when it loads and opens `sample` (the run's first video file; a folder or None:
    loading is enough), else PyAV. The decoding device `auto` is the model's CUDA device for TorchCodec, and
    for PyAV when NVDEC decodes `sample` there (`_nvdec_decodes`), else the CPU; a CUDA device named with
    `--decoder auto` that fell back to PyAV is kept only when NVDEC decodes it. A CUDA decoding device must
    exist, and for PyAV its NVDEC (`pyav_cuda.require_nvdec`).
    """
    check_decoder_options(decoder, decode_device)
    name = decoder
    if decoder == "auto":
        name = "torchcodec" if _torchcodec_opens(sample) else "pyav"
    model = torch.device(model_device)
    cpu = torch.device("cpu")
    if decode_device == "auto":
        on_model = model.type == "cuda" and (name == "torchcodec" or _nvdec_decodes(sample, model))
        device = model if on_model else cpu
    else:
        device = _parse_device(decode_device)
        if (
            name == "pyav"
            and decoder == "auto"
            and device.type == "cuda"
            and not _nvdec_decodes(sample, device)
        ):
            device = cpu  # auto fell back to PyAV, which cannot use NVDEC here
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"--decode-device {decode_device}: CUDA is not available here; use --decode-device cpu."
        )
    if device.type == "cuda" and name == "pyav":
        pyav_cuda.require_nvdec(f"--decode-device {decode_device}")
    return Decoding(name, str(device), fallback=decoder == "auto")


def _nvdec_decodes(sample: str | Path | None, device: torch.device) -> bool:
    """True when PyAV can decode with NVDEC on `device`: CUDA and a PyAV built with it, and NVDEC decodes the
    first frame of `sample` (the run's first video file; a folder or None: the first two are enough)."""
    if pyav_cuda.nvdec_unavailable_reason() is not None:
        return False
    if sample is None or not Path(sample).is_file():
        return True
    return pyav_cuda.nvdec_decodes(sample, device)


def _torchcodec_opens(sample: str | Path | None) -> bool:
    """True when TorchCodec loads and (given a video file) opens `sample` without scanning it."""
    if torchcodec_decode.unavailable_reason() is not None:
        return False
    if sample is None or not Path(sample).is_file():
        return True
    from torchcodec.decoders import VideoDecoder  # lazy: TorchCodec is an optional extra

    try:
        VideoDecoder(str(sample), seek_mode="approximate")
    except Exception as exc:  # any failure to open means PyAV reads the run
        logger.debug("TorchCodec cannot open %s (%s): auto uses PyAV", sample, exc)
        return False
    return True


def announce_decoding(decoder: str, decoding: Decoding) -> None:
    """Say on stderr, once per run, which decoder `--decoder auto` chose (nothing for an explicit choice)."""
    if decoder != "auto":
        return
    reason = torchcodec_decode.unavailable_reason() or "TorchCodec cannot open the first video"
    why = "" if decoding.decoder == "torchcodec" else f" ({reason})"
    console.print(Text(f"decoder: auto chose {decoding.describe()}{why}"), soft_wrap=True, highlight=False)


def recorded_decoder(preprocessing: dict[str, Any] | None) -> str:
    """The decoder a preprocessing record names: PyAV for records that name none (made before decoders were
    recorded, or by PyAV)."""
    if isinstance(preprocessing, dict):
        return str(preprocessing.get("decoder") or "pyav")
    return "pyav"


# ------------------------------------------------------------------------------------------------ reading


def _open(path: Path, decoding: Decoding, opener: Callable[[VideoReader], T]) -> T:
    """`opener` on the decoding's reader; on PyAV's instead when TorchCodec cannot number the file's frames
    (a warning) or, under `auto`, cannot open it."""
    try:
        return opener(READERS[decoding.decoder])
    except torchcodec_decode.UnnumberedFrames as exc:
        logger.warning("%s; decoding it with PyAV instead", exc)
    except DecodeError as exc:
        if not decoding.fallback:
            raise
        logger.info("%s; --decoder auto decodes it with PyAV", exc)
    return opener(READERS["pyav"])


def read_frames(
    source: str | Path,
    fps: float | None = None,
    size: int | None = None,
    *,
    folder_fps: float | None = None,
    threads: int = 0,
    decoding: Decoding = PYAV,
) -> Iterator[DecodedFrame]:
    """`video.read_frames` through the decoding's reader (frames on the host: decoded on the CPU)."""
    path = Path(source)
    if decoding.decoder == "pyav" or not path.is_file():  # frame folders and missing files: PyAV's path
        return video.read_frames(path, fps, size, folder_fps=folder_fps, threads=threads)
    check_sampling(fps, size)
    return _open(path, decoding, lambda reader: reader.frames(path, fps, size, threads))


def read_clips(
    source: str | Path,
    fps: float,
    clip: ClipSampling,
    size: int | None = None,
    *,
    folder_fps: float | None = None,
    prepare: Callable[[np.ndarray], Any] | None = None,
    threads: int = 0,
    decoding: Decoding = PYAV,
) -> Iterator[DecodedClip]:
    """`video.read_clips` through the decoding's reader (frames on the host: decoded on the CPU)."""
    path = Path(source)
    if decoding.decoder == "pyav" or not path.is_file():
        return video.read_clips(
            path, fps, clip, size, folder_fps=folder_fps, prepare=prepare, threads=threads
        )
    check_sampling(fps, size, clips=True)
    native_fps, frames = every_frame(path, size, folder_fps=folder_fps, threads=threads, decoding=decoding)
    return assemble_clips(frames, fps, clip, native_fps, prepare)


def every_frame(
    source: str | Path,
    size: int | None = None,
    *,
    folder_fps: float | None = None,
    threads: int = 0,
    decoding: Decoding = PYAV,
) -> tuple[float, Frames]:
    """`video.every_frame` through the decoding's reader (frames on the host): the native frame rate and every
    frame, what `read_clips` and a pass over several models assemble windows from."""
    path = Path(source)
    if decoding.decoder == "pyav" or not path.is_file():  # frame folders and missing files: PyAV's path
        return video.every_frame(path, size, folder_fps=folder_fps, threads=threads)
    return _open(path, decoding, lambda reader: reader.clip_frames(path, size, threads))


def frame_batches(
    source: str | Path,
    fps: float | None,
    size: int | None = None,
    *,
    threads: int = 0,
    decoding: Decoding = PYAV,
) -> Iterator[tuple[list[float], torch.Tensor]]:
    """(times, uint8 [n, 3, H, W] on the decoding's device) of the frames `read_frames` samples from a video
    file: NVDEC frames stay on the GPU."""
    path = Path(source)
    check_sampling(fps, size)
    if not path.is_file():
        raise DecodeError(f"{path}: no such video file; check the dataset root and layout")
    return _open(path, decoding, lambda reader: reader.batches(path, fps, size, threads, decoding.device))


__all__ = [
    "DECODERS",
    "DECODER_CHOICES",
    "DECODER_FIELDS",
    "PYAV",
    "READERS",
    "Decoding",
    "VideoReader",
    "announce_decoding",
    "check_decoder_options",
    "every_frame",
    "frame_batches",
    "read_clips",
    "read_frames",
    "recorded_decoder",
    "resolve_decoding",
]

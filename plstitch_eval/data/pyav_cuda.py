"""Decode video files with NVDEC through PyAV's own FFmpeg (`--decoder pyav --decode-device cuda`), choosing
exactly the frames PyAV's CPU path (`plstitch_eval.data.video`) chooses, the frames left on the GPU.

PyAV's Linux x86_64 and Windows wheels (14.2 and later) bundle an FFmpeg built with NVDEC; the driver's
`libnvcuvid` comes from the NVIDIA driver. A file is opened with PyAV's CUDA hwaccel (no software fallback,
frames kept in GPU memory: `is_hw_owned`, in PyTorch's primary CUDA context) and decoded by the CPU path's own
loop (`video.sampled_video_frames` with another `open_container`): the same packet pass, the same skipped
non-reference frames, the same `TargetClock`, so the same frame indices and times.

Pixels: the decoded NV12 (8-bit) or P010/P016 (10/16-bit) planes are exported by DLPack and converted to RGB
on the GPU (`yuv_to_rgb`) with the frame's own colour matrix (BT.601 unless the stream says BT.709, BT.2020,
SMPTE 240M or FCC) and range (limited unless flagged full), as swscale converts the CPU path's frames. For
8-bit frames of even height the arithmetic is swscale's fixed-point yuv2rgb step for step - each chroma sample
shared by its 2x2 pixels, the same 16-bit coefficients, the same truncations - so the RGB is bit-identical to
the CPU path's whenever NVDEC's YUV equals the software decoder's (H.264 decoding is exact). 16-bit frames
(10-bit HEVC, VP9, AV1) are converted in floating point with the same 2x2 chroma, where swscale interpolates
chroma there: about 1 grey level apart on smooth content, more on chroma noise. A frame DLPack cannot export
(another pixel format) is converted by swscale on the host and copied back. A resize on decode (`size`) is
torchvision's bilinear, antialiased resize of the RGB batch on the GPU (TorchCodec's CUDA path does the same),
where the CPU path's swscale scales in YUV: a few grey levels apart (docs/extract.md).

A stream NVDEC cannot open or decode (a codec or profile it lacks, a driver without `libnvcuvid`) is decoded
on the CPU instead, with one warning naming the file; if that happens mid-stream, the CPU path resumes after
the frames already given. Without CUDA, or with a PyAV whose FFmpeg lacks the `cuda` hwdevice,
`decode_batches` refuses in one line with the fix (`require_nvdec`).

Streams: FFmpeg writes the decoded surfaces on the CUDA legacy default stream of the primary context, which is
PyTorch's default stream; the conversion runs there too, and a caller on another stream waits for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import av
import torch
from av.codec.hwaccel import HWAccel, hwdevices_available
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as tvf

from plstitch_eval.data import video
from plstitch_eval.data.video import TruncatedVideo, resized_shape
from plstitch_eval.errors import ConfigError, DecodeError
from plstitch_eval.utils.console import logger

NVDEC_INSTALL_HINT = (
    'pip install --force-reinstall --only-binary av "av>=14.2" (PyPI\'s Linux x86_64 and Windows wheels '
    "carry NVDEC)"
)
BATCH_BYTES = 64 * 2**20  # RGB frames one batch may hold on the GPU (full size: frames are resized after)
MAX_BATCH = 32  # frames per batch on small videos
PLANE_FORMATS = ("nv12", "p010le", "p016le")  # what PyAV exports by DLPack from a CUDA frame

# swscale's ff_yuv2rgb_coeffs (crv, cbu, cgu, cgv in 16.16, limited range) by AVColorSpace; BT.601 otherwise
_BT601 = (104597, 132201, 25675, 53279)
_YUV2RGB_COEFFS = {
    1: (117489, 138438, 13975, 34925),  # BT.709
    4: (104448, 132798, 24759, 53109),  # FCC
    7: (117579, 136230, 16907, 35559),  # SMPTE 240M
    9: (110013, 140363, 12277, 42626),  # BT.2020 non-constant luminance
    10: (110013, 140363, 12277, 42626),  # BT.2020 constant luminance (swscale uses the same matrix)
}
FULL_RANGE = 2  # AVCOL_RANGE_JPEG


class NvdecRefused(DecodeError):
    """A file NVDEC cannot open or decode here (the caller decodes it on the CPU)."""


# ------------------------------------------------------------------------------------------- availability


def pyav_has_nvdec() -> bool:
    """True when this PyAV's FFmpeg was built with the `cuda` hwdevice (NVDEC)."""
    return "cuda" in hwdevices_available()


def nvdec_unavailable_reason() -> str | None:
    """Why PyAV cannot decode with NVDEC here, in one line with the fix (None when it can, as far as can be
    told without decoding: the driver's `libnvcuvid` loads only when a stream is decoded)."""
    if not torch.cuda.is_available():
        return "CUDA is not available here (torch.cuda.is_available() is False)"
    if not pyav_has_nvdec():
        return (
            f"this PyAV (av {av.__version__}) has no NVDEC: its FFmpeg was built without the cuda hwdevice; "
            f"{NVDEC_INSTALL_HINT}"
        )
    return None


def require_nvdec(option: str = "--decoder pyav --decode-device cuda") -> None:
    """Raise ConfigError (one line: what is missing, the fix) unless PyAV can decode with NVDEC here."""
    reason = nvdec_unavailable_reason()
    if reason is not None:
        raise ConfigError(f"{option}: {reason}; or use --decode-device cpu.")


def nvdec_decodes(path: str | Path, device: str | torch.device = "cuda") -> bool:
    """True when NVDEC decodes the first frame of `path` here (what `--decode-device auto` tries on a run's
    first video before choosing NVDEC for PyAV)."""
    try:
        with open_nvdec(Path(path), torch.device(device)) as container:
            for frame in container.decode(container.streams.video[0]):
                return frame.format.name == "cuda"
    except (DecodeError, av.FFmpegError, RuntimeError, IndexError) as exc:
        logger.debug("NVDEC cannot decode %s (%s): --decode-device auto decodes PyAV on the CPU", path, exc)
    return False


# ------------------------------------------------------------------------------------------------- opening


def open_nvdec(path: Path, device: torch.device) -> av.container.InputContainer:
    """`path` opened for NVDEC on `device` (no software fallback; frames stay in GPU memory), or
    `NvdecRefused` when NVDEC cannot take its video stream."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    hwaccel = HWAccel("cuda", device=str(index), allow_software_fallback=False, is_hw_owned=True)
    try:
        container = av.open(str(path), hwaccel=hwaccel)
    except (av.FFmpegError, RuntimeError, NotImplementedError) as exc:
        raise NvdecRefused(f"{path}: NVDEC cannot open it ({_first_line(exc)})") from exc
    streams = container.streams.video
    if streams and not streams[0].codec_context.is_hwaccel:
        name = streams[0].codec_context.name
        container.close()
        raise NvdecRefused(f"{path}: NVDEC has no decoder for its {name} stream")
    return container


# ----------------------------------------------------------------------------------------- colour to RGB


@functools.cache
def _yuv2rgb_fixed_point(colorspace: int, full_range: bool) -> tuple[int, int, int, int, int, int]:
    """(y coefficient, y offset, vr, ub, ug, vg): swscale's 16-bit yuv2rgb coefficients for a frame's
    colorspace and range (`ff_yuv2rgb_c_init_tables`, default brightness, contrast and saturation)."""
    crv, cbu, cgu, cgv = _YUV2RGB_COEFFS.get(colorspace, _BT601)
    cy, oy = 1 << 16, 0
    if full_range:  # the table is for limited-range chroma: scale it back (C integer division)
        crv, cbu, cgu, cgv = (c * 224 // 255 for c in (crv, cbu, cgu, cgv))
    else:
        cy, oy = cy * 255 // 219, 16 << 16

    def to_int16(value: int) -> int:
        return max(-0x8000, min(0x7FFF, (value + (1 << 15)) >> 16))

    return (
        to_int16(cy << 13),
        to_int16(oy << 3),
        to_int16(crv << 13),
        to_int16(cbu << 13),
        to_int16(-cgu << 13),
        to_int16(-cgv << 13),
    )


def yuv_to_rgb(
    luma: torch.Tensor, chroma: torch.Tensor, colorspace: int = 2, color_range: int = 0
) -> torch.Tensor:
    """uint8 RGB [3, H, W] of one frame's semi-planar YUV 4:2:0 planes, on their device.

    `luma` [H, W] and `chroma` [ceil(H/2), ceil(W/2), 2] (U, V interleaved) are uint8 (NV12) or uint16 with
    the samples in the high bits (P010, P016); `colorspace` and `color_range` are the frame's (AVColorSpace,
    AVColorRange: unspecified reads as BT.601, limited range, as swscale reads it). Each chroma sample covers
    its 2x2 pixels. 8-bit: swscale's fixed point, R = (8Y - oy) * cy >> 16 + (8V - 1024) * vr >> 16, G and B
    alike (arithmetic shifts, i.e. floors); 16-bit: the same matrix in floating point, rounded.
    """
    height, width = luma.shape
    rows = (torch.arange(height, device=luma.device) // 2).clamp_(max=chroma.shape[0] - 1)
    cols = (torch.arange(width, device=luma.device) // 2).clamp_(max=chroma.shape[1] - 1)
    full = color_range == FULL_RANGE
    if luma.dtype == torch.uint8:
        y_coeff, y_offset, vr, ub, ug, vg = _yuv2rgb_fixed_point(int(colorspace), full)
        y = ((luma.to(torch.int32) * 8 - y_offset) * y_coeff) >> 16
        uv = chroma.to(torch.int32) * 8 - 1024
        u, v = uv[..., 0], uv[..., 1]
        chroma_terms = torch.stack([(v * vr) >> 16, ((u * ug) >> 16) + ((v * vg) >> 16), (u * ub) >> 16])
        rgb = y + chroma_terms.index_select(1, rows).index_select(2, cols)
    else:
        crv, cbu, cgu, cgv = (c / 65536 for c in _YUV2RGB_COEFFS.get(int(colorspace), _BT601))
        y = _as_16bit(luma) / 256.0  # samples in the high bits: 8-bit scale with fractions
        uv = _as_16bit(chroma) / 256.0 - 128.0
        if full:
            crv, cbu, cgu, cgv = (c * 224 / 255 for c in (crv, cbu, cgu, cgv))
        else:
            y = (y - 16.0) * (255.0 / 219.0)
        u, v = uv[..., 0], uv[..., 1]
        chroma_terms = torch.stack([crv * v, -cgu * u - cgv * v, cbu * u])
        rgb = (y + chroma_terms.index_select(1, rows).index_select(2, cols)).round_()
    return rgb.clamp_(0, 255).to(torch.uint8)


def _as_16bit(plane: torch.Tensor) -> torch.Tensor:
    """A uint16 plane as float32 (through int16, which every torch device converts)."""
    return (plane.view(torch.int16).to(torch.int32) & 0xFFFF).to(torch.float32)


def frame_to_rgb(frame: av.VideoFrame, device: torch.device, path: Path) -> torch.Tensor:
    """uint8 RGB [3, H, W] of a decoded frame on `device`: converted there from its DLPack planes (NVDEC's
    NV12/P010/P016, or such a frame on the host), else by swscale on the host and copied."""
    pixel_format = frame.format if frame.sw_format is None else frame.sw_format  # a CUDA frame's planes
    if pixel_format.name in PLANE_FORMATS:
        try:
            luma, chroma = (torch.from_dlpack(plane.__dlpack__()) for plane in frame.planes[:2])
        except (NotImplementedError, TypeError, ValueError) as exc:
            logger.debug("%s: no DLPack export of a %s frame (%s)", path, pixel_format.name, exc)
        else:
            return _on_decoder_stream(
                device,
                lambda: yuv_to_rgb(luma.to(device), chroma.to(device), frame.colorspace, frame.color_range),
            )
    image = torch.from_numpy(video._frame_to_rgb(frame, None, path))  # a CUDA frame is downloaded first
    return image.permute(2, 0, 1).to(device)


def _on_decoder_stream(device: torch.device, convert: Callable[[], torch.Tensor]) -> torch.Tensor:
    """`convert()` on the stream FFmpeg decodes on (the default stream), the caller's stream made to wait."""
    if device.type != "cuda":
        return convert()
    decoder_stream = torch.cuda.default_stream(device)
    with torch.cuda.stream(decoder_stream):
        image = convert()
    caller = torch.cuda.current_stream(device)
    if caller != decoder_stream:
        caller.wait_stream(decoder_stream)
        image.record_stream(caller)
    return image


# ------------------------------------------------------------------------------------------------ decoding


def decode_batches(
    path: str | Path,
    fps: float | None,
    size: int | None = None,
    *,
    device: str | torch.device = "cuda",
    threads: int = 0,
) -> Iterator[tuple[list[float], torch.Tensor]]:
    """(times, uint8 RGB [n, 3, H, W] on `device`) of the frames `video.read_frames(path, fps, size)` samples,
    decoded by NVDEC and left on the GPU, a few at a time; a stream NVDEC cannot take is decoded on the CPU
    (`threads` FFmpeg threads) with one warning. ConfigError at once when NVDEC cannot run here."""
    device = torch.device(device)
    if device.type != "cuda":
        raise ConfigError(f"NVDEC decodes onto a CUDA device, got {device}; decode on the CPU with PyAV.")
    require_nvdec()
    return _batches(Path(path), fps, size, device, threads)


def _batches(
    path: Path,
    fps: float | None,
    size: int | None,
    device: torch.device,
    threads: int,
    open_container: video.ContainerOpener | None = None,
) -> Iterator[tuple[list[float], torch.Tensor]]:
    """`decode_batches` on any device: NVDEC (`open_container`, default `open_nvdec` on `device`) while it
    decodes, then the CPU path for the frames it did not give (a warning naming the file)."""
    opener = open_container or functools.partial(open_nvdec, device=device)
    given = 0
    try:
        for times, images in _device_batches(path, fps, size, device, opener):
            yield times, images
            given += len(times)
        return
    except TruncatedVideo:  # cut short whichever decoder reads it
        raise
    except DecodeError as exc:
        where = f" from its sampled frame {given}" if given else ""
        logger.warning(
            "%s: NVDEC cannot decode it (%s); decoding it on the CPU%s", path, _detail(exc, path), where
        )
    yield from _host_batches(path, fps, size, device, threads, skip=given)


def _device_batches(
    path: Path, fps: float | None, size: int | None, device: torch.device, opener: video.ContainerOpener
) -> Iterator[tuple[list[float], torch.Tensor]]:
    """Sampled frames decoded by `opener`'s decoder (one FFmpeg thread: NVDEC does the work), converted on
    `device` one at a time and handed over in batches, resized there."""
    times: list[float] = []
    images: list[torch.Tensor] = []
    limit = MAX_BATCH
    for time, frame in video.sampled_video_frames(path, fps, 1, opener):
        image = frame_to_rgb(frame, device, path)
        del frame  # give the decoder its surface back
        if not images:
            limit = max(1, min(MAX_BATCH, BATCH_BYTES // image.numel()))
        times.append(time)
        images.append(image)
        if len(images) == limit:
            yield times, _resized(torch.stack(images), size)
            times, images = [], []
    if images:
        yield times, _resized(torch.stack(images), size)


def _resized(batch: torch.Tensor, size: int | None) -> torch.Tensor:
    """A [n, 3, H, W] batch, its shorter side resized to `size` (bilinear, antialiased) when given."""
    if size is None:
        return batch
    width, height = resized_shape(batch.shape[-1], batch.shape[-2], size)
    return tvf.resize(batch, [height, width], interpolation=InterpolationMode.BILINEAR, antialias=True)


def _host_batches(
    path: Path, fps: float | None, size: int | None, device: torch.device, threads: int, skip: int = 0
) -> Iterator[tuple[list[float], torch.Tensor]]:
    """The CPU path's sampled frames after the first `skip` (converted and resized by swscale, as
    `video.read_frames` gives them), batched onto `device`."""
    times: list[float] = []
    images: list[torch.Tensor] = []
    limit = MAX_BATCH
    for n, (time, frame) in enumerate(video.sampled_video_frames(path, fps, threads)):
        if n < skip:
            continue
        image = torch.from_numpy(video._frame_to_rgb(frame, size, path)).permute(2, 0, 1)
        if not images:
            limit = max(1, min(MAX_BATCH, BATCH_BYTES // image.numel()))
        times.append(time)
        images.append(image)
        if len(images) == limit:
            yield times, torch.stack(images).to(device)
            times, images = [], []
    if images:
        yield times, torch.stack(images).to(device)


def _detail(exc: BaseException, path: Path) -> str:
    """Why NVDEC failed, in a few words: the FFmpeg error behind a DecodeError, without the file's name."""
    text = _first_line(exc.__cause__ if exc.__cause__ is not None else exc)
    return text.removeprefix(f"{path}: ")


def _first_line(exc: BaseException) -> str:
    """An exception's first line (its type when it says nothing)."""
    return (str(exc) or type(exc).__name__).splitlines()[0]


__all__ = [
    "NvdecRefused",
    "decode_batches",
    "frame_to_rgb",
    "nvdec_decodes",
    "nvdec_unavailable_reason",
    "open_nvdec",
    "pyav_has_nvdec",
    "require_nvdec",
    "yuv_to_rgb",
]

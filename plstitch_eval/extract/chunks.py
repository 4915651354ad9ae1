"""One video decoded into frame chunks: the `VideoJob` to decode and the `FrameChunk`s it becomes.

A video is decoded sequentially, whole, into uint8 model crops (`plstitch_eval.preprocess.prepare_frame`) of
`batch_size` frames each (`iter_video_chunks`), on an NVDEC device without leaving it (`iter_device_chunks`),
or into the windows a clip encoder sees around each sampled frame (`iter_clip_chunks`). With a plan that
crops black margins, the video's box is found first. A decoding error never escapes: it ends the video with
an error chunk naming the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from plstitch_eval.data.decoders import PYAV, Decoding, frame_batches, read_clips, read_frames
from plstitch_eval.data.frames_lmdb import FrameCache
from plstitch_eval.data.margin import detect_video_margin, warn_if_margin_changes
from plstitch_eval.data.video import DecodedFrame
from plstitch_eval.errors import ConfigError
from plstitch_eval.preprocess import FramePlan, prepare_frame, resize_and_crop


@dataclass
class FrameChunk:
    """Up to `batch_size` consecutive frames of one video, or the error that stopped its decoding, or (no
    frames) word that another run holds the video (`waiting`; more chunks follow) or wrote it
    (`elsewhere`). A video's last chunk carries its black-margin box (`MarginBox.to_dict`) when the plan
    crops margins. `model` is the position of the model (and store) it is for in a pass over several
    (`plstitch_eval.extract.shared`); 0 in a one-model run."""

    video_index: int
    images: torch.Tensor  # [n, 3, H, W] uint8 frames, or [n, T, 3, H, W] windows for a clip encoder
    frame_times: torch.Tensor  # [n] float64 seconds (of the sampled frames)
    last: bool
    error: str | None = None
    waiting: bool = False
    elsewhere: bool = False
    margin: dict[str, float] | None = None
    model: int = 0

    def pin_memory(self) -> FrameChunk:
        """Called by the DataLoader's pinning thread so the host-to-device copy can be asynchronous."""
        self.images = self.images.pin_memory()
        return self


@dataclass(frozen=True)
class VideoJob:
    """One video to decode: its position in the dataset, its file or frame folder, a folder's frame rate;
    for a run into a store, its name there and the state of its store file when the run was planned
    (`features.file_state`: None when absent), so that a file another run writes meanwhile is noticed.

    In a pass over several models, `models` are the positions of the models that still need the video and
    `seen_by` the state of each one's store file (aligned with `models`); a one-model job is model 0 with
    `seen`."""

    index: int
    source: Path
    folder_fps: float | None = None
    video: str | None = None
    seen: tuple[int, int, int] | None = None
    models: tuple[int, ...] = (0,)
    seen_by: tuple[tuple[int, int, int] | None, ...] = ()

    def state_of(self, model: int) -> tuple[int, int, int] | None:
        """The planned state of `model`'s store file for this video."""
        return self.seen_by[self.models.index(model)] if self.seen_by else self.seen

    def for_models(self, models: tuple[int, ...]) -> VideoJob:
        """The same job for a subset of its models (each keeps its planned file state)."""
        return replace(self, models=models, seen_by=tuple(self.state_of(m) for m in models))


def _decode_error_message(source: Path, exc: BaseException) -> str:
    """Error text that always names the file."""
    text = str(exc) or type(exc).__name__
    return text if str(source) in text else f"{source}: {text}"


def _batched_chunks(
    job: VideoJob,
    items: Iterator[tuple[float, Any]],
    item_shape: tuple[int, ...],
    batch_size: int,
    fill: Callable[[torch.Tensor, Any], None],
    device: torch.device | None = None,
) -> Iterator[FrameChunk]:
    """(time, payload) items of one video -> uint8 chunks of `batch_size` [n, *item_shape] on `device` (the
    host when None); `fill` writes one payload into its buffer slot. A decoder error, or no item at all, ends
    the video with an error chunk."""
    buffer = torch.empty((batch_size, *item_shape), dtype=torch.uint8, device=device)
    times = torch.empty(batch_size, dtype=torch.float64)
    n = total = 0
    try:
        for time_s, payload in items:
            fill(buffer[n], payload)
            times[n] = time_s
            n += 1
            if n == batch_size:  # hand the full buffers over (no copy) and start new ones
                yield FrameChunk(job.index, buffer, times, False)
                buffer, times = torch.empty_like(buffer), torch.empty_like(times)
                total += n
                n = 0
    except Exception as exc:  # any decoder failure becomes a per-video error naming the file
        message = _decode_error_message(job.source, exc)
        yield FrameChunk(job.index, buffer[:0].clone(), times[:0].clone(), True, message)
        return
    if total + n == 0:
        message = f"{job.source}: no frames could be decoded."
        yield FrameChunk(job.index, buffer[:0].clone(), times[:0].clone(), True, message)
        return
    yield FrameChunk(job.index, buffer[:n].clone(), times[:n].clone(), True)


def sampled_frames(
    job: VideoJob, plan: FramePlan, threads: int, decoding: Decoding, cache: FrameCache | None = None
) -> Iterator[DecodedFrame]:
    """The frames `plan` samples from `job`'s video, on the host: read from a frame cache when one is given
    (`--frames`: JPEG frames with their recorded times), else decoded."""
    if cache is not None:
        return cache.frames(str(job.video))
    size = plan.resize if plan.resize_on_decode else None
    return read_frames(
        job.source, plan.fps, size, folder_fps=job.folder_fps, threads=threads, decoding=decoding
    )


def sampled_batches(
    job: VideoJob, plan: FramePlan, batch_size: int, decoding: Decoding, cache: FrameCache | None = None
) -> Iterator[tuple[list[float], torch.Tensor]]:
    """(times, uint8 [n, 3, H, W] on the decoding's device) of the sampled frames: NVDEC frames, or a frame
    cache's JPEGs decoded there (nvJPEG on CUDA)."""
    if cache is not None:
        return cache.batches(str(job.video), batch_size, decoding.device)
    size = plan.resize if plan.resize_on_decode else None
    return frame_batches(job.source, plan.fps, size, decoding=decoding)


def on_device(job: VideoJob, decoding: Decoding, cache: FrameCache | None = None) -> bool:
    """True when `job`'s frames are decoded on a CUDA device and stay there (video files and caches; a frame
    folder is read on the host)."""
    return decoding.on_cuda and (cache is not None or job.source.is_file())


def iter_video_chunks(
    job: VideoJob,
    plan: FramePlan,
    batch_size: int,
    threads: int = 0,
    decoding: Decoding = PYAV,
    cache: FrameCache | None = None,
) -> Iterator[FrameChunk]:
    """Decode one video sequentially (`threads` FFmpeg threads, 0 = default) into uint8 [n,3,H,W] chunks; an
    error ends it with an error chunk. A video file decoded on CUDA goes to `iter_device_chunks`; with a
    frame `cache` its frames are read from there instead of the video."""
    if plan.crop_black_margin and plan.margin is None:
        again = partial(iter_video_chunks, job, batch_size=batch_size, threads=threads, decoding=decoding)
        yield from _with_video_margin(job, plan, threads, decoding, again)
        return
    if on_device(job, decoding, cache):
        yield from iter_device_chunks(job, plan, batch_size, decoding, cache)
        return

    def frames() -> Iterator[tuple[float, Any]]:  # opened on first use, inside the chunker's error handling
        for frame in sampled_frames(job, plan, threads, decoding, cache):
            yield frame.time, frame.image

    def fill(slot: torch.Tensor, image: Any) -> None:
        slot.copy_(prepare_frame(image, plan))

    yield from _batched_chunks(job, frames(), (3, *plan.crop), batch_size, fill)


def iter_device_chunks(
    job: VideoJob, plan: FramePlan, batch_size: int, decoding: Decoding, cache: FrameCache | None = None
) -> Iterator[FrameChunk]:
    """Decode one video file on the decoding's device (NVDEC; a frame cache's JPEGs with nvJPEG) into uint8
    [n,3,H,W] chunks there: frames are resized and cropped where they were decoded, a batch at a time, never
    copied to the host."""
    if plan.crop_black_margin and plan.margin is None:
        again = partial(iter_device_chunks, job, batch_size=batch_size, decoding=decoding)
        yield from _with_video_margin(job, plan, 0, decoding, again)
        return

    def crops() -> Iterator[tuple[float, torch.Tensor]]:  # opened inside the chunker's error handling
        for times, images in sampled_batches(job, plan, batch_size, decoding, cache):
            yield from zip(times, resize_and_crop(images, plan), strict=True)

    def fill(slot: torch.Tensor, crop: torch.Tensor) -> None:
        slot.copy_(crop)

    device = torch.device(decoding.device)
    yield from _batched_chunks(job, crops(), (3, *plan.crop), batch_size, fill, device)


def iter_clip_chunks(
    job: VideoJob, plan: FramePlan, batch_size: int, threads: int = 0, decoding: Decoding = PYAV
) -> Iterator[FrameChunk]:
    """Decode one video once into windows [n, T, 3, H, W] around its sampled frames (`plan.clip`); every
    frame a window uses is prepared once, on the host. An error ends the video with an error chunk, as for
    frames."""
    if plan.clip is None:
        raise ConfigError("iter_clip_chunks needs a plan with a clip window (FramePlan.clip).")
    if plan.crop_black_margin and plan.margin is None:
        again = partial(iter_clip_chunks, job, batch_size=batch_size, threads=threads, decoding=decoding)
        yield from _with_video_margin(job, plan, threads, decoding, again)
        return
    size = plan.resize if plan.resize_on_decode else None
    windows = read_clips(
        job.source,
        float(plan.fps or 0),
        plan.clip,
        size=size,
        folder_fps=job.folder_fps,
        prepare=lambda image: prepare_frame(image, plan),
        threads=threads,
        decoding=decoding.on_cpu(),
    )

    def fill(slot: torch.Tensor, frames: Any) -> None:
        for k, frame in enumerate(frames):  # frames shared by windows were prepared once
            slot[k] = frame

    items = ((window.time, window.frames) for window in windows)
    yield from _batched_chunks(job, items, (plan.clip.num_frames, 3, *plan.crop), batch_size, fill)


def _with_video_margin(
    job: VideoJob,
    plan: FramePlan,
    threads: int,
    decoding: Decoding,
    chunks: Callable[[FramePlan], Iterator[FrameChunk]],
) -> Iterator[FrameChunk]:
    """`chunks` of one video under its own plan: the video's black-margin box is found first
    (`detect_video_margin`, per video: borders differ between recordings) and its last chunk reports it; a
    video whose box cannot be found ends with an error chunk, as a decoding failure does."""
    try:
        box = detect_video_margin(job.source, folder_fps=job.folder_fps, threads=threads, decoding=decoding)
    except Exception as exc:  # any decoder failure becomes a per-video error naming the file
        empty, times = torch.empty(0, dtype=torch.uint8), torch.empty(0, dtype=torch.float64)
        yield FrameChunk(job.index, empty, times, True, _decode_error_message(job.source, exc))
        return
    warn_if_margin_changes(job.source, box, video=job.video, folder_fps=job.folder_fps)
    for chunk in chunks(replace(plan, margin=box)):
        if chunk.last and chunk.error is None:
            chunk.margin = box.to_dict()
        yield chunk


def note_chunk(job: VideoJob, waiting: bool = False, elsewhere: bool = False, model: int = 0) -> FrameChunk:
    """A frameless chunk saying that another run holds (`waiting`) or wrote (`elsewhere`) `job`'s video in
    `model`'s store."""
    empty = torch.empty(0, dtype=torch.uint8)
    times = torch.empty(0, dtype=torch.float64)
    return FrameChunk(job.index, empty, times, elsewhere, waiting=waiting, elsewhere=elsewhere, model=model)

"""One video decoded once for several models: each model's own crops of the same decoded frames.

`iter_shared_chunks` decodes a video once and gives every model of the job its own preprocessing of each
decoded frame (`prepare_frame` with that model's `FramePlan`: input size, whole frame or centre crop, clip
window, black-margin box), batched per model exactly as a one-model run batches it (`batch_size` frames per
chunk, the last chunk holding the rest), so each model's forwards, and so its features, are those of a
one-model run. A decoded frame is converted to RGB once and dropped once every model has its crop: a pass
holds one decoded frame, a window's frames for clip models, and one buffer of `batch_size` crops per model
(on a 224 x 224 model 150 KB per frame, so 9.6 MB per model at batch 64).

Frame models see the frames the sampling rule picks; clip models see the window of each sampled frame
(`sampling.WindowAssembler`). When no model of the job needs windows, only sampled frames are decoded (the
packet pass of `plstitch_eval.data.video`); otherwise every frame is decoded once and the sampled ones
picked by the same clock. Models in one pass share the decoder, its device, the fps and the size frames are
decoded at (`decode_key`). A decoding error ends the video for every model with an error chunk naming the
file, as in a one-model run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import torch

from plstitch_eval.data import decoders, video
from plstitch_eval.data.decoders import Decoding
from plstitch_eval.data.frames_lmdb import FrameCache
from plstitch_eval.data.margin import detect_video_margin, warn_if_margin_changes
from plstitch_eval.data.sampling import TargetClock, WindowAssembler
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract.chunks import (
    FrameChunk,
    VideoJob,
    _decode_error_message,
    iter_clip_chunks,
    iter_video_chunks,
    on_device,
    sampled_batches,
    sampled_frames,
)
from plstitch_eval.preprocess import FramePlan, prepare_frame, resize_and_crop

DecodeKey = tuple[float | None, int | None, bool, bool]


def decode_key(plan: FramePlan) -> DecodeKey:
    """What models must share to take their frames from one decoding pass: the fps, the size frames are
    decoded at (the shorter side with `resize_on_decode`, else full size), and black-margin cropping (the
    box is found once per video); the decoder and its device are the run's."""
    size = plan.resize if plan.resize_on_decode else None
    return (plan.fps, size, plan.resize_on_decode, plan.crop_black_margin)


def item_shape(plan: FramePlan) -> tuple[int, ...]:
    """Shape of one item a model is fed: [3, h, w] frames, or [T, 3, h, w] windows for a clip model."""
    crop = (3, *plan.crop)
    return crop if plan.clip is None else (plan.clip.num_frames, *crop)


class _Batcher:
    """One model's chunks of one video: items in, full `batch_size` chunks out, then the last (the same cuts
    as `chunks._batched_chunks`, so that a model's forwards are those of a one-model run)."""

    def __init__(
        self, job: VideoJob, model: int, shape: tuple[int, ...], batch_size: int, device: torch.device | None
    ) -> None:
        self.job, self.model, self.batch_size = job, model, batch_size
        self.buffer = torch.empty((batch_size, *shape), dtype=torch.uint8, device=device)
        self.times = torch.empty(batch_size, dtype=torch.float64)
        self.n = self.total = 0

    def add(self, time_s: float, fill: Callable[[torch.Tensor], Any]) -> FrameChunk | None:
        """Write one item into the next slot (`fill(slot)`); the chunk when the buffer is full."""
        fill(self.buffer[self.n])
        self.times[self.n] = time_s
        self.n += 1
        if self.n < self.batch_size:
            return None
        chunk = FrameChunk(self.job.index, self.buffer, self.times, False, model=self.model)
        self.buffer, self.times = torch.empty_like(self.buffer), torch.empty_like(self.times)
        self.total += self.n
        self.n = 0
        return chunk

    def last(self, margin: dict[str, float] | None) -> FrameChunk:
        """The video's last chunk (the rest of the buffer), or an error chunk when nothing was decoded."""
        if self.total + self.n == 0:
            return self.error(f"{self.job.source}: no frames could be decoded.")
        n = self.n
        return FrameChunk(
            self.job.index,
            self.buffer[:n].clone(),
            self.times[:n].clone(),
            True,
            margin=margin,
            model=self.model,
        )

    def error(self, message: str) -> FrameChunk:
        """The chunk that ends this model's video with `message`."""
        empty = self.buffer[:0].clone()
        return FrameChunk(self.job.index, empty, self.times[:0].clone(), True, message, model=self.model)


def iter_shared_chunks(
    job: VideoJob,
    plans: Sequence[FramePlan],
    batch_size: int,
    threads: int = 0,
    decoding: Decoding = decoders.PYAV,
    cache: FrameCache | None = None,
) -> Iterator[FrameChunk]:
    """Decode `job`'s video once into chunks for each of `job.models` (`plans[i]` is model
    `job.models[i]`'s plan, every plan with one `decode_key`); a one-model job takes the one-model chunkers
    themselves. With a frame `cache` the sampled frames are read from there (no clip model, no margin)."""
    if len(job.models) != len(plans):
        raise ConfigError(f"{len(job.models)} models in the job but {len(plans)} frame plans.")
    if len({decode_key(p) for p in plans}) > 1:
        raise ConfigError("Models decoded in one pass must share fps, decode size and margin cropping.")
    if len(plans) == 1:
        if plans[0].clip is None:
            chunks = iter_video_chunks(job, plans[0], batch_size, threads, decoding, cache)
        else:
            chunks = iter_clip_chunks(job, plans[0], batch_size, threads, decoding)
        for chunk in chunks:
            chunk.model = job.models[0]
            yield chunk
        return
    margin: dict[str, float] | None = None
    if plans[0].crop_black_margin and plans[0].margin is None:
        try:  # one box per video, found once for every model (borders differ between recordings)
            box = detect_video_margin(
                job.source, folder_fps=job.folder_fps, threads=threads, decoding=decoding
            )
        except Exception as exc:  # any decoder failure becomes a per-video error naming the file
            message = _decode_error_message(job.source, exc)
            for model, plan in zip(job.models, plans, strict=True):
                yield _Batcher(job, model, item_shape(plan), 1, None).error(message)
            return
        warn_if_margin_changes(job.source, box, video=job.video, folder_fps=job.folder_fps)
        plans = [replace(plan, margin=box) for plan in plans]
        margin = box.to_dict()
    device_pass = on_device(job, decoding, cache) and all(p.clip is None for p in plans)
    device = torch.device(decoding.device) if device_pass else None
    batchers = [
        _Batcher(job, model, item_shape(plan), batch_size, device)
        for model, plan in zip(job.models, plans, strict=True)
    ]
    if device_pass:
        items = _device_items(job, plans, batch_size, decoding, cache)
    elif all(p.clip is None for p in plans):
        items = _frame_items(job, plans, threads, decoding, cache)
    else:
        items = _window_items(job, plans, threads, decoding.on_cpu())
    try:
        for i, time_s, fill in items:
            chunk = batchers[i].add(time_s, fill)
            if chunk is not None:
                yield chunk
    except Exception as exc:  # any decoder failure ends the video for every model, naming the file
        message = _decode_error_message(job.source, exc)
        for batcher in batchers:
            yield batcher.error(message)
        return
    for batcher in batchers:
        yield batcher.last(margin)


Item = tuple[int, float, Callable[[torch.Tensor], Any]]  # (model position in the job, time, slot filler)


def _copy(value: torch.Tensor) -> Callable[[torch.Tensor], Any]:
    return lambda slot: slot.copy_(value)


def _fill_window(frames: tuple[Any, ...]) -> Callable[[torch.Tensor], None]:
    def fill(slot: torch.Tensor) -> None:
        for k, frame in enumerate(frames):  # frames shared by windows were prepared once
            slot[k] = frame

    return fill


def _frame_items(
    job: VideoJob, plans: Sequence[FramePlan], threads: int, decoding: Decoding, cache: FrameCache | None
) -> Iterator[Item]:
    """Sampled frames only (no model needs windows): each decoded once, then each model's crop of it."""
    for frame in sampled_frames(job, plans[0], threads, decoding, cache):
        for i, model_plan in enumerate(plans):
            yield i, frame.time, _copy(prepare_frame(frame.image, model_plan))


def _device_items(
    job: VideoJob, plans: Sequence[FramePlan], batch_size: int, decoding: Decoding, cache: FrameCache | None
) -> Iterator[Item]:
    """Sampled frames decoded on the decoding's device (NVDEC, nvJPEG), each model's crops made there."""
    for times, images in sampled_batches(job, plans[0], batch_size, decoding, cache):
        crops = [resize_and_crop(images, model_plan) for model_plan in plans]
        for k, time_s in enumerate(times):
            for i in range(len(plans)):
                yield i, time_s, _copy(crops[i][k])


def _window_items(
    job: VideoJob, plans: Sequence[FramePlan], threads: int, decoding: Decoding
) -> Iterator[Item]:
    """Every frame decoded once, in order: frame models take the sampled ones (the sampling clock), clip
    models their windows (one assembler each); a frame's RGB pixels are made once, when first needed."""
    plan = plans[0]
    size = plan.resize if plan.resize_on_decode else None
    fps = float(plan.fps or 0)
    video.check_sampling(fps, size, clips=True)
    native_fps, frames = decoders.every_frame(
        job.source, size, folder_fps=job.folder_fps, threads=threads, decoding=decoding
    )
    clock = TargetClock(fps)
    assemblers = {
        i: WindowAssembler(p.clip, fps, p.clip.step(native_fps), partial(prepare_frame, plan=p))
        for i, p in enumerate(plans)
        if p.clip is not None
    }
    frame_models = [i for i, p in enumerate(plans) if p.clip is None]
    for time_s, load in frames:
        load = _once(load)
        if clock.take(time_s):
            for i in frame_models:
                yield i, time_s, _copy(prepare_frame(load(), plans[i]))
        for i, assembler in assemblers.items():
            for window in assembler.push(time_s, load):
                yield i, window.time, _fill_window(window.frames)
    for i, assembler in assemblers.items():
        for window in assembler.finish():
            yield i, window.time, _fill_window(window.frames)


def _once(load: Callable[[], np.ndarray]) -> Callable[[], np.ndarray]:
    """`load` run at most once: every model shares the frame's RGB pixels."""
    cache: list[np.ndarray] = []

    def loaded() -> np.ndarray:
        if not cache:
            cache.append(load())
        return cache[0]

    return loaded

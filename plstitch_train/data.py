"""Training frames: decode every video ONCE (PyAV or TorchCodec, `config.frames.decoder`, on the CPU; frame
folders) into a frame store; build items. The videos are listed by `plstitch_train.videos`.

`open_frame_store(config, cache_dir)` is the one place a run's frames come from: a frames LMDB given as
`--data` is read as it is; videos are decoded once into a JPEG LMDB in the authors' layout (`frame_store
"lmdb"`, `plstitch_train.frames_lmdb`) or into `FrameStore`'s uint8 `.npy` cache (`"raw"`: one memory-mapped
[T, H, W, 3] array per video, shorter side `frame_size`, at the training fps). `TrainDataset` turns a
`SampleSpec` into augmented tensors (`plstitch_train.transforms`), every
frame under its own seed derived from the spec's seed alone, so items do not depend on worker count, rank or
resume point. `build_training_data(config, store, grid)` is the one place a `TrainConfig` becomes the dataset
and its `TrainSampler` (the trainer and `benchmarks/train_step.py` both use it).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset

from plstitch_eval.data.decoders import PYAV, Decoding, announce_decoding, read_frames, resolve_decoding
from plstitch_eval.data.media import VIDEO_EXTENSIONS, is_image_file, is_video_file
from plstitch_eval.errors import ConfigError, DataError, TrainingError
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import atomic_path
from plstitch_train.frames_lmdb import (
    DecodeProgress,
    LmdbFrameStore,
    is_frames_lmdb,
    read_layout,
    write_frames_lmdb,
)
from plstitch_train.masking import BlockMaskGenerator
from plstitch_train.sampling import SampleSpec, TrainSampler
from plstitch_train.transforms import AugmentationSettings, ItemAugmentation
from plstitch_train.videos import TrainingVideo, dataset_videos, discover_videos, select_training_videos

if TYPE_CHECKING:
    from plstitch_train.config import FramesConfig, OptimConfig, TrainConfig

__all__ = [  # with the videos' names (here before `videos.py`) and the media helpers used through here
    "VIDEO_EXTENSIONS",
    "FrameStore",
    "TrainDataset",
    "TrainingData",
    "TrainingVideo",
    "build_training_data",
    "dataset_videos",
    "decode_video",
    "discover_videos",
    "is_image_file",
    "is_video_file",
    "micro_batch_size",
    "open_frame_store",
    "select_training_videos",
    "training_decoding",
    "with_data_fps",
]


def _source_key(video: TrainingVideo, fps: float, frame_size: int, decoding: Decoding = PYAV) -> str:
    """A video's identity for the frame caches: its path, size and mtime and the decode settings (the decoder
    when it is not PyAV, so caches written before decoders were recorded keep their keys)."""
    stat = video.source.stat()
    key = f"{video.source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{fps}|{frame_size}|{video.folder_fps}"
    return key if decoding.decoder == "pyav" or video.source.is_dir() else f"{key}|{decoding.decoder}"


def _cache_file(
    video: TrainingVideo, fps: float, frame_size: int, cache_dir: Path, decoding: Decoding = PYAV
) -> Path:
    """Cache path keyed by the source's path, size and mtime and the decode settings."""
    digest = hashlib.sha1(_source_key(video, fps, frame_size, decoding).encode()).hexdigest()[:16]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in video.name)[-60:]
    return cache_dir / f"{safe}-{digest}.npy"


def decode_video(
    video: TrainingVideo, fps: float, frame_size: int, cache_dir: Path, decoding: Decoding = PYAV
) -> Path:
    """Decode `video` at `fps` with shorter side `frame_size` into a uint8 [T,H,W,3] `.npy` (once; cached)."""
    target = _cache_file(video, fps, frame_size, cache_dir, decoding)
    if target.is_file():
        return target
    frames = [
        f.image
        for f in read_frames(video.source, fps, frame_size, folder_fps=video.folder_fps, decoding=decoding)
    ]
    if not frames:
        raise DataError(f"{video.source}: no frames decoded at {fps} fps.")
    with atomic_path(target) as tmp, open(tmp, "wb") as handle:
        np.save(handle, np.stack(frames))
    return target


class FrameStore:
    """Decoded training videos, one memory-mapped uint8 [T, H, W, 3] array each; `reverse_time` flips them."""

    def __init__(
        self, names: list[str], arrays: list[np.ndarray], fps: float, reverse_time: bool = False
    ) -> None:
        self.names, self.fps, self.reverse_time = names, fps, reverse_time
        self._arrays = arrays

    @classmethod
    def build(
        cls,
        videos: list[TrainingVideo],
        fps: float,
        frame_size: int,
        cache_dir: Path,
        min_frames: int = 1,
        reverse_time: bool = False,
        decoding: Decoding = PYAV,
    ) -> FrameStore:
        """Decode (or reuse) every video with `decoding`; videos shorter than `min_frames` are skipped with a
        warning."""
        names, arrays = [], []
        todo = [not _cache_file(video, fps, frame_size, cache_dir, decoding).is_file() for video in videos]
        if any(todo):
            logger.info(
                "preparing data: decoding %d videos at %g fps into %s (once; a rerun reuses them)",
                sum(todo),
                fps,
                cache_dir,
            )
        with DecodeProgress("decoding videos", len(videos), len(videos) - sum(todo)) as progress:
            for video, decode in zip(videos, todo, strict=True):
                array = np.load(decode_video(video, fps, frame_size, cache_dir, decoding), mmap_mode="r")
                if decode:
                    progress.advance(len(array))
                if len(array) < min_frames:
                    logger.warning(
                        "Skipping %s: %d frames at %s fps < clip length %d.",
                        video.name,
                        len(array),
                        fps,
                        min_frames,
                    )
                    continue
                names.append(video.name)
                arrays.append(array)
        if not arrays:
            raise DataError(
                f"No training video has at least {min_frames} frames at {fps} fps; "
                "raise --fps or lower --clip-len."
            )
        return cls(names, arrays, fps, reverse_time)

    def __len__(self) -> int:
        return len(self._arrays)

    @property
    def lengths(self) -> list[int]:
        """Frames per video."""
        return [len(a) for a in self._arrays]

    def frames(self, video: int, indices: list[int] | np.ndarray) -> np.ndarray:
        """uint8 [n, H, W, 3] frames at `indices` (of the time-reversed video when `reverse_time`)."""
        array = self._arrays[video]
        idx = np.asarray(indices, dtype=np.int64)
        if self.reverse_time:
            idx = len(array) - 1 - idx
        return np.ascontiguousarray(array[idx])


def with_data_fps(config: TrainConfig, fps_given: bool = False) -> TrainConfig:
    """`config` training at the frame rate of the frames LMDB given as `--data` (its record, else the authors'
    1 fps) unless `fps_given`; unchanged for videos. An explicit `--fps` the LMDB does not hold: ConfigError.

    Why: a preset's fps is the rate videos are decoded at; an LMDB's keys `<video>_<t>` already count frames
    at its own rate, so that rate is the run's (and the one its train_config.json records).
    """
    frames = config.frames
    if frames.data is None or not is_frames_lmdb(frames.data):
        return config
    stored = read_layout(frames.data)[0].fps
    if abs(frames.fps - stored) <= 1e-9:
        return config
    if fps_given:
        raise ConfigError(
            f"--fps {frames.fps:g}: --data {frames.data} holds frames at {stored:g} fps (its keys "
            f"<video>_<t> count frames at that rate); leave out --fps to train at {stored:g} fps, or write "
            f"an LMDB at {frames.fps:g} fps with `plstitch write-lmdb --fps {frames.fps:g}`."
        )
    logger.info("--data %s holds frames at %g fps: training at %g fps.", frames.data, stored, stored)
    return config.with_changes(frames=frames.replace(fps=stored))


def open_frame_store(config: TrainConfig, cache_dir: Path) -> FrameStore | LmdbFrameStore:
    """A run's frames: `--data` LMDB as it is, else its videos decoded once into `config.frames.frame_store`.

    Each stage says what it does before doing it (listing, generating, decoding): on a first run this is
    where the time before the first step goes.
    """
    frames, clip_len = config.frames, config.sampling.clip_len
    if frames.data is not None and is_frames_lmdb(frames.data):
        logger.info("preparing data: indexing the keys of frames LMDB %s", frames.data)
        return LmdbFrameStore.open(frames.data, frames.fps, clip_len, frames.reverse_time)
    where = frames.data or f"dataset {frames.dataset} (split {frames.split})"
    logger.info("preparing data: listing the videos of %s", where)
    videos, source = select_training_videos(
        frames.data, frames.dataset, frames.root, frames.split, frames.fps
    )
    decoding = training_decoding(frames, videos)
    if frames.frame_store == "raw":
        return FrameStore.build(
            videos, frames.fps, frames.frame_size, cache_dir, clip_len, frames.reverse_time, decoding
        )
    target = cache_dir / _lmdb_cache_name(videos, frames, decoding)
    write_frames_lmdb(
        videos, target, frames.fps, frames.frame_size, frames.jpeg_quality, source=source, decoding=decoding
    )
    return LmdbFrameStore.open(target, frames.fps, clip_len, frames.reverse_time)


def training_decoding(frames: FramesConfig, videos: list[TrainingVideo]) -> Decoding:
    """The decoder of a run's frame caches (`frames.decoder`; on the CPU: caches are written on the host);
    `auto` tries the first video file and says on stderr what it chose."""
    sample = next((video.source for video in videos if video.source.is_file()), None)
    decoding = resolve_decoding(frames.decoder, "cpu", "cpu", sample)
    if int(os.environ.get("RANK", "0")) == 0:
        announce_decoding(frames.decoder, decoding)
    return decoding


def _lmdb_cache_name(videos: list[TrainingVideo], frames: FramesConfig, decoding: Decoding = PYAV) -> str:
    """`frames-<digest>.lmdb`, the digest over every source's path, size and mtime and the decode settings."""
    digest = hashlib.sha1(f"{frames.jpeg_quality}".encode())
    for video in videos:
        key = _source_key(video, frames.fps, frames.frame_size, decoding)
        digest.update(f"|{video.name}|{key}".encode())
    return f"frames-{digest.hexdigest()[:16]}.lmdb"


class TrainDataset(Dataset):
    """`SampleSpec` -> {"clip" [k,3,S,S], "crops" [2,3,S,S], "context" [3,3,S,S], "masks" [3,h,w] bool},
    plus "local_crops" [L,3,s,s] when the augmentation asks for iBOT local views.

    Only the parts the enabled branches need are built. The clip comes from `spec.clip_source`, the rest from
    `spec.video`. Crops are the two iBOT global views of the current frame; context is (past, current,
    future) with the jigsaw transforms (current: own resized crop; neighbours: resize). Every frame gets its
    own augmentation draw. Masks 0-1 belong to the crops, mask 2 to the jigsaw current frame.
    """

    def __init__(
        self,
        store: FrameStore | LmdbFrameStore,
        img_size: int,
        grid: tuple[int, int],
        mask_ratio: float = 0.3,
        need_clip: bool = True,
        need_mim: bool = True,
        need_jigsaw: bool = True,
        *,
        augmentation: AugmentationSettings | None = None,
    ) -> None:
        settings = augmentation or AugmentationSettings(img_size=img_size)
        if settings.img_size != img_size:
            raise ConfigError(f"augmentation img_size {settings.img_size} differs from img_size {img_size}.")
        self.store = store
        self.need_clip, self.need_mim, self.need_jigsaw = need_clip, need_mim, need_jigsaw
        self.augment: ItemAugmentation = settings.build()
        self.masker = BlockMaskGenerator(grid=grid, ratio=mask_ratio)
        self.grid = grid

    def __getitem__(self, spec: SampleSpec) -> dict[str, torch.Tensor]:
        item: dict[str, torch.Tensor] = {}
        if self.need_clip:
            clip = _chw(self.store.frames(spec.clip_source, list(spec.clip)))
            item["clip"] = self.augment.clip(clip, spec.seed)
        if self.need_mim:
            current = _chw(self.store.frames(spec.video, [spec.current]))[0]
            item["crops"] = self.augment.crops(current, spec.seed)
            if self.augment.settings.local_crops:
                item["local_crops"] = self.augment.local_crops(current, spec.seed)
        if self.need_jigsaw:
            triplet = _chw(self.store.frames(spec.video, [spec.past, spec.current, spec.future]))
            item["context"] = self.augment.context(triplet, spec.seed)
        if self.need_mim or self.need_jigsaw:
            mask_rng = np.random.default_rng(spec.seed)
            item["masks"] = torch.stack([self.masker(mask_rng) for _ in range(3)]).bool()
        return item


def local_crop_size(size: int, img_size: int, patch: int) -> int:
    """The local views' side in pixels: `size`, or for 0 DINO's 96/224 of `img_size` in whole patches."""
    if size:
        return size
    return max(patch, round(img_size * 96 / 224 / patch) * patch)


def _chw(frames: np.ndarray) -> torch.Tensor:
    """uint8 [n,H,W,3] ndarray -> uint8 [n,3,H,W] tensor."""
    return torch.from_numpy(frames).permute(0, 3, 1, 2).contiguous()


class TrainingData(NamedTuple):
    """The items of a run (`dataset`) and the batches of spec lists one rank draws from it (`sampler`)."""

    dataset: TrainDataset
    sampler: TrainSampler


def micro_batch_size(optim: OptimConfig, world_size: int = 1) -> int:
    """Items per forward pass on one rank: `batch_size / (world_size * accum_steps)`, an exact division.

    Why separate: the trainer checks it before decoding any video, so a bad batch split fails at once.
    """
    micro_batch, remainder = divmod(optim.batch_size, world_size * optim.accum_steps)
    if remainder or micro_batch < 1:
        raise TrainingError(
            f"batch_size {optim.batch_size} must be a multiple of processes ({world_size}) x "
            f"accum_steps ({optim.accum_steps})."
        )
    return micro_batch


def build_training_data(
    config: TrainConfig,
    store: FrameStore | LmdbFrameStore,
    grid: tuple[int, int],
    *,
    rank: int = 0,
    world_size: int = 1,
) -> TrainingData:
    """The dataset and this rank's sampler of a run: every data setting of `config`, read in one place.

    `grid` is the backbone's patch grid (mask shape). Why one builder: a hand-built copy (a benchmark, a
    tool) silently drifts from what training samples once a setting is added.
    """
    model, loss, sampling = config.model, config.loss, config.sampling
    dataset = TrainDataset(
        store,
        model.img_size,
        grid,
        model.mask_ratio,
        need_clip=loss.lambda_vid > 0,
        need_mim=loss.lambda_mim > 0,
        need_jigsaw=loss.lambda_jigsaw > 0,
        augmentation=AugmentationSettings(
            model.img_size,
            neighbour_colour=sampling.jigsaw_neighbour_colour,
            local_crops=sampling.local_crops,
            local_crop_size=local_crop_size(
                sampling.local_crop_size, model.img_size, model.img_size // grid[0]
            ),
            local_crop_scale=sampling.local_crops_scale,
        ),
    )
    sampler = TrainSampler.from_settings(
        sampling,
        store.lengths,
        batch_size=micro_batch_size(config.optim, world_size),
        fps=config.frames.fps,
        seed=config.run.seed,
        rank=rank,
        world_size=world_size,
    )
    return TrainingData(dataset, sampler)

"""Frames and features for the figures: decode a dataset's videos and encode them with one or more encoders.

Frames are streamed (decode a batch, encode it with every encoder, drop the pixels), so long videos never
sit in memory. Kept apart from the figure modules so that those only compute and draw.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.datasets.base import decode, labels_at
from plstitch_eval.data.video import probe
from plstitch_eval.errors import DataError
from plstitch_eval.preprocess import frame_plan, normalize_crops, prepare_frame
from plstitch_eval.utils.device import autocast


@dataclass
class EncodedVideo:
    """Per-frame features of one video from each encoder (key -> [T, D]) with frame times and labels."""

    video: str
    features: dict[str, np.ndarray]
    frame_times: np.ndarray
    labels: np.ndarray


def dataset_records(dataset: str, root: str | Path | None, split: str | None, fps: float | None = None):
    """The dataset adapter and the records of one split (`None`/"all" = every video)."""
    adapter = get_dataset(dataset, root=root) if fps is None else get_dataset(dataset, root=root, fps=fps)
    records = adapter.videos(split)
    if not records:
        raise DataError(f"Dataset {dataset!r} (root {root}) has no videos in split {split!r}.")
    return adapter, records


def model_inputs(encoder: Any, images: list[Any], device: torch.device | str) -> torch.Tensor:
    """The encoder's normalised batch [B,3,h,w] on `device`: uint8 crops on CPU, normalised on the device.

    The same steps as extraction, so figure features equal the ones in a feature store.
    """
    plan = frame_plan(encoder.data_config)
    crops = torch.stack([prepare_frame(image, plan) for image in images])
    return normalize_crops(crops.to(device, non_blocking=True), plan)


def _batch_features(
    encoders: Mapping[str, Any], images: list[Any], device: torch.device, precision: str
) -> dict[str, np.ndarray]:
    """Encode one batch of images with every encoder, each through its own preprocessing."""
    out = {}
    with torch.no_grad():
        for key, encoder in encoders.items():
            x = model_inputs(encoder, images, device)
            with autocast(device, precision):
                out[key] = encoder(x).float().cpu().numpy()
    return out


def encode_records(
    records: Iterable[Any],
    encoders: Mapping[str, Any],
    fps: float,
    device: torch.device | str = "cpu",
    precision: str = "fp32",
    batch_size: int = 32,
    max_frames_per_video: int = 0,
) -> Iterator[EncodedVideo]:
    """Decode each record at `fps` (lowered to give at most `max_frames_per_video` frames) and encode."""
    device = torch.device(device)
    for record in records:
        rate = fps
        if max_frames_per_video > 0:
            duration = probe(record.source, folder_fps=record.folder_fps).duration
            if duration > 0:
                rate = min(fps, max_frames_per_video / duration)
        chunks: dict[str, list[np.ndarray]] = {key: [] for key in encoders}
        times: list[float] = []
        batch: list[Any] = []
        for frame in decode(record, fps=rate):
            batch.append(frame.image)
            times.append(frame.time)
            if len(batch) == batch_size:
                for key, feats in _batch_features(encoders, batch, device, precision).items():
                    chunks[key].append(feats)
                batch = []
        if batch:
            for key, feats in _batch_features(encoders, batch, device, precision).items():
                chunks[key].append(feats)
        if not times:
            raise DataError(f"{record.source}: decoded no frames for video {record.name!r}.")
        labels, _ = labels_at(record, times)
        n = len(labels)
        yield EncodedVideo(
            video=record.name,
            features={key: np.concatenate(c)[:n].astype(np.float32) for key, c in chunks.items()},
            frame_times=np.asarray(times[:n], dtype=np.float64),
            labels=labels,
        )


def frame_at(record: Any, time: float, size: int | None = 224) -> np.ndarray:
    """The first decoded frame at or after `time` seconds (the last one if the video is shorter)."""
    last = None
    for frame in decode(record, fps=None, size=size):
        last = frame.image
        if frame.time >= time - 1e-6:
            return frame.image
    if last is None:
        raise DataError(f"{record.source}: decoded no frames for video {record.name!r}.")
    return last

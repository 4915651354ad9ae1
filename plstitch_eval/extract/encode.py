"""The main process's side of a run: frame chunks in, batched forwards on the device, each video labelled
and written atomically to the store as soon as its last chunk is encoded (`EncodeLoop`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from rich.text import Text
from torch.utils.data import DataLoader

from plstitch_eval.data.datasets import VideoRecord, cvs_at, labels_at, tools_at, triplets_at
from plstitch_eval.errors import DecodeError
from plstitch_eval.extract.chunks import FrameChunk
from plstitch_eval.extract.summary import ELSEWHERE, VideoResult
from plstitch_eval.preprocess import FramePlan, normalize_crops
from plstitch_eval.store.features import BLACK_MARGINS, FeatureStore, VideoFeatures
from plstitch_eval.utils.console import console
from plstitch_eval.utils.device import autocast


class EncodeLoop:
    """Consumes frame chunks, runs batched forwards and writes each video as soon as its last chunk is in.

    One loop per model: in a pass over several models (`model` its position there) each chunk goes to the
    loop of the model it was cut for (`EncodeLoops`)."""

    def __init__(
        self,
        store: FeatureStore,
        records: list[VideoRecord],
        encoder: Any,
        plan: FramePlan,
        device: torch.device,
        precision: str,
        model: int = 0,
    ) -> None:
        self.store = store
        self.records = records
        self.index_of = {r.name: i for i, r in enumerate(records)}
        self.encoder = encoder
        self.plan = plan
        self.device = device
        self.precision = precision
        self.model = model
        self.frames = 0
        self.started = time.perf_counter()
        self.pending: dict[int, tuple[list[torch.Tensor], list[np.ndarray], float]] = {}

    def results(self, loader: DataLoader, fail_fast: bool) -> Iterator[VideoResult]:
        """Yield one `VideoResult` per finished video: written, failed, or skipped as another run wrote it."""
        for chunk in loader:
            result = self.take(chunk, loader.dataset, fail_fast)
            if result is not None:
                yield result

    def take(self, chunk: FrameChunk, stream: Any, fail_fast: bool) -> VideoResult | None:
        """Encode one chunk; the video's result once it is finished (`stream.mark_written` is told)."""
        record = self.records[chunk.video_index]
        if chunk.waiting:
            message = f"{record.name}: another run is extracting it; waiting for that run"
            console.print(Text(message), soft_wrap=True)
            return None
        if chunk.elsewhere:
            return VideoResult(record.name, "skipped", note=ELSEWHERE)
        feats, times, started = self.pending.setdefault(chunk.video_index, ([], [], time.perf_counter()))
        if chunk.error is not None:
            self.pending.pop(chunk.video_index)
            stream.mark_written(chunk.video_index, self.model)  # nothing to protect: another run may try it
            if fail_fast:
                raise DecodeError(f"{chunk.error} (stopped: --fail-fast)")
            return VideoResult(record.name, "failed", error=chunk.error)
        if len(chunk.images):
            feats.append(self.encode(chunk.images))
            times.append(chunk.frame_times.numpy())
            self.frames += len(chunk.images)
        if not chunk.last:
            return None
        self.pending.pop(chunk.video_index)
        if chunk.margin is not None:  # recorded before its features: a written video has its box
            self.store.record_per_video(BLACK_MARGINS, {record.name: chunk.margin})
        result = self.write(record, feats, times, started)
        stream.mark_written(chunk.video_index, self.model)
        return result

    @torch.inference_mode()
    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """One batched forward: uint8 frames (or windows) to the device, normalised there; float32 features
        stay there.

        Keeping them on the device until the video is complete avoids a host sync per batch on CUDA.
        """
        x = normalize_crops(images.to(self.device, non_blocking=True), self.plan)
        with autocast(self.device, self.precision):
            features = self.encoder(x)
        return features.float()

    def write(
        self, record: VideoRecord, feats: list[torch.Tensor], times: list[np.ndarray], started: float
    ) -> VideoResult:
        """Label the sampled frames (dropping those past the annotations) and write the video atomically."""
        frame_times = np.concatenate(times)
        labels, _ = labels_at(record, frame_times)
        keep = len(labels)
        features = torch.cat(feats)[:keep].cpu().numpy()
        tools, triplets = tools_at(record, frame_times[:keep]), triplets_at(record, frame_times[:keep])
        cvs = cvs_at(record, frame_times[:keep])
        self.store.write(
            VideoFeatures(record.name, features, labels, frame_times[:keep], tools, triplets, cvs)
        )
        return VideoResult(record.name, "done", frames=keep, seconds=time.perf_counter() - started)

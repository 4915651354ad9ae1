"""k-NN while it trains: before a new run's first step (logged as step 0), every `eval_every` steps and at the
last, the teacher backbone's k-NN accuracy on an evaluation dataset by the toolkit's own protocol
(`plstitch_eval.knn_vote`: FAISS cosine k-NN, k = 20, votes weighted exp(sim / 0.07)); bank = the dataset's
train split, queries = `eval_split` (default its val split, else test). docs/training.md, "k-NN while it
trains".

Why it equals `plstitch extract` + `plstitch knn` on the same weights: the frames are those extraction takes
(`extract.chunks.iter_video_chunks` at `eval_fps` with the exported backbone's `DataConfig`, labelled by
`labels_at`), normalised and encoded in the same per-video batches, and the teacher's feature is the CLS token
after the final norm (`Encoder.forward`). The videos are decoded once per run into a uint8 cache under the run
folder (`knn_frames/`). An evaluation draws no random number and runs under no_grad with the backbone in eval
mode, so a run computes the same with it as without it. The best step is recorded (`knn_eval.json`), never
used to pick weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord, get_dataset, labels_at
from plstitch_eval.encode_options import EncodeOptions
from plstitch_eval.errors import ConfigError, DataError
from plstitch_eval.extract.chunks import VideoJob, iter_video_chunks
from plstitch_eval.hub.run_folder import KNN_EVAL_NAME, KNN_FRAMES_DIR, knn_eval_path, knn_frames_dir
from plstitch_eval.knn_vote import KnnConfig, knn_predict
from plstitch_eval.metrics.frames import frame_metrics
from plstitch_eval.preprocess import DataConfig, FramePlan, frame_plan, normalize_crops
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.device import autocast
from plstitch_eval.utils.io import atomic_path, write_json_atomic
from plstitch_train.config import RunConfig, TrainConfig

__all__ = [
    "BANK_SPLIT",
    "KNN_EVAL_NAME",
    "KNN_FRAMES_DIR",
    "EvalFrames",
    "KnnMonitor",
    "knn_scores",
    "query_split",
    "teacher_features",
]

BANK_SPLIT = "train"
BATCH_SIZE = EncodeOptions.batch_size  # frames per forward, as `plstitch extract` batches them


@dataclass
class EvalFrames:
    """One split's frames as the model sees them before normalisation: uint8 crops [N, 3, h, w] of its
    videos in order, their labels [N] (-1 unlabelled) and each video's name and frame count."""

    crops: np.ndarray
    labels: np.ndarray
    videos: list[str]
    counts: list[int]


def query_split(adapter: DatasetAdapter, split: str | None) -> str:
    """The split whose frames are queried: `split`, else val when the dataset has one, else test."""
    if split is not None:
        return split
    return "val" if adapter.splits().get("val") else "test"


def eval_adapter(run: RunConfig) -> tuple[DatasetAdapter, str]:
    """The evaluation dataset of `run` and its query split, checked (one-line errors before training)."""
    adapter = get_dataset(run.eval_dataset, root=run.eval_root)
    split = query_split(adapter, run.eval_split)
    splits = adapter.splits()
    for name in (BANK_SPLIT, split):
        if not splits.get(name):
            raise ConfigError(
                f"--eval-dataset {run.eval_dataset}: its {name!r} split holds no videos; choose another "
                "--eval-split or dataset (plstitch datasets lists their splits)."
            )
    return adapter, split


def decode_split(records: list[VideoRecord], plan: FramePlan) -> EvalFrames:
    """Decode `records` as `plstitch extract` does: the sampled frames' uint8 crops, labelled at their
    times (frames past the annotations dropped); a video that fails to decode or has no label is refused."""
    crops, labels, counts = [], [], []
    for index, record in enumerate(records):
        job = VideoJob(index, Path(record.source), record.folder_fps, record.name)
        images, times = [], []
        for chunk in iter_video_chunks(job, plan, BATCH_SIZE):
            if chunk.error is not None:
                raise DataError(f"k-NN evaluation video {record.name}: {chunk.error}")
            images.append(chunk.images)
            times.append(chunk.frame_times.numpy())
        video_labels, _ = labels_at(record, np.concatenate(times))
        if not (video_labels >= 0).any():
            raise DataError(f"k-NN evaluation video {record.name} has no labelled frame; drop it.")
        crops.append(torch.cat(images)[: len(video_labels)].numpy())
        labels.append(video_labels)
        counts.append(len(video_labels))
    names = [r.name for r in records]
    return EvalFrames(np.concatenate(crops), np.concatenate(labels).astype(np.int64), names, counts)


def cached_split(
    folder: Path, key: dict[str, Any], records: list[VideoRecord], plan: FramePlan
) -> EvalFrames:
    """`decode_split`'s frames from `folder` when a run decoded them with the same `key`, else decoded and
    saved there (crops .npy, memory-mapped when read; the rest .json; each written atomically)."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    stem = folder / f"{key['split']}-{digest}"
    meta_path, crops_path = stem.with_suffix(".json"), stem.with_suffix(".npy")
    if meta_path.is_file() and crops_path.is_file():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        crops = np.load(crops_path, mmap_mode="r")
        return EvalFrames(crops, np.asarray(meta["labels"], np.int64), meta["videos"], meta["counts"])
    frames = decode_split(records, plan)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(crops_path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, frames.crops)
    meta = {"key": key, "videos": frames.videos, "counts": frames.counts, "labels": frames.labels.tolist()}
    write_json_atomic(meta_path, meta)
    return frames


@torch.no_grad()
def teacher_features(
    vit: nn.Module, frames: EvalFrames, plan: FramePlan, device: torch.device, precision: str
) -> Tensor:
    """CLS features [N, D] (float32, on the host) of `frames` through `vit` (`Encoder.forward` of a ViT), each
    video in batches of BATCH_SIZE as extraction encodes it."""
    out, start = [], 0
    for count in frames.counts:
        for first in range(start, start + count, BATCH_SIZE):
            last = min(first + BATCH_SIZE, start + count)
            images = torch.from_numpy(np.array(frames.crops[first:last]))  # a copy: the cache is read-only
            x = normalize_crops(images.to(device), plan)
            with autocast(device, precision):
                features = vit.forward_features(x)[:, 0]
            out.append(features.float().cpu())
        start += count
    return torch.cat(out)


def knn_scores(
    bank: Tensor, bank_labels: Tensor, queries: Tensor, query_frames: EvalFrames, num_classes: int
) -> dict[str, float]:
    """k-NN accuracy and macro F1 (per video, averaged; percent) of `queries` voted on by the labelled
    `bank` frames (`plstitch_eval.knn_vote.knn_predict`, `KnnConfig()` as `plstitch knn` runs it)."""
    keep = bank_labels >= 0
    preds = knn_predict(
        bank[keep].numpy(), bank_labels[keep].numpy(), queries.numpy(), KnnConfig(), num_classes=num_classes
    )
    bounds = np.cumsum([0, *query_frames.counts])
    per_video = [preds[bounds[i] : bounds[i + 1]] for i in range(len(query_frames.counts))]
    gts = [query_frames.labels[bounds[i] : bounds[i + 1]] for i in range(len(query_frames.counts))]
    metrics = frame_metrics(per_video, gts, num_classes, query_frames.videos)["metrics"]
    return {"knn_acc": metrics["accuracy"], "knn_f1": metrics["macro_f1_video"]}


class KnnMonitor:
    """The teacher's k-NN accuracy every `run.eval_every` steps and at the last step (off when 0); the
    evaluation dataset is checked on every rank, its frames decoded and evaluated on rank 0 only."""

    def __init__(self, config: TrainConfig, out_dir: Path, is_main: bool) -> None:
        run = config.run
        self.every, self.out_dir, self.is_main = run.eval_every, out_dir, is_main
        self.enabled = self.every > 0
        self.plan = frame_plan(DataConfig.for_size(config.model.img_size), run.eval_fps)
        self.evaluations: list[dict[str, float]] = []
        self.bank: EvalFrames | None = None
        self.queries: EvalFrames | None = None
        if not self.enabled:
            return
        self.adapter, self.split = eval_adapter(run)
        self.num_classes = max(len(self.adapter.class_names), 1)
        self.settings = {
            "dataset": run.eval_dataset,
            "root": None if run.eval_root is None else os.path.abspath(run.eval_root),
            "bank_split": BANK_SPLIT,
            "query_split": self.split,
            "fps": run.eval_fps,
            "protocol": "k-NN, k=20, cosine, votes exp(sim/0.07) (plstitch knn defaults)",
        }

    def prepare(self, start_step: int) -> None:
        """Rank 0: decode (or read back) the bank and query frames; keep the evaluations up to `start_step` of
        an earlier `knn_eval.json` (a resume continues its series, a new run starts one)."""
        if not (self.enabled and self.is_main):
            return
        started = time.perf_counter()
        folder = knn_frames_dir(self.out_dir)
        key = {**self.settings, "plan": repr(self.plan)}
        self.bank = cached_split(
            folder, {**key, "split": BANK_SPLIT}, self.adapter.videos(BANK_SPLIT), self.plan
        )
        self.queries = cached_split(
            folder, {**key, "split": self.split}, self.adapter.videos(self.split), self.plan
        )
        logger.info(
            "k-NN every %d steps on %s: %d %s frames vote for %d %s frames (%.1fs to prepare)",
            self.every,
            self.settings["dataset"],
            int((self.bank.labels >= 0).sum()),
            BANK_SPLIT,
            len(self.queries.labels),
            self.split,
            time.perf_counter() - started,
        )
        path = knn_eval_path(self.out_dir)
        if start_step > 0 and path.is_file():
            earlier = json.loads(path.read_text(encoding="utf-8")).get("evaluations", [])
            self.evaluations = [e for e in earlier if e["step"] <= start_step]

    def due(self, step: int, total_steps: int) -> bool:
        """Whether the teacher is evaluated after optimizer step `step` (1-based, as logged)."""
        return self.enabled and (step % self.every == 0 or step == total_steps)

    def measure(self, vit: nn.Module, step: int, device: torch.device, precision: str) -> dict[str, float]:
        """Rank 0: `knn_acc`, `knn_f1` and `knn_seconds` of the backbone `vit` after step `step`, recorded in
        `knn_eval.json`; the backbone's train/eval mode is restored."""
        started = time.perf_counter()
        was_training = vit.training
        vit.eval()
        try:
            bank = teacher_features(vit, self.bank, self.plan, device, precision)
            queries = teacher_features(vit, self.queries, self.plan, device, precision)
        finally:
            vit.train(was_training)
        scores = knn_scores(bank, torch.from_numpy(self.bank.labels), queries, self.queries, self.num_classes)
        scores["knn_seconds"] = time.perf_counter() - started
        self.evaluations.append({"step": step, **scores})
        write_json_atomic(knn_eval_path(self.out_dir), self.summary())
        return scores

    @property
    def best(self) -> dict[str, float] | None:
        """The evaluation of highest accuracy (the earliest on a tie), or None before the first."""
        return max(self.evaluations, key=lambda e: (e["knn_acc"], -e["step"]), default=None)

    def summary(self) -> dict[str, Any]:
        """What `knn_eval.json` holds: the settings, every evaluation, and the best step (recorded only)."""
        best = self.best
        return {
            **self.settings,
            "knn_best": None if best is None else {"step": best["step"], "knn_acc": best["knn_acc"]},
            "note": "the best step is recorded, not used to choose weights: backbone/ is the last step's",
            "evaluations": self.evaluations,
        }


def read_knn_best(run_dir: str | Path) -> dict[str, float] | None:
    """`knn_best` of a run folder's `knn_eval.json` (step and accuracy), or None without one."""
    path = knn_eval_path(run_dir)
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("knn_best")

"""The truth of a case, read as `plstitch predict` reads it (`predict.sources`: `--labels` files, a
`--dataset`'s annotations) and put beside the predictions: the true phase at each sampled frame, and the true
remaining minutes of a labelled (so complete) case under an rsd probe.

Labels are read with the phase probe's classes; a folder of regression probes alone has no phase ribbon to
compare against, so there the labels mark the case complete (the remaining-time truth), as in predict.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from plstitch_eval.errors import ConfigError
from plstitch_eval.metrics.remaining import remaining_targets
from plstitch_eval.predict.sources import (
    VideoSource,
    read_labels,
    sources_from_dataset,
    sources_from_paths,
)
from plstitch_eval.report.case import REMAINING, CaseVideo


def attach_truth(
    videos: Sequence[CaseVideo],
    labels: Sequence[Path] = (),
    labels_fps: float | None = None,
    dataset: str | None = None,
    root: Path | None = None,
) -> None:
    """Give each video its truth from `--labels` (one file per video, in the report's order) or from a
    dataset's annotations; nothing when neither is given."""
    if dataset is not None:
        sources = dataset_sources(videos, dataset, root)
    elif labels:
        sources = label_sources(videos, labels, labels_fps)
    else:
        return
    for video in videos:
        set_truth(video, sources[video.name])


def label_sources(
    videos: Sequence[CaseVideo], labels: Sequence[Path], labels_fps: float | None
) -> dict[str, VideoSource]:
    """One `--labels` file per video: rows at `labels_fps`, else at the frame rate of the video file the
    summary names (predict's default)."""
    if len(labels) != len(videos):
        names = ", ".join(v.name for v in videos)
        raise ConfigError(
            f"--labels was given {len(labels)} time(s) for {len(videos)} video(s) ({names}); give one label "
            "file per video, in that order."
        )
    if labels_fps is not None and not labels_fps > 0:
        raise ConfigError(f"--labels-fps must be > 0, got {labels_fps}.")
    out = {}
    for video, path in zip(videos, labels, strict=True):
        path = Path(path).expanduser()
        if not path.is_file():
            raise ConfigError(f"--labels {path}: no such file; check the path.")
        classes = video.phases.class_names if video.phases is not None else None
        out[video.name] = label_source(video, path, classes, labels_fps)
    return out


def label_source(
    video: CaseVideo, path: Path, classes: list[str] | None, labels_fps: float | None
) -> VideoSource:
    """The video's labels from `path` (not parsed without a phase track: they then only mark it complete)."""
    if classes is None:
        return VideoSource(video.name, None)
    file = Path(video.source) if video.source else None
    if labels_fps is None and file is not None and file.is_file():
        return sources_from_paths([file], classes, [path])[0]  # the video's own frame rate
    if labels_fps is None:
        raise ConfigError(
            f"--labels {path}: the frame rate of {video.name}'s label rows is unknown (no summary JSON in "
            "its folder names its video file); pass --labels-fps."
        )
    return VideoSource(video.name, None, read_labels(path, classes), labels_fps)


def dataset_sources(videos: Sequence[CaseVideo], dataset: str, root: Path | None) -> dict[str, VideoSource]:
    """The dataset's annotations of the report's videos (its classes must be the phase probe's)."""
    with_phases = [v for v in videos if v.phases is not None]
    names = [v.name for v in videos]
    if with_phases:
        classes = with_phases[0].phases.class_names
    else:
        from plstitch_eval.data.datasets import get_dataset

        classes = list(get_dataset(dataset, root=root).class_names)
    sources = sources_from_dataset(dataset, root, classes, None, names)
    return {source.name: source for source in sources}


def set_truth(video: CaseVideo, source: VideoSource) -> None:
    """The true phase at each sampled frame, and the rsd curve's true remaining minutes."""
    video.labelled = True
    if video.phases is not None:
        video.phases.truth = source.ground_truth(video.phases.frame_times)
    curve = video.curve(REMAINING)
    if curve is not None and len(curve.frame_times):
        curve.truth = remaining_targets(curve.frame_times)

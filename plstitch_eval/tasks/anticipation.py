"""The `anticipation` task: minutes until each phase (and tool) next occurs, clipped at a horizon.

Targets and the MAE family are `metrics/anticipation.py`'s (Rivoir et al., MICCAI 2020; Yuan et al., MICCAI
2021's `test_scores.py`): pooled per class over every test frame, and beside them per video. Phases come
from the frame labels, tools from the tool labels (a frame not annotated counts as no tool shown). The
reference row predicts, for every frame, the training frames' mean target at the same elapsed time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plstitch_eval.errors import ConfigError
from plstitch_eval.metrics.anticipation import (
    anticipation_scores,
    anticipation_scores_per_video,
    anticipation_targets,
    phase_presence,
)
from plstitch_eval.metrics.remaining import mean_target_at_elapsed
from plstitch_eval.store.features import VideoFeatures
from plstitch_eval.tasks.registry import (
    REGRESSION,
    Regression,
    Scored,
    StoreInfo,
    Task,
    TaskSettings,
    register_task,
)

GROUPS = {"phases": "phase", "tools": "tool"}  # what anticipation predicts -> its metrics' prefix


def groups(info: StoreInfo, settings: TaskSettings) -> list[str]:
    """The label groups anticipated: as asked, or phases and (where the store has tool labels) tools."""
    if settings.anticipate == "auto":
        return ["phases", *(["tools"] if info.tool_names else [])]
    asked = [g for g in settings.anticipate.split(",") if g]
    if "tools" in asked and not info.tool_names:
        raise ConfigError(
            f"--anticipate tools: {info.root} has no tool labels (it holds {info.labels_held()}); "
            "use --anticipate phases, or extract a dataset with tool annotations (Cholec80, synthetic)."
        )
    if "phases" in asked and not info.class_names:
        raise ConfigError(
            f"--anticipate phases: {info.root} records no class_names (it holds no phase labels)."
        )
    return [g for g in GROUPS if g in asked]


def check(info: StoreInfo, settings: TaskSettings) -> None:
    """Refuse, in one line, anticipating labels the store does not hold (before any work)."""
    groups(info, settings)


def _names(info: StoreInfo, group: str) -> list[str]:
    return list(info.class_names if group == "phases" else info.tool_names)


def outputs(info: StoreInfo, settings: TaskSettings) -> list[str]:
    """One output per anticipated phase, then per tool (by name)."""
    return [name for group in groups(info, settings) for name in _names(info, group)]


def _spans(info: StoreInfo, settings: TaskSettings) -> dict[str, slice]:
    spans, start = {}, 0
    for group in groups(info, settings):
        spans[group] = slice(start, start + len(_names(info, group)))
        start = spans[group].stop
    return spans


def targets(item: VideoFeatures, info: StoreInfo, settings: TaskSettings) -> np.ndarray:
    """Minutes until each output next occurs in this video (frames x outputs), clipped at the horizon."""
    present = []
    for group in groups(info, settings):
        if group == "phases":
            present.append(phase_presence(item.labels, len(info.class_names)))
        else:
            if item.tools is None:
                raise ConfigError(
                    f"Video {item.video!r} of {info.root} has no tool labels; extract it again with "
                    "plstitch extract --overwrite, or use --anticipate phases."
                )
            present.append(np.asarray(item.tools) == 1)
    return anticipation_targets(np.concatenate(present, axis=1), item.frame_times, settings.horizon_min)


def score(
    predictions: Mapping[str, np.ndarray],
    truth: Mapping[str, np.ndarray],
    info: StoreInfo,
    settings: TaskSettings,
) -> Scored:
    """The MAE family per group: pooled over the videos' frames (the headline) and as the mean over videos;
    each the mean over the classes where it is defined (`per_class` keeps every class and the plain mean)."""
    videos = sorted(truth)
    metrics: dict[str, float | None] = {}
    per_video: dict[str, dict[str, float | None]] = {v: {} for v in videos}
    per_class: dict[str, dict] = {}
    for group, span in _spans(info, settings).items():
        prefix, names = GROUPS[group], _names(info, group)
        ys = [np.asarray(predictions[v])[:, span] for v in videos]
        ts = [np.asarray(truth[v])[:, span] for v in videos]
        pooled = anticipation_scores(np.concatenate(ys), np.concatenate(ts), settings.horizon_min, names)
        by_video = anticipation_scores_per_video(ys, ts, settings.horizon_min, names)
        metrics.update({f"{prefix}_{m}": v for m, v in pooled["mean_defined"].items()})
        metrics.update({f"{prefix}_{m}_per_video": v for m, v in by_video["mean_defined"].items()})
        per_class[group] = {
            "classes": names,
            "pooled": pooled["per_class"],
            "per_video": by_video["per_class"],
            "reference_mean": pooled["mean"],  # test_scores.py's plain np.mean: null once one class is
            "defined": pooled["defined"],
        }
        for video, own in zip(videos, by_video["per_video"], strict=True):
            per_video[video].update({f"{prefix}_{m}": v for m, v in own["mean_defined"].items()})
    every = np.concatenate([np.asarray(predictions[v]) for v in videos])
    truths = np.concatenate([np.asarray(truth[v]) for v in videos])
    wmae = anticipation_scores(every, truths, settings.horizon_min)["per_class"]["wMAE"]
    defined = [w for w in wmae if w is not None]
    return Scored(metrics, per_video, per_class, float(np.mean(defined)) if defined else float("inf"))


def elapsed_min(item: VideoFeatures) -> np.ndarray:
    """Each frame's elapsed time in minutes (its presentation time)."""
    return np.asarray(item.frame_times, dtype=np.float64) / 60.0


def references(
    train: Sequence[VideoFeatures], test: Sequence[VideoFeatures], info: StoreInfo, settings: TaskSettings
) -> dict[str, tuple[str, dict[str, np.ndarray]]]:
    """The training frames' mean target at the same elapsed time (0.1-minute bins), for each test frame."""
    train_targets = [targets(item, info, settings) for item in train]
    train_elapsed = [elapsed_min(item) for item in train]
    preds = {it.video: mean_target_at_elapsed(train_targets, train_elapsed, elapsed_min(it)) for it in test}
    return {"elapsed-mean": ("the training frames' mean target at the same elapsed time", preds)}


TASK = register_task(
    Task(
        name="anticipation",
        summary="minutes until each phase (and tool) next occurs, within --horizon",
        head=REGRESSION,
        labels="phase labels (and tool presence where the store has it) with frame times",
        metrics=("phase_wMAE", "phase_inMAE", "phase_outMAE", "tool_wMAE", "tool_inMAE", "tool_outMAE"),
        select_metric="wMAE (mean over every anticipated class, validation frames)",
        protocols=("knn", "linear", "temporal"),
        regression=Regression(
            outputs=outputs,
            targets=targets,
            bounds=lambda _info, settings: (0.0, float(settings.horizon_min)),
            score=score,
            references=references,
            check=check,
            column=lambda name: f"next_{name}_min",
        ),
        uses_horizon=True,
        needs=("class_names",),  # phases at least ("auto"); --anticipate tools is checked when run
    )
)

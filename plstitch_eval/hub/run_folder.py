"""The layout of a `plstitch train` run folder: its file names, recognising a run, finding and reading parts.

A run folder holds `last.ckpt` (resume state), `backbone/` (timm-format teacher + temporal head; written last
and atomically, so its presence means "finished"), `train_config.json` and `log.jsonl` (one JSON object per
logged step), the TensorBoard event files `events.out.tfevents.*` (the log's mirror, with `tensorboard`
installed), `knn_eval.json` and `knn_frames/` (k-NN while it trains, `--eval-every`), `frame_cache/` unless
the run caches frames elsewhere, and `curves.png` / `curves.json` once `plstitch analyze run` drew it.
`RUN_FILES` are the trainer's own files (what `--overwrite` replaces, with the event files). Why in
`plstitch_eval`: the encoder and temporal-head loaders resolve run folders, and evaluation never imports
`plstitch_train`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from plstitch_eval.errors import RunFolderError
from plstitch_eval.hub.timm_format import is_timm_dir
from plstitch_eval.utils.outputs import OwnedFiles

__all__ = [
    "BACKBONE_DIR",
    "CHECKPOINT_NAME",
    "CURVES_NAME",
    "FRAME_CACHE_DIR",
    "KNN_EVAL_NAME",
    "KNN_FRAMES_DIR",
    "LOG_NAME",
    "RUN_FILES",
    "RUN_FOLDER_FILES",
    "TENSORBOARD_EVENTS",
    "TRAIN_CONFIG_NAME",
    "backbone_dir",
    "checkpoint_path",
    "frame_cache_dir",
    "is_finished",
    "is_run_dir",
    "knn_eval_path",
    "knn_frames_dir",
    "log_path",
    "present_run_files",
    "read_log",
    "read_train_config",
    "resolve_backbone_dir",
    "train_config_path",
]

BACKBONE_DIR = "backbone"
CHECKPOINT_NAME = "last.ckpt"
TRAIN_CONFIG_NAME = "train_config.json"
LOG_NAME = "log.jsonl"
FRAME_CACHE_DIR = "frame_cache"
TENSORBOARD_EVENTS = "events.out.tfevents.*"  # the event files `run.log.RunLog` writes into the run folder
KNN_EVAL_NAME = "knn_eval.json"  # the run's series of k-NN evaluations and its best step
KNN_FRAMES_DIR = "knn_frames"  # the decoded k-NN evaluation frames (uint8 crops), kept across resumes
CURVES_NAME = "curves"  # `plstitch analyze run` draws RUN_DIR/curves.png and RUN_DIR/curves.json by default
RUN_FILES = (BACKBONE_DIR, CHECKPOINT_NAME, LOG_NAME, TRAIN_CONFIG_NAME)  # removal order: "finished" first
REPRODUCE_DIRS = ("features", "eval")  # `plstitch reproduce` keeps a run's feature store and results there
RUN_FOLDER_FILES = OwnedFiles(  # all that plstitch writes into a run folder: `train --overwrite` refuses more
    "a run folder",
    (
        *RUN_FILES,
        *(f".{name}.*.tmp" for name in RUN_FILES),
        TENSORBOARD_EVENTS,
        KNN_EVAL_NAME,
        f".{KNN_EVAL_NAME}.*.tmp",
        KNN_FRAMES_DIR,
        FRAME_CACHE_DIR,
        f"{CURVES_NAME}.png",
        f"{CURVES_NAME}.json",
        *REPRODUCE_DIRS,
    ),
)


def backbone_dir(run_dir: str | os.PathLike) -> Path:
    """`run_dir/backbone`, where a finished run's timm-format backbone and temporal head live."""
    return Path(run_dir) / BACKBONE_DIR


def checkpoint_path(source: str | os.PathLike) -> Path:
    """The checkpoint file behind `source`: a run folder's `last.ckpt`, else `source` itself."""
    path = Path(source)
    return path / CHECKPOINT_NAME if path.is_dir() else path


def train_config_path(run_dir: str | os.PathLike) -> Path:
    """`run_dir/train_config.json`, the settings the run was made with."""
    return Path(run_dir) / TRAIN_CONFIG_NAME


def log_path(run_dir: str | os.PathLike) -> Path:
    """`run_dir/log.jsonl`, one JSON object per logged step."""
    return Path(run_dir) / LOG_NAME


def frame_cache_dir(run_dir: str | os.PathLike) -> Path:
    """`run_dir/frame_cache`, the decoded training frames of a run that names no other cache folder."""
    return Path(run_dir) / FRAME_CACHE_DIR


def knn_eval_path(run_dir: str | os.PathLike) -> Path:
    """`run_dir/knn_eval.json`, the run's k-NN evaluations while it trains and its best step."""
    return Path(run_dir) / KNN_EVAL_NAME


def knn_frames_dir(run_dir: str | os.PathLike) -> Path:
    """`run_dir/knn_frames`, the k-NN evaluation frames decoded once per run."""
    return Path(run_dir) / KNN_FRAMES_DIR


def present_run_files(run_dir: str | os.PathLike) -> list[str]:
    """The names of `RUN_FILES` that exist in `run_dir` (in removal order)."""
    return [name for name in RUN_FILES if (Path(run_dir) / name).exists()]


def is_finished(run_dir: str | os.PathLike) -> bool:
    """True when the run's backbone was exported (the last thing a run writes, atomically)."""
    return is_timm_dir(backbone_dir(run_dir))


def is_run_dir(path: str | os.PathLike) -> bool:
    """True for a folder holding a training run, finished or not: `backbone/`, `last.ckpt` or its config."""
    path = Path(path)
    if not path.is_dir():
        return False
    return is_finished(path) or (path / CHECKPOINT_NAME).is_file() or train_config_path(path).is_file()


def resolve_backbone_dir(path: str | os.PathLike) -> Path | None:
    """The timm folder behind `path`: a finished run's `backbone/`, else `path` if timm-format, else None."""
    path = Path(path)
    if is_finished(path):
        return backbone_dir(path)
    return path if is_timm_dir(path) else None


def read_train_config(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The run's `train_config.json` as a dict, or None without one; RunFolderError names a bad file."""
    path = train_config_path(run_dir)
    if not path.is_file():
        return None
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path} line {exc.lineno}: invalid JSON ({exc.msg}).") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{path} is unreadable ({exc}).") from exc
    if not isinstance(settings, dict):
        raise RunFolderError(f"{path} holds a {type(settings).__name__}, not a training config object.")
    return settings


def read_log(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of the run's `log.jsonl` ([] without one); a torn line (a kill mid-write) is skipped."""
    path = log_path(run_dir)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records

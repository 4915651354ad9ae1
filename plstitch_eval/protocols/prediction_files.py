"""Score MS-TCN-format prediction files (`plstitch score`): label files matched by video name, a mapping file.

The files hold one label per frame after a ``### Frame level recognition: ###`` header (MS-TCN's
``eval.py`` format) or one label per line; the results are a ``plstitch.results/v1`` dict like every
protocol's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.relaxed import relaxed_metrics, relaxed_spec
from plstitch_eval.metrics.scoring import COOKING_METRICS, score_videos, with_relaxed
from plstitch_eval.metrics.segments import DEFAULT_OVERLAPS
from plstitch_eval.results_json import build_results

MSTCN_HEADER = "### Frame level recognition: ###"


def read_label_file(path: str | Path) -> list[str]:
    """Frame labels of an MS-TCN file: header line then space-separated labels, or one label per line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EvaluationError(f"{path}: cannot read labels ({exc}).") from exc
    lines = [ln.strip() for ln in lines]
    while lines and not lines[0]:
        lines.pop(0)
    if lines and lines[0].startswith("###"):
        return [tok for ln in lines[1:] for tok in ln.split()]
    return [ln for ln in lines if ln]


def video_key(path: Path) -> str:
    """Video name of a label file: the file name without its extension (MS-TCN writes none)."""
    name = path.name
    stem, dot, ext = name.rpartition(".")
    return stem if dot and stem and ext.isalnum() and len(ext) <= 5 and not ext.isdigit() else name


def read_mapping(path: str | Path) -> list[str]:
    """Class names in id order from an MS-TCN ``mapping.txt`` (``<id> <name>`` per line)."""
    path = Path(path)
    names: dict[int, str] = {}
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[0].lstrip("-").isdigit():
            raise EvaluationError(f"{path} line {line_no}: expected '<id> <name>', got {line!r}.")
        names[int(parts[0])] = parts[1]
    if sorted(names) != list(range(len(names))):
        raise EvaluationError(f"{path}: class ids must be 0..N-1 without gaps, got {sorted(names)}.")
    return [names[i] for i in range(len(names))]


def _label_files(folder: str | Path, what: str) -> dict[str, Path]:
    folder = Path(folder)
    if not folder.is_dir():
        raise EvaluationError(f"{what} folder {folder} does not exist.")
    files = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        files.setdefault(video_key(path), path)
    return files


def score_files(
    pred_dir: str | Path,
    gt_dir: str | Path,
    bg_classes: Sequence[str] = ("background",),
    mapping: str | Path | None = None,
    dataset: str | None = None,
    overlaps: Sequence[float] = DEFAULT_OVERLAPS,
    relaxed: bool = False,
    fps: float | None = None,
) -> dict[str, Any]:
    """Score MS-TCN-format prediction files against ground-truth files matched by video name.

    `relaxed` adds the challenge relaxed metrics; they need `dataset` (cholec80, m2cai16) and the files'
    frame rate `fps`.
    """
    preds_files, gt_files = _label_files(pred_dir, "Prediction"), _label_files(gt_dir, "Ground-truth")
    videos = sorted(preds_files)
    missing = [v for v in videos if v not in gt_files]
    if missing:
        raise EvaluationError(
            f"No ground truth in {gt_dir} for predicted videos {missing[:5]}; "
            "names must match (any extension)."
        )
    if not videos:
        raise EvaluationError(f"No prediction files in {pred_dir}.")
    pred_names = {v: read_label_file(preds_files[v]) for v in videos}
    gt_names = {v: read_label_file(gt_files[v]) for v in videos}
    class_names = (
        read_mapping(mapping)
        if mapping
        else sorted({x for d in (pred_names, gt_names) for seq in d.values() for x in seq})
    )
    spec = None
    if relaxed:
        spec = relaxed_spec(
            dataset,
            class_names,
            fps,
            fps_fix="pass --fps, the frame rate of the label files (e.g. 1 for 1-fps files)",
            dataset_fix="name it with --dataset, or drop --relaxed",
        )
    index = {name: i for i, name in enumerate(class_names)}
    preds, gts = {}, {}
    for v in videos:
        if not gt_names[v]:
            raise EvaluationError(f"Video {v!r}: ground-truth file {gt_files[v]} is empty.")
        if len(pred_names[v]) != len(gt_names[v]):
            raise EvaluationError(
                f"Video {v!r}: {len(pred_names[v])} predicted labels in {preds_files[v]} but "
                f"{len(gt_names[v])} in {gt_files[v]}; one prediction per ground-truth frame."
            )
        for what, seq, path in (
            ("predicted", pred_names[v], preds_files[v]),
            ("ground-truth", gt_names[v], gt_files[v]),
        ):
            unknown = sorted(set(seq) - set(index))
            if unknown:
                raise EvaluationError(
                    f"Video {v!r}: {what} labels {unknown[:5]} in {path} are not in {mapping}."
                )
        preds[v] = np.array([index[x] for x in pred_names[v]], dtype=np.int64)
        gts[v] = np.array([index[x] for x in gt_names[v]], dtype=np.int64)
    bg_ids = [index[b] for b in bg_classes if b in index]
    scored = score_videos(preds, gts, len(class_names), bg_ids, overlaps)
    manifest = {"dataset": dataset, "model": {"spec": None, "provenance": {}}}
    protocol = {
        "name": "score",
        "pred_dir": str(pred_dir),
        "gt_dir": str(gt_dir),
        "background": list(bg_classes),
        "mapping": str(mapping) if mapping else None,
        "overlaps": list(overlaps),
    }
    results = build_results("score", manifest, None, protocol, {"test": videos}, class_names, scored, preds)
    if dataset is None:
        results["headline_metrics"] = list(COOKING_METRICS)
    return results if spec is None else with_relaxed(results, relaxed_metrics(preds, gts, spec))

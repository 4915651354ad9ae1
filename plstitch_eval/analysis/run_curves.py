"""Training curves of one run folder (`plstitch analyze run`): the loss of each branch and their total, the
learning-rate / weight-decay / teacher-momentum schedules, the collapse measures and the k-NN accuracy, read
from the run's `log.jsonl` (one JSON object per logged step, written by `plstitch train`).

Each panel is drawn only when the log holds its series; an absent one gets a note saying how to log it. The
JSON beside the PNG holds every numeric series of the log, so the figure's numbers are the log's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.analysis.style import OKABE_ITO, WRONG, new_figure, save_figure
from plstitch_eval.errors import ConfigError, RunFolderError
from plstitch_eval.hub.run_folder import CURVES_NAME, LOG_NAME
from plstitch_eval.utils.io import write_json_atomic

__all__ = [
    "COLLAPSE_RATIO_MIN",
    "LOSS_KEYS",
    "NAME",
    "RunCurvesConfig",
    "best_knn",
    "log_series",
    "output_files",
    "panels",
    "plot_run_curves",
    "read_run_log",
    "run_curves",
]

NAME = CURVES_NAME  # RUN_DIR/curves.png and RUN_DIR/curves.json by default (`hub.run_folder`)
COMMAND = "analyze run"  # written into the JSON: outputs carrying it may be replaced by a rerun
# held equal to plstitch_train's by tests/eval/analysis/test_run_curves.py (evaluation never imports training)
LOSS_KEYS = ("loss", "vid", "mim", "jigsaw")  # plstitch_train.config.LOSS_KEYS: the total, then each branch
COLLAPSE_RATIO_MIN = 0.98  # plstitch_train.monitors.collapse.ENTROPY_RATIO_MIN (and MIM_LOSS_RATIO_MIN)
SCHEDULE_KEYS = {"lr": "learning rate", "weight_decay": "weight decay", "momentum": "teacher momentum"}
COLLAPSE_KEYS = {
    "collapse_entropy_ratio": "teacher entropy / log K",
    "collapse_mim_loss_ratio": "iBOT loss / 2 log K",
}
KNN_KEYS = {"knn_acc": "k-NN accuracy", "knn_f1": "k-NN F1"}
LOSS_LABELS = {"loss": "total"}
# what to log for a panel the log has no series of
ABSENT_NOTES = {
    "loss": "no losses in the log",
    "schedule": "no schedules in the log",
    "collapse": "no collapse measures: train with --collapse-every N (and the iBOT branch, lambda_mim > 0)",
    "knn": "no k-NN: train with --eval-every N",
}


@dataclass
class RunCurvesConfig:
    """Settings of `plstitch analyze run`."""

    run_dir: Path
    out: Path | None = None  # the PNG (its JSON beside it) or a folder for curves.png; None: inside run_dir
    overwrite: bool = False  # replace files at `out` that an earlier `analyze run` did not write


def read_run_log(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of `run_dir/log.jsonl`, in order; RunFolderError names the file and line of a bad one.

    Why strict (`hub.run_folder.read_log` skips a torn line): a figure drawn over a damaged log would hide it.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        what = "is a file, not a folder" if run_dir.exists() else "does not exist"
        raise ConfigError(f"{run_dir} {what}; give a training run folder (the --out of `plstitch train`).")
    path = run_dir / LOG_NAME
    if not path.is_file():
        raise RunFolderError(
            f"{path} not found: {run_dir} holds no training log (`plstitch train` writes it from the first "
            "logged step)."
        )
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{path} is unreadable ({exc}).") from exc
    records = [_parse_record(path, number, line) for number, line in enumerate(lines, start=1)]
    if not records:
        raise RunFolderError(f"{path} is empty: the run has logged no step yet.")
    return records


def _parse_record(path: Path, number: int, line: str) -> dict[str, Any]:
    """One line of the log as a record with an integer `step`; RunFolderError naming the line otherwise."""
    where = f"{path} line {number}"
    if not line.strip():
        raise RunFolderError(f"{where} is empty; a log holds one JSON object a line (delete that line).")
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RunFolderError(
            f"{where}: invalid JSON ({exc.msg}); a run killed mid-write leaves a torn last line: delete it."
        ) from exc
    if not isinstance(record, dict):
        raise RunFolderError(f"{where} holds a JSON {type(record).__name__}, not a log record (an object).")
    step = record.get("step")
    if isinstance(step, bool) or not isinstance(step, int | float) or step != int(step):
        raise RunFolderError(f"{where} has no integer 'step' (got {step!r}); is this a training log?")
    return record


def log_series(records: list[dict[str, Any]]) -> dict[str, dict[str, list]]:
    """`{key: {"step": [...], "value": [...]}}` for each numeric key of the records, by increasing step.

    A step logged twice keeps its last value, so a resumed run's replayed steps show once (the trainer cuts
    the records after the checkpoint it resumes from; a log written otherwise may still hold them).
    """
    by_key: dict[str, dict[int, float]] = {}
    for record in records:
        step = int(record["step"])
        for key, value in record.items():
            if key != "step" and isinstance(value, int | float) and not isinstance(value, bool):
                by_key.setdefault(key, {})[step] = float(value)
    return {
        key: {"step": sorted(values), "value": [values[step] for step in sorted(values)]}
        for key, values in by_key.items()
    }


def panels(series: dict[str, dict[str, list]]) -> dict[str, list[str]]:
    """`{panel: [keys drawn in it]}` for the panels whose series exist, in drawing order."""
    found = {
        "loss": [key for key in LOSS_KEYS if key in series],
        "schedule": [key for key in SCHEDULE_KEYS if key in series],
        "collapse": [key for key in COLLAPSE_KEYS if key in series],
        "knn": [key for key in KNN_KEYS if key in series],
    }
    return {panel: keys for panel, keys in found.items() if keys}


def best_knn(series: dict[str, dict[str, list]]) -> dict[str, float | int] | None:
    """The step of the highest `knn_acc` (the earliest of ties) and its value; None without k-NN records."""
    knn = series.get("knn_acc")
    values = [v if math.isfinite(v) else -math.inf for v in (knn or {}).get("value", [])]
    if not values or max(values) == -math.inf:
        return None
    index = int(np.argmax(values))
    return {"step": knn["step"][index], "knn_acc": knn["value"][index]}


def plot_run_curves(series: dict[str, dict[str, list]], title: str):
    """One row per present panel, all over the same steps: losses, schedules (three plots side by side),
    collapse ratios with the 0.98 threshold, k-NN accuracy with its best step starred; notes for the rest."""
    drawn = panels(series)
    notes = [ABSENT_NOTES[panel] for panel in ABSENT_NOTES if panel not in drawn]
    rows = max(len(drawn), 1)
    fig = new_figure(9.0, 2.3 * rows + 0.5 + 0.2 * len(notes))
    grid = fig.add_gridspec(rows, len(SCHEDULE_KEYS))
    steps = [s for entry in series.values() for s in entry["step"]]
    span = (min(steps), max(steps)) if steps else (0, 1)
    axes = []
    for row, (panel, keys) in enumerate(drawn.items()):
        if panel == "schedule":
            for column, key in enumerate(keys):
                ax = fig.add_subplot(grid[row, column])
                _line(ax, series[key], SCHEDULE_KEYS[key], OKABE_ITO[column])
                ax.set_title(SCHEDULE_KEYS[key], loc="left")
                axes.append(ax)
            continue
        ax = fig.add_subplot(grid[row, :])
        axes.append(ax)
        if panel == "loss":
            _draw_losses(ax, series, keys)
        elif panel == "collapse":
            _draw_collapse(ax, series, keys)
        else:
            _draw_knn(ax, series, keys)
    for ax in axes:
        if span[1] > span[0]:
            ax.set_xlim(*span)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    if notes:
        fig.text(0.01, 0.01, "\n".join(notes), fontsize=8, color="#555555", va="bottom")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, min(0.4, (0.2 * len(notes) + 0.05) / fig.get_figheight()), 1, 1))
    return fig


def _line(ax, entry: dict[str, list], label: str, color: str, **style: Any) -> None:
    """One series as a line (with dots when it has few points: a k-NN or collapse check every N steps)."""
    marker = "o" if len(entry["step"]) <= 30 else None
    ax.plot(entry["step"], entry["value"], label=label, color=color, marker=marker, markersize=3, **style)


def _draw_losses(ax, series: dict[str, dict[str, list]], keys: list[str]) -> None:
    branch_colors = iter(OKABE_ITO)
    for key in keys:
        if key == "loss":
            _line(ax, series[key], LOSS_LABELS[key], OKABE_ITO[-1], linewidth=1.8)
        else:
            _line(ax, series[key], key, next(branch_colors), linewidth=1.0)
    ax.set_title("loss per branch (weighted total in black)", loc="left")
    ax.set_ylabel("loss")
    ax.legend(loc="best", ncol=len(keys))


def _draw_collapse(ax, series: dict[str, dict[str, list]], keys: list[str]) -> None:
    for color, key in zip(OKABE_ITO, keys, strict=False):
        _line(ax, series[key], COLLAPSE_KEYS[key], color)
    ax.axhline(COLLAPSE_RATIO_MIN, color=WRONG, linestyle="--", linewidth=1.0)
    ax.annotate(
        f"collapse threshold {COLLAPSE_RATIO_MIN}",
        (0.0, COLLAPSE_RATIO_MIN),
        xycoords=("axes fraction", "data"),
        xytext=(4, -10),
        textcoords="offset points",
        color=WRONG,
        fontsize=8,
    )
    ax.set_title("collapse measures (collapsed when both stay above the line)", loc="left")
    ax.set_ylabel("ratio")
    ax.legend(loc="best")


def _draw_knn(ax, series: dict[str, dict[str, list]], keys: list[str]) -> None:
    for color, key in zip(OKABE_ITO, keys, strict=False):
        _line(ax, series[key], KNN_KEYS[key], color)
    best = best_knn(series)
    title = "k-NN evaluation"
    if best is not None:
        ax.plot([best["step"]], [best["knn_acc"]], marker="*", markersize=14, color=WRONG, linestyle="none")
        ax.annotate(
            f"best {best['knn_acc']:.4g} at step {best['step']}",
            (best["step"], best["knn_acc"]),
            xytext=(6, -12),
            textcoords="offset points",
            color=WRONG,
            fontsize=8,
        )
        title += f" (best step {best['step']} starred)"
    ax.set_title(title, loc="left")
    ax.set_ylabel("score")
    ax.legend(loc="best")


def output_files(config: RunCurvesConfig) -> tuple[Path, Path]:
    """`(PNG, JSON)` to write: RUN_DIR/curves.*, DIR/curves.* for an existing folder, else OUT and its .json.

    Files already there are replaced only when an earlier `analyze run` wrote them (its JSON says so) or with
    `overwrite`: a user's file is never replaced unasked.
    """
    out = Path(config.run_dir) if config.out is None else Path(config.out)
    if out.is_dir():
        png = out / f"{NAME}.png"
    elif out.suffix.lower() == ".png":
        png = out
    else:
        raise ConfigError(f"--out {out}: give a .png file (its .json is written beside it) or a folder.")
    js = png.with_suffix(".json")
    present = [path for path in (png, js) if path.exists()]
    if present and not config.overwrite and not _ours(js):
        raise ConfigError(
            f"{present[0]} exists and was not written by `plstitch {COMMAND}`; pass --overwrite to replace "
            "it, or another --out."
        )
    return png, js


def _ours(js: Path) -> bool:
    """Whether `js` is the JSON of an earlier `analyze run` (then its PNG may be replaced too)."""
    try:
        data = json.loads(js.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("command") == COMMAND


def run_curves(config: RunCurvesConfig) -> tuple[Path, Path, dict[str, Any]]:
    """Read the run's log, draw its curves and write the PNG and the JSON of its series."""
    run_dir = Path(config.run_dir)
    records = read_run_log(run_dir)
    png, js = output_files(config)
    series = log_series(records)
    drawn = panels(series)
    steps = [int(r["step"]) for r in records]
    data = {
        "command": COMMAND,
        "run": str(run_dir),
        "log": str(run_dir / LOG_NAME),
        "records": len(records),
        "first_step": min(steps),
        "last_step": max(steps),
        "panels": drawn,
        "notes": [ABSENT_NOTES[panel] for panel in ABSENT_NOTES if panel not in drawn],
        "best_knn": best_knn(series),
        "series": series,
    }
    name = run_dir.resolve().name
    fig = plot_run_curves(series, f"{name}: steps {data['first_step']}-{data['last_step']}")
    png.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, png)
    write_json_atomic(js, {"figure": png.name, **data})
    return png, js, data

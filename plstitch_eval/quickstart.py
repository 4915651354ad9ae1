"""The embedded default end to end, offline: synthetic videos -> shipped tiny PL-Stitch -> features -> k-NN +
linear probe -> results JSON, one table beside reference rows, and a timeline figure.

The reference rows show what the learned features add on the same test split: `random-init:<model>` (the
same architecture, fresh weights; only for timm-format models), `raw-pixels` (each frame downsampled to
8x8x3) and the majority class of the training split. Every step is a library call of its own module
(`evaluate_encoder` per encoder, `run_majority`, `build_table`, `run_timeline`); this module only chains them
into one output folder::

    <out>/features/<row>/               feature store per encoder (1 fps), resumable
    <out>/results/<row>/knn.json        plstitch.results/v1 (k-NN, k=20, exp weighting)
    <out>/results/<row>/linear.json     plstitch.results/v1 (linear-probe grid, best on held-out train videos)
    <out>/results/table.md              the printed table in markdown, with the model's differences from
                                        each reference row paired over the test videos
    <out>/figures/timeline.png          ground truth vs. the model's k-NN predictions (+ timeline.json)

with `<row>` = `model`, `compare-<name>` (each `--compare` encoder, e.g. a trained run's initialisation),
`random-init`, `raw-pixels`.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from plstitch_eval.analysis.timeline import TimelineConfig, run_timeline
from plstitch_eval.errors import ModelNotFoundError
from plstitch_eval.evaluate import EvaluateConfig, evaluate_encoder, extract_encoders, frozen_evaluation
from plstitch_eval.hub import Encoder, load_encoder
from plstitch_eval.hub.architectures.pixels import PIXELS_SPEC
from plstitch_eval.hub.random_init import DEFAULT_SEED, TIMM_SOURCES, is_timm_format_spec, random_init_spec
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.hub.timm_format import is_timm_dir
from plstitch_eval.protocols import TASK_LABELS, run_majority
from plstitch_eval.resources import model_cards_dir
from plstitch_eval.results_json import MAJORITY_ROW, RANDOM_INIT_ROW, RAW_PIXELS_ROW
from plstitch_eval.tables import METRIC_LABELS, build_table, to_markdown, to_rich
from plstitch_eval.utils.console import console, result_console
from plstitch_eval.utils.device import resolve_device
from plstitch_eval.utils.io import write_text_atomic
from plstitch_eval.utils.stats import paired_difference

SHIPPED_MODEL = "plstitch-tiny-synthetic"
SHIPPED_DIR = model_cards_dir() / SHIPPED_MODEL

MODEL_ROW, PIXELS_ROW = "model", RAW_PIXELS_ROW
RANDOM_INIT_LABEL = f"random init (seed {DEFAULT_SEED})"
PIXELS_LABEL = "raw pixels (8x8x3)"
MAJORITY_LABEL = "majority class"
PROTOCOL_NAMES = TASK_LABELS


def default_model_spec() -> str:
    """The shipped tiny model: its registry name when registered, else its packaged model_cards/ folder."""
    if SHIPPED_MODEL in MODELS:
        return SHIPPED_MODEL
    if is_timm_dir(SHIPPED_DIR):
        return str(SHIPPED_DIR)
    raise ModelNotFoundError(
        f"The shipped model {SHIPPED_MODEL!r} is neither registered nor present at {SHIPPED_DIR}; "
        "pass --model with any encoder spec (registry name, timm folder, run folder or checkpoint)."
    )


@dataclass
class QuickstartConfig:
    """Settings of `plstitch quickstart`; the dataset fields shrink it for tests (defaults = the real one)."""

    out: Path = Path("plstitch-quickstart")
    model: str | None = None  # None: the shipped plstitch-tiny-synthetic
    reference: bool = True  # False: no random-init and raw-pixels rows (the majority class stays)
    compare: tuple[str, ...] = ()  # more encoder specs, each a row the model is compared with
    device: str = "auto"
    fps: float = 1.0
    batch_size: int = 64
    num_workers: int | None = None
    knn_k: int = 20
    linear_epochs: int = 20
    timeline_videos: int = 3
    overwrite: bool = False
    progress: bool = True
    dataset_options: dict[str, Any] = field(default_factory=dict)  # n_videos, size, min/max_seconds, seed


@dataclass
class EncoderRow:
    """One evaluated encoder of the table: key (= folder name), label, spec, store, results, timings (s)."""

    name: str
    label: str
    spec: str
    features: Path
    paths: dict[str, Path]  # protocol ("knn", "linear") -> its results JSON
    results: dict[str, dict[str, Any]]  # protocol -> plstitch.results/v1 dict
    seconds: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready row: where its files are and every metric of each protocol (NaN -> null)."""
        return {
            "name": self.name,
            "label": self.label,
            "spec": self.spec,
            "features": str(self.features),
            "results": {protocol: str(path) for protocol, path in self.paths.items()},
            "metrics": {protocol: _finite(res["metrics"]) for protocol, res in self.results.items()},
            "seconds": self.seconds,
        }


@dataclass
class QuickstartResult:
    """Where everything went: one `EncoderRow` per encoder (the model first), the majority-class reference,
    rows skipped with the reason, the table and figure files and the wall time of each part (s)."""

    out: Path
    rows: list[EncoderRow]
    majority: dict[str, Any]
    skipped: dict[str, str]
    table_md: Path
    timeline_png: Path
    seconds: dict[str, float]
    differences: list[dict[str, Any]] = field(default_factory=list)  # `video_differences`

    @property
    def model(self) -> EncoderRow:
        """The evaluated model's row."""
        return self.rows[0]

    @property
    def features(self) -> Path:
        return self.model.features

    @property
    def knn_json(self) -> Path:
        return self.model.paths["knn"]

    @property
    def linear_json(self) -> Path:
        return self.model.paths["linear"]

    @property
    def knn(self) -> dict[str, Any]:
        return self.model.results["knn"]

    @property
    def linear(self) -> dict[str, Any]:
        return self.model.results["linear"]

    def to_dict(self) -> dict[str, Any]:
        """What `--json` writes: every row of the table (encoders, then the majority class) and the files."""
        majority = {
            "name": MAJORITY_ROW,
            "label": MAJORITY_LABEL,
            **{k: self.majority[k] for k in ("class_id", "class_name", "train_frames", "test_frames")},
            "metrics": _finite(self.majority["metrics"]),
        }
        return {
            "dataset": self.knn.get("dataset"),
            "split": "test",
            "headline_metrics": list(self.knn.get("headline_metrics") or []),
            "knn_k": (self.knn.get("protocol") or {}).get("k"),
            "rows": [row.to_dict() for row in self.rows] + [majority],
            "skipped": [{"name": name, "reason": reason} for name, reason in self.skipped.items()],
            "out": str(self.out),
            "table_md": str(self.table_md),
            "timeline_png": str(self.timeline_png),
            "seconds": self.seconds,
            "differences": self.differences,
        }


def run_quickstart(config: QuickstartConfig) -> QuickstartResult:
    """Run the whole offline pipeline into `config.out`; returns rows, paths and timings.

    Rerunning resumes: finished videos of every feature store are skipped, results and figure are rewritten.
    """
    out = Path(config.out).expanduser()
    model_spec = config.model or default_model_spec()
    plan = [(MODEL_ROW, display_name(model_spec), model_spec), *compared_rows(config.compare)]
    skipped: dict[str, str] = {}
    if config.reference:
        plan, skipped = _with_references(plan, model_spec)
    evaluation = _evaluation(config)
    start = time.perf_counter()
    device = str(resolve_device(config.device))
    encoders = {name: load_encoder(spec, device=device) for name, _, spec in plan}
    console.print(f"extracting {len(plan)} encoders in one pass (each video decoded once)", highlight=False)
    extract_encoders({out / "features" / name: encoders[name] for name, _, _ in plan}, evaluation)
    extracted = round(time.perf_counter() - start, 2)
    rows = []
    for index, (name, label, spec) in enumerate(plan, start=1):
        console.print(
            f"[{index}/{len(plan)}] {label}" + (f" ({spec})" if spec != label else ""), highlight=False
        )
        rows.append(_evaluate_row(name, label, spec, encoders.pop(name), out, evaluation))

    start = time.perf_counter()
    majority = run_majority(rows[0].features)
    differences = video_differences(rows)
    table_md = out / "results" / "table.md"
    write_text_atomic(
        table_md, to_markdown(comparison_table(rows, majority)) + differences_markdown(differences)
    )
    timeline_png, _, _ = run_timeline(
        TimelineConfig(
            features=str(rows[0].features),
            pred=str(rows[0].paths["knn"]),
            max_videos=config.timeline_videos,
            out=out / "figures",
        )
    )
    seconds = {"load+extract (one pass)": extracted}
    seconds.update({row.name: round(sum(row.seconds.values()), 2) for row in rows})
    seconds["table+figure"] = round(time.perf_counter() - start, 2)
    return QuickstartResult(out, rows, majority, skipped, table_md, timeline_png, seconds, differences)


def display_name(spec: str) -> str:
    """A short row label for a spec: a path's folder/file name, else the spec itself."""
    path = Path(spec).expanduser()
    return path.name if spec not in MODELS and path.exists() else spec


def compared_rows(specs: tuple[str, ...] | list[str]) -> list[tuple[str, str, str]]:
    """(row key, label, spec) of each `--compare` encoder; the key (its folder name) is `compare-<slug>`,
    numbered when two specs give the same slug."""
    rows: list[tuple[str, str, str]] = []
    for spec in specs:
        label = display_name(spec)
        key = "compare-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or "encoder")
        taken = {name for name, _, _ in rows}
        key = key if key not in taken else f"{key}-{len(rows) + 1}"
        rows.append((key, label, spec))
    return rows


def _with_references(
    plan: list[tuple[str, str, str]], model_spec: str
) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """The plan with the random-init and raw-pixels rows added, and the reason for each one left out."""
    plan, skipped = list(plan), {}
    if is_timm_format_spec(model_spec):
        plan.append((RANDOM_INIT_ROW, RANDOM_INIT_LABEL, random_init_spec(model_spec)))
    else:
        skipped[RANDOM_INIT_ROW] = (
            f"random init row skipped: {model_spec} is not a timm-format model ({TIMM_SOURCES})."
        )
    if model_spec != PIXELS_SPEC:
        plan.append((PIXELS_ROW, PIXELS_LABEL, PIXELS_SPEC))
    else:
        skipped[PIXELS_ROW] = "raw pixels row skipped: the model is raw-pixels itself."
    return plan, skipped


def _evaluation(config: QuickstartConfig) -> EvaluateConfig:
    """The frozen evaluation every row runs (the synthetic dataset, k-NN and the linear probe)."""
    return frozen_evaluation(
        "synthetic",
        config.dataset_options,
        fps=config.fps,
        device=str(resolve_device(config.device)),
        knn_k=config.knn_k,
        linear_epochs=config.linear_epochs,
        batch_size=config.batch_size,
        num_workers=config.num_workers,
        overwrite=config.overwrite,
        progress=config.progress,
    )


def _evaluate_row(
    name: str, label: str, spec: str, encoder: Encoder, out: Path, evaluation: EvaluateConfig
) -> EncoderRow:
    """`evaluate_encoder` of one row's encoder into `<out>/features/<name>` (already extracted by the
    shared pass: resumed) and `<out>/results/<name>`."""
    result = evaluate_encoder(encoder, out / "features" / name, out / "results" / name, evaluation)
    return EncoderRow(name, label, spec, result.features, result.paths, result.results, result.seconds)


def comparison_table(rows: list[EncoderRow], majority: dict[str, Any] | None = None):
    """A `ComparisonTable`: one row per encoder (its label), columns = protocol x headline metric.

    The majority class predicts without features, the same for either protocol: its accuracy fills each
    accuracy column and its other cells stay empty.
    """
    results = [
        {**res, "model": {**(res.get("model") or {}), "spec": row.label}}
        for row in rows
        for res in (row.results["knn"], row.results["linear"])
    ]
    table = build_table(results)
    if majority is not None:
        table.rows.append(MAJORITY_LABEL)
        for column in table.columns:
            if column[2] == "accuracy":
                table.values[(MAJORITY_LABEL, column)] = (float(majority["metrics"]["accuracy"]), None)
    return table


def video_differences(rows: list[EncoderRow], metric: str = "accuracy") -> list[dict[str, Any]]:
    """The model's row minus each reference row, per protocol: the per-video `metric` paired over the test
    videos both rows scored, with a Student t 95 % interval (`paired_difference`) and how many videos the
    model is ahead in.

    Why: one model and one split give no seeds to vary, so the videos are the sample; the frame-pooled numbers
    of the table weigh long videos more and differ a little from the mean of the per-video differences.
    """
    model, found = rows[0], []
    for other in rows[1:]:
        for protocol in ("knn", "linear"):
            mine = model.results[protocol].get("per_video") or {}
            theirs = other.results[protocol].get("per_video") or {}
            pairs = [
                (float(mine[v][metric]), float(theirs[v][metric]))
                for v in sorted(set(mine) & set(theirs))
                if _is_number(mine[v].get(metric)) and _is_number(theirs[v].get(metric))
            ]
            if not pairs:
                continue
            a, b = [x for x, _ in pairs], [y for _, y in pairs]
            found.append(
                {
                    "a": model.name,
                    "b": other.name,
                    "b_label": other.label,
                    "protocol": protocol,
                    "metric": metric,
                    "videos": len(pairs),
                    "ahead": sum(x > y for x, y in pairs),
                    **paired_difference(a, b),
                }
            )
    return found


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


# (header, justification) of the differences table, in markdown and on the terminal alike
DIFFERENCE_COLUMNS = (
    ("reference", "left"),
    ("protocol", "left"),
    ("difference", "right"),
    ("95 % CI", "right"),
    ("model ahead in", "right"),
)
DIFFERENCES_TITLE = "model − reference, per-video accuracy paired over the test videos (95 % t interval)"


def _difference_cells(diff: dict[str, Any]) -> list[str]:
    """One `video_differences` entry as the text of `DIFFERENCE_COLUMNS`."""
    interval = "n/a" if diff["ci_low"] is None else f"[{diff['ci_low']:+.1f}, {diff['ci_high']:+.1f}]"
    return [
        diff["b_label"],
        PROTOCOL_NAMES.get(diff["protocol"], diff["protocol"]),
        f"{diff['mean']:+.1f}",
        interval,
        f"{diff['ahead']} of {diff['videos']}",
    ]


def differences_markdown(differences: list[dict[str, Any]]) -> str:
    """`video_differences` as a markdown table (empty without reference rows)."""
    if not differences:
        return ""
    rule = "|" + "".join("---:|" if justify == "right" else "---|" for _, justify in DIFFERENCE_COLUMNS)
    lines = [
        "",
        f"**{DIFFERENCES_TITLE}**",
        "",
        "| " + " | ".join(h for h, _ in DIFFERENCE_COLUMNS) + " |",
        rule,
    ]
    lines += ["| " + " | ".join(_difference_cells(d)) + " |" for d in differences]
    return "\n".join(lines) + "\n"


def differences_table(differences: list[dict[str, Any]]):
    """`video_differences` as the rich table printed under the results table (plain `Text`, never markup)."""
    table = Table(title=Text(DIFFERENCES_TITLE, style="table.title"))
    for header, justify in DIFFERENCE_COLUMNS:
        table.add_column(Text(header), justify=justify)
    for diff in differences:
        table.add_row(*(Text(cell) for cell in _difference_cells(diff)))
    return table


def summary_table(result: QuickstartResult):
    """The rich table that is printed: encoder rows and the majority class, headers "k-NN Acc" etc."""
    table = comparison_table(result.rows, result.majority)
    headers = [f"{PROTOCOL_NAMES.get(t, t)} {METRIC_LABELS.get(m, m)}" for _d, t, m in table.columns]
    n_videos = len((result.knn.get("splits") or {}).get("test", []))
    k = (result.knn.get("protocol") or {}).get("k")
    title = (
        f"{result.knn.get('dataset')} test split ({result.majority['test_frames']} frames of {n_videos} "
        f"videos): k-NN (k={k}) and linear probe"
    )
    return to_rich(table, title=title, headers=headers)


def print_quickstart(result: QuickstartResult, *, table_on_stdout: bool = True) -> None:
    """The results table on stdout (stderr when stdout carries JSON); notes, files and timings on stderr."""
    target = result_console(width=max(console.width, 140)) if table_on_stdout else console
    target.print(summary_table(result))
    if result.differences:
        target.print(differences_table(result.differences))
    for note in result.skipped.values():
        console.print(note, highlight=False)
    total = sum(result.seconds.values())
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.seconds.items())
    console.print(f"finished in {total:.1f}s ({stages})", highlight=False)
    stores = ", ".join(str(row.features) for row in result.rows)
    results = ", ".join(str(path) for row in result.rows for path in row.paths.values())
    console.print(
        f"features: {stores}\nresults:  {results}, {result.table_md}\nfigure:   {result.timeline_png}",
        highlight=False,
    )


def _finite(metrics: dict[str, Any]) -> dict[str, float | None]:
    """Metrics as JSON numbers: NaN/inf (undefined, e.g. a class absent from the test split) -> None."""
    return {k: float(v) if v is not None and math.isfinite(v) else None for k, v in metrics.items()}

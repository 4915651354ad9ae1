"""The embedded default end to end, offline: synthetic videos -> shipped tiny PL-Stitch -> features -> k-NN +
linear probe -> results JSON, a printed table and a timeline figure.

Every step is a library call of its own module (`evaluate_encoder`: the `synthetic` adapter, `load_encoder`,
`extract_features`, `run_knn`/`run_linear`; then `build_table`, `run_timeline`); this module only chains them
into one output folder::

    <out>/features/            feature store (1 fps), resumable
    <out>/results/knn.json     plstitch.results/v1 (k-NN, k=20, exp weighting)
    <out>/results/linear.json  plstitch.results/v1 (linear-probe grid, best on held-out training videos)
    <out>/results/table.md     the printed table in markdown
    <out>/figures/timeline.png ground truth vs. k-NN predictions for a few test videos (+ timeline.json)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.errors import ModelNotFoundError
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.hub.timm_format import is_timm_dir
from plstitch_eval.resources import model_cards_dir
from plstitch_eval.utils.console import console

SHIPPED_MODEL = "plstitch-tiny-synthetic"
SHIPPED_DIR = model_cards_dir() / SHIPPED_MODEL


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
class QuickstartResult:
    """Where everything went, the two results dicts and the wall time of each stage (seconds)."""

    out: Path
    features: Path
    knn_json: Path
    linear_json: Path
    table_md: Path
    timeline_png: Path
    knn: dict[str, Any]
    linear: dict[str, Any]
    seconds: dict[str, float]


def run_quickstart(config: QuickstartConfig) -> QuickstartResult:
    """Run the whole offline pipeline into `config.out`; returns paths, results and stage timings.

    Rerunning resumes: finished videos of the feature store are skipped, results and figure are rewritten.
    """
    from plstitch_eval.analysis.timeline import TimelineConfig, run_timeline
    from plstitch_eval.evaluate import EvaluateConfig, evaluate_encoder
    from plstitch_eval.extract import ExtractOptions
    from plstitch_eval.knn import KnnConfig
    from plstitch_eval.linear import LinearConfig
    from plstitch_eval.tables import build_table, to_markdown
    from plstitch_eval.utils.device import resolve_device
    from plstitch_eval.utils.io import write_text_atomic

    out = Path(config.out).expanduser()
    features, results_dir, figures = out / "features", out / "results", out / "figures"
    device = str(resolve_device(config.device))
    evaluation = evaluate_encoder(
        config.model or default_model_spec(),
        features,
        results_dir,
        EvaluateConfig(
            dataset="synthetic",
            dataset_options=config.dataset_options,
            extract=ExtractOptions(
                fps=config.fps,
                batch_size=config.batch_size,
                num_workers=config.num_workers,
                device=device,
                overwrite=config.overwrite,
                fail_fast=True,
                progress=config.progress,
            ),
            knn=KnnConfig(k=config.knn_k, device=device),
            linear=LinearConfig(epochs=config.linear_epochs, device=device),
        ),
    )
    knn, linear = evaluation.results["knn"], evaluation.results["linear"]
    knn_json, linear_json = evaluation.paths["knn"], evaluation.paths["linear"]

    start = time.perf_counter()
    table = build_table([knn, linear])
    table_md = results_dir / "table.md"
    write_text_atomic(table_md, to_markdown(table))
    timeline_png, _, _ = run_timeline(
        TimelineConfig(
            features=str(features), pred=str(knn_json), max_videos=config.timeline_videos, out=figures
        )
    )
    seconds = {**evaluation.seconds, "figure": round(time.perf_counter() - start, 2)}
    return QuickstartResult(
        out=out,
        features=features,
        knn_json=knn_json,
        linear_json=linear_json,
        table_md=table_md,
        timeline_png=timeline_png,
        knn=knn,
        linear=linear,
        seconds=seconds,
    )


def summary_table(result: QuickstartResult):
    """A rich table: one row per protocol (k-NN, linear), the synthetic dataset's headline metrics."""
    from rich.table import Table

    from plstitch_eval.tables import METRIC_LABELS

    model = (result.knn.get("model") or {}).get("spec", "?")
    metrics = list(result.knn.get("headline_metrics") or result.knn["metrics"])
    table = Table(title=f"Synthetic test split, {model}")
    table.add_column("protocol")
    for metric in metrics:
        table.add_column(METRIC_LABELS.get(metric, metric), justify="right")
    k = (result.knn.get("protocol") or {}).get("k")
    for name, res in ((f"k-NN (k={k})", result.knn), ("linear probe", result.linear)):
        table.add_row(name, *(f"{res['metrics'][m]:.1f}" for m in metrics))
    return table


def print_quickstart(result: QuickstartResult) -> None:
    """The results table on stdout; where the files went and the stage timings on stderr."""
    from plstitch_eval.utils.console import result_console

    result_console().print(summary_table(result))
    total = sum(result.seconds.values())
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.seconds.items())
    console.print(f"finished in {total:.1f}s ({stages})", highlight=False)
    console.print(
        f"features: {result.features}\nresults:  {result.knn_json}, {result.linear_json}, {result.table_md}\n"
        f"figure:   {result.timeline_png}",
        highlight=False,
    )

"""Label efficiency of a `plstitch benchmark --fractions` run: each encoder's curve against the share of the
training videos (mean ± std over the subset seeds), the per-video paired differences between encoders with
95 % t intervals, and the figure: `<out>/label_efficiency.{json,md,png}`.

Why paired: every encoder trains on the same subsets (they depend on the video names and seeds only,
`protocols/fractions.py`) and is scored on the same test videos, so the difference of two encoders is taken
video by video (each video's metric averaged over the subset seeds first), as the quickstart's differences.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.cells import Cell, finite_number, read_done_results
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.inputs import PROTOCOL_LABELS
from plstitch_eval.protocols.fractions import fraction_label
from plstitch_eval.tables import METRIC_LABELS
from plstitch_eval.utils.io import write_json_atomic, write_text_atomic
from plstitch_eval.utils.stats import paired_difference

__all__ = ["LABEL_EFFICIENCY", "SCHEMA", "curve_metrics", "label_efficiency", "write_label_efficiency"]

SCHEMA = "plstitch.label-efficiency/v1"
LABEL_EFFICIENCY = "label_efficiency"  # <out>/label_efficiency.json, .md, .png


def curve_metrics(config: BenchmarkConfig, dataset: Any, protocol: str) -> tuple[str, ...]:
    """What a curve shows: accuracy and an F1 of the cell's table columns, per video when there (the
    SelfSupSurg recommendation; tool presence: mAP)."""
    metrics = config.table_metrics(dataset, protocol)
    f1 = sorted((m for m in metrics if "f1" in m.lower()), key=lambda m: m != "macro_f1_video")[:1]
    picked = [m for m in metrics if m == "accuracy"][:1] + f1
    return tuple(picked) or tuple(metrics[:1])


def per_video_key(metric: str, record: dict[str, Any]) -> str | None:
    """The per-video metric a table metric is paired on (`macro_f1_video` -> `macro_f1`), if recorded."""
    for key in (metric, metric.removesuffix("_video").removesuffix("_pooled")):
        if key in record:
            return key
    return None


def _curve_record(cell: Cell, task: str, metrics: Sequence[str], data: dict[str, Any]) -> dict[str, Any]:
    block = data.get("train_fraction") or {}
    subsets = block.get("subsets") or []
    return {
        "model": cell.model,
        "dataset": cell.dataset.name,
        "protocol": cell.protocol,
        "task": task,
        "fraction": cell.fraction,
        "status": cell.status,
        "metrics": {m: finite_number(cell.metrics.get(m)) for m in metrics},
        "metrics_std": {m: finite_number(cell.metrics_std.get(m)) for m in metrics} if subsets else {},
        "seeds": block.get("seeds"),  # None at fraction 1: the whole training split, one run
        "train_videos": [len(s["videos"]) for s in subsets if "videos" in s] or None,
        "videos_of": subsets[0].get("videos_of") if subsets else None,
        "missing_classes": sorted({c for s in subsets for c in s.get("missing_classes") or []}),
    }


def label_efficiency(config: BenchmarkConfig, cells: Sequence[Cell]) -> dict[str, Any]:
    """The label-efficiency JSON (`plstitch.label-efficiency/v1`): groups (dataset x protocol with their
    metrics), one curve point per cell, and the first model minus each other per fraction, paired by video."""
    groups, curves, differences = [], [], []
    for dataset in config.datasets:
        for protocol in config.protocols:
            metrics = curve_metrics(config, dataset, protocol)
            task = config.task(protocol)
            groups.append(
                {
                    "dataset": dataset.name,
                    "protocol": protocol,
                    "label": PROTOCOL_LABELS[task],
                    "metrics": metrics,
                }
            )
            mine = [c for c in cells if c.dataset.name == dataset.name and c.protocol == protocol]
            per_video = {}
            for cell in mine:
                data = read_done_results(cell)
                curves.append(_curve_record(cell, task, metrics, data))
                per_video[(cell.model, cell.fraction)] = data.get("per_video") or {}
            differences += _differences(config, dataset.name, protocol, metrics, per_video)
    return {
        "schema": SCHEMA,
        "models": list(config.models),
        "fractions": list(config.fractions),
        "seeds": list(config.fraction_seeds),
        "groups": [{**g, "metrics": list(g["metrics"])} for g in groups],
        "curves": curves,
        "differences": differences,
    }


def _differences(
    config: BenchmarkConfig,
    dataset: str,
    protocol: str,
    metrics: Sequence[str],
    per_video: dict[tuple[str, float], dict[str, Any]],
) -> list[dict[str, Any]]:
    """The first model minus each other model at each fraction: each metric per test video, paired."""
    found = []
    first, others = config.models[0], config.models[1:]
    for other in others:
        for fraction in config.fractions:
            mine, theirs = per_video.get((first, fraction)) or {}, per_video.get((other, fraction)) or {}
            for metric in metrics:
                pairs = []
                for video in sorted(set(mine) & set(theirs)):
                    key = per_video_key(metric, mine[video])
                    a = finite_number(mine[video].get(key)) if key else None
                    b = finite_number(theirs[video].get(key)) if key else None
                    if a is not None and b is not None:
                        pairs.append((a, b))
                if not pairs:
                    continue
                found.append(
                    {
                        "dataset": dataset,
                        "protocol": protocol,
                        "fraction": fraction,
                        "metric": metric,
                        "per_video_metric": key,
                        "a": first,
                        "b": other,
                        "videos": len(pairs),
                        "ahead": sum(a > b for a, b in pairs),
                        **paired_difference([a for a, _ in pairs], [b for _, b in pairs]),
                    }
                )
    return found


def _value(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "-"
    return f"{mean:.1f}" if std is None else f"{mean:.1f} ± {std:.1f}"


def _header(data: dict[str, Any], group: dict[str, Any], fraction: float) -> str:
    """`1/8 (2 of 16)`: the fraction, with the subset's size where every subset has one list of videos."""
    sizes = [
        (c["train_videos"], c["videos_of"])
        for c in data["curves"]
        if (c["dataset"], c["protocol"], c["fraction"]) == (group["dataset"], group["protocol"], fraction)
        and c["train_videos"]
    ]
    label = fraction_label(fraction)
    if sizes and len(set(sizes[0][0])) == 1:
        return f"{label} ({sizes[0][0][0]} of {sizes[0][1]})"
    return label


def label_efficiency_markdown(data: dict[str, Any]) -> str:
    """The curves as tables (rows = models, columns = fractions, mean ± std over the subset seeds), then the
    paired differences (first model minus each other, 95 % t interval over the test videos)."""
    seeds = ", ".join(str(s) for s in data["seeds"])
    lines = [
        "## Label efficiency",
        "",
        "Trained on a share of the training videos (whole videos; the same nested subsets for every "
        f"encoder), scored on the whole test split: mean ± std over the subset seeds {seeds}; `all` is "
        "the whole training split, one run.",
    ]
    for group in data["groups"]:
        for metric in group["metrics"]:
            title = f"{group['dataset']}, {group['label']}, {METRIC_LABELS.get(metric, metric)}"
            headers = [_header(data, group, f) for f in data["fractions"]]
            lines += ["", f"**{title}**", "", "| Model | " + " | ".join(headers) + " |"]
            lines.append("| --- |" + " ---: |" * len(headers))
            for model in data["models"]:
                row = []
                for fraction in data["fractions"]:
                    point = next(
                        (
                            c
                            for c in data["curves"]
                            if (c["model"], c["dataset"], c["protocol"], c["fraction"])
                            == (model, group["dataset"], group["protocol"], fraction)
                        ),
                        None,
                    )
                    if point is None or point["status"] != "done":
                        row.append("failed" if point and point["status"] == "failed" else "-")
                    else:
                        row.append(_value(point["metrics"].get(metric), point["metrics_std"].get(metric)))
                lines.append(f"| {model} | " + " | ".join(row) + " |")
    if data["differences"]:
        lines += [
            "",
            "**Paired differences** (per test video, each video's metric averaged over the subset seeds; "
            "mean difference [95 % t interval] over the test videos, and in how many videos the first model "
            "is ahead)",
            "",
            "| Dataset | Protocol | Metric (per video) | Difference | "
            + " | ".join(fraction_label(f) for f in data["fractions"])
            + " |",
            "| --- | --- | --- | --- |" + " ---: |" * len(data["fractions"]),
        ]
        keys = dict.fromkeys(
            (d["dataset"], d["protocol"], d["metric"], d["a"], d["b"]) for d in data["differences"]
        )
        labels = {(g["dataset"], g["protocol"]): g["label"] for g in data["groups"]}
        for dataset, protocol, metric, a, b in keys:
            row = []
            for fraction in data["fractions"]:
                d = next(
                    (
                        d
                        for d in data["differences"]
                        if (d["dataset"], d["protocol"], d["metric"], d["a"], d["b"], d["fraction"])
                        == (dataset, protocol, metric, a, b, fraction)
                    ),
                    None,
                )
                row.append("-" if d is None else _difference(d))
            per_video = next(d["per_video_metric"] for d in data["differences"] if d["metric"] == metric)
            lines.append(
                f"| {dataset} | {labels[(dataset, protocol)]} | {per_video} | {a} − {b} | "
                + " | ".join(row)
                + " |"
            )
    return "\n".join(lines) + "\n"


def _difference(d: dict[str, Any]) -> str:
    interval = "" if d["ci_low"] is None else f" [{d['ci_low']:+.1f}, {d['ci_high']:+.1f}]"
    return f"{d['mean']:+.1f}{interval} ({d['ahead']}/{d['videos']})"


def write_label_efficiency(config: BenchmarkConfig, cells: Sequence[Cell], out: Path) -> tuple[str, Path]:
    """Write `out/label_efficiency.{json,md,png}`; returns the markdown and the figure's path."""
    from plstitch_eval.benchmark.label_figure import plot_label_efficiency  # matplotlib: only when asked

    data = label_efficiency(config, cells)
    figure = plot_label_efficiency(data, out / f"{LABEL_EFFICIENCY}.png")
    data["figure"] = figure.name
    markdown = label_efficiency_markdown(data)
    write_json_atomic(out / f"{LABEL_EFFICIENCY}.json", data)
    write_text_atomic(out / f"{LABEL_EFFICIENCY}.md", markdown)
    return markdown, figure

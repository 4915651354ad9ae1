"""The tasks' part of a benchmark's table (`--tasks anticipation,rsd,triplets,cvs,skill`): `table.json`'s
`tasks` block, the task sections of `table.md` and `tasks.png`. Per task, dataset and protocol: each model's
headline metrics (regression: minutes; mean ± sample std over the seeds), the task's reference rows (rsd's,
anticipation's, skill's training mean and duration-only regressor), and paired per-video differences with
95 % t intervals, of the first `--models` entry against each other model and of each model against each
reference row (what they pair on: `task_kinds.paired_metrics`).

Why paired by video: every model is scored on the same test videos, so taking the difference video by video
removes what makes one video harder than another; each video's value is averaged over the seeds first, so the
interval is over the test videos (`utils/stats.paired_difference`, as the label-efficiency differences).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.cells import NA, Cell, finite_number, read_done_results
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.inputs import PHASES, PROTOCOL_LABELS
from plstitch_eval.benchmark.task_kinds import headline_metric, lower_is_better, paired_metrics, results_task
from plstitch_eval.benchmark.tasks import format_number
from plstitch_eval.tasks import REGRESSION, Task, get_task
from plstitch_eval.tasks.registry import MULTI_LABEL
from plstitch_eval.utils.stats import mean_std, paired_difference

__all__ = ["CONFIDENCE", "REFERENCE", "TASKS_FIGURE", "paired_metrics", "tasks_block", "tasks_markdown"]

TASKS_FIGURE = "tasks.png"  # <out>/tasks.png
CONFIDENCE = 0.95
REFERENCE = "reference: "  # a reference row's label: `reference: naive`

PerVideo = dict[str, dict[str, Any]]  # video -> {metric: value}


def _stats(records: Sequence[tuple[int | None, dict[str, Any]]], metrics: Sequence[str]) -> dict[str, Any]:
    """Seeds, and per metric the mean and sample std over the seeds where it is defined (one: std None)."""
    spreads = {}
    for metric in metrics:
        values = [v for _, record in records for v in [finite_number(record.get(metric))] if v is not None]
        spreads[metric] = mean_std(values) if values else (None, None)
    return {
        "seeds": [seed for seed, _ in records],
        "metrics": {m: mean for m, (mean, _) in spreads.items()},
        "metrics_std": {m: std for m, (_, std) in spreads.items()},
    }


def _video_means(blocks: Sequence[PerVideo | None], metric: str) -> dict[str, float]:
    """Each test video's `metric` averaged over the seeds (one per-video block each) where it is defined."""
    values: dict[str, list[float]] = {}
    for block in blocks:
        for video, record in (block or {}).items():
            value = finite_number((record or {}).get(metric))
            if value is not None:
                values.setdefault(video, []).append(value)
    return {video: sum(v) / len(v) for video, v in values.items()}


def _difference(
    a: str,
    b: str,
    kind: str,
    metric: str,
    a_means: dict[str, float],
    b_means: dict[str, float],
    lower: bool = True,
) -> dict[str, Any] | None:
    """`a - b` paired over the videos both define: mean, 95 % t interval, in how many videos a is lower
    and in how many it is better (lower, or higher where `lower` is False: mAP, rho)."""
    videos = sorted(set(a_means) & set(b_means))
    if not videos:
        return None
    x, y = [a_means[v] for v in videos], [b_means[v] for v in videos]
    return {
        "metric": metric,
        "kind": kind,
        "a": a,
        "b": b,
        "videos": len(videos),
        "a_lower": sum(p < q for p, q in zip(x, y, strict=True)),
        "a_better": sum((p < q) if lower else (p > q) for p, q in zip(x, y, strict=True)),
        **paired_difference(x, y, CONFIDENCE),
    }


def _section(
    config: BenchmarkConfig, task: Task, dataset: str, protocol: str, cells: Sequence[Cell], data: dict
) -> dict[str, Any]:
    """One (task, dataset, protocol): model rows, reference rows and the paired differences."""
    done = [c for c in cells if c.status == "done" and data[id(c)]]
    held = [m for m in task.metrics if any(m in (data[id(c)].get("metrics") or {}) for c in done)]
    metrics = held or list(task.metrics)
    paired = paired_metrics(task, metrics)
    models = list(config.models)
    own = {m: [data[id(c)] for c in done if c.model == m] for m in models}
    rows = []
    for model in models:
        failed = [c.seed for c in cells if c.model == model and c.status == "failed"]
        records = [(c.seed, data[id(c)].get("metrics") or {}) for c in done if c.model == model]
        row = {"row": model, "kind": "model", **_stats(records, metrics), "failed_seeds": failed}
        rows.append({**row, "n/a": any(c.model == model and c.status == NA for c in cells)})
    by_seed: dict[int | None, dict[str, Any]] = {}  # each seed's references: the first model's that has it
    for cell in done:
        by_seed.setdefault(cell.seed, data[id(cell)].get("references") or {})
    names = list(next(iter(by_seed.values()), {}))
    for name in names:
        records = [(seed, (refs.get(name) or {}).get("metrics") or {}) for seed, refs in by_seed.items()]
        description = next((refs[name].get("description") for refs in by_seed.values() if name in refs), None)
        rows.append(
            {
                "row": REFERENCE + name,
                "kind": "reference",
                "description": description,
                **_stats(records, metrics),
            }
        )
    differences = []
    pairs = [(models[0], other, "model") for other in models[1:]]
    pairs += [(model, name, "reference") for model in models for name in names]
    for a, b, kind in pairs:
        for metric in paired:
            a_means = _video_means([d.get("per_video") for d in own[a]], metric)
            if kind == "model":
                b_means = _video_means([d.get("per_video") for d in own[b]], metric)
            else:  # the reference of the same seeds as a's cells (cv records no per-video references)
                refs = [((d.get("references") or {}).get(b) or {}).get("per_video") for d in own[a]]
                b_means = _video_means(refs, metric)
            lower = lower_is_better(task, metric)
            b_row = b if kind == "model" else REFERENCE + b
            found = _difference(a, b_row, kind, metric, a_means, b_means, lower)
            if found is not None:
                differences.append(found)
    reasons = [c.reason for c in cells if c.status == NA]
    return {
        "task": task.name,
        "dataset": dataset,
        "protocol": protocol,
        "not_applicable": reasons[0] if cells and len(reasons) == len(cells) else None,  # why, when all are
        "label": PROTOCOL_LABELS[config.task(protocol, task.name)],
        "results_task": results_task(task, protocol, config.cv_protocol),
        "metrics": metrics,
        "headline": headline_metric(task, metrics),
        "lower_is_better": {m: lower_is_better(task, m) for m in dict.fromkeys([*metrics, *paired])},
        "unit": "min" if task.head == REGRESSION else "",
        "paired_metrics": paired,
        "rows": rows,
        "differences": differences,
    }


def _cell_record(config: BenchmarkConfig, cell: Cell) -> dict[str, Any]:
    done = cell.status == "done"
    return {
        "model": cell.model,
        "model_dir": cell.model_dir,
        "dataset": cell.dataset.name,
        "adapter": cell.dataset.adapter,
        "task": cell.task,
        "protocol": cell.protocol,
        "table_task": config.task(cell.protocol, cell.task),
        "seed": cell.seed,
        "status": cell.status,
        "resumed": cell.resumed,
        "error": cell.error,
        "reason": cell.reason,
        "features": str(cell.store),
        "results": str(cell.results_path) if done else None,
        "metrics": cell.metrics if done else {},
        "metrics_std": cell.metrics_std if done else {},
        "seconds": cell.seconds,
    }


def tasks_block(config: BenchmarkConfig, cells: Sequence[Cell]) -> dict[str, Any]:
    """`table.json`'s `tasks` block: the tasks and their settings, one record per task cell, one section per
    (task, dataset, protocol) with its rows and paired differences, and the failed task cells."""
    mine = [c for c in cells if c.task != PHASES]
    data = {id(c): read_done_results(c) for c in mine}
    tasks = [get_task(name) for name in config.regression_tasks]
    sections = [
        _section(config, task, dataset.name, protocol, group, data)
        for task in tasks
        for dataset in config.datasets
        for protocol in config.task_protocols(task.name)
        for group in [[c for c in mine if (c.task, c.dataset, c.protocol) == (task.name, dataset, protocol)]]
    ]
    records = [_cell_record(config, c) for c in mine]
    failed = [r for r in records if r["status"] == "failed"]
    unlabelled = [r for r in records if r["status"] == NA]
    return {
        "tasks": [
            {
                "task": t.name,
                "summary": t.summary,
                "metrics": list(t.metrics),
                "select_metric": t.select_metric,
                "head": t.head,
                "unit": "minutes" if t.head == REGRESSION else None,
            }
            for t in tasks
        ],
        "settings": {t.name: config.task_record(t.name) for t in tasks},
        "unit": "minutes" if all(t.head == REGRESSION for t in tasks) else None,  # else: per task
        "seeds": list(config.seeds),
        "skill_folds": config.skill_folds,  # skill's cv cells: louo, loso or K folds by video
        "baseline": config.models[0],
        "confidence": CONFIDENCE,
        "cells": records,
        "sections": sections,
        "failed": [
            {k: r[k] for k in ("model", "dataset", "task", "protocol", "seed", "error")} for r in failed
        ],
        "not_applicable": [
            {k: r[k] for k in ("model", "dataset", "task", "protocol", "seed", "reason")} for r in unlabelled
        ],
    }


def _md(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _row_cells(row: dict[str, Any], metrics: Sequence[str]) -> list[str]:
    if not row["seeds"]:
        return ["failed" if row.get("failed_seeds") else NA if row.get("n/a") else "-"] * len(metrics)
    return [format_number(row["metrics"].get(m), row["metrics_std"].get(m)) for m in metrics]


def _difference_text(d: dict[str, Any] | None) -> str:
    if d is None:
        return "-"
    interval = "" if d["ci_low"] is None else f" [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
    return f"{d['mean']:+.3f}{interval} ({d.get('a_better', d['a_lower'])}/{d['videos']})"


def _section_markdown(section: dict[str, Any]) -> list[str]:
    metrics = section["metrics"]
    title = f"**{section['dataset']}, {section['label']}** (`{section['results_task']}`)"
    lines = ["", title, ""]
    lines += ["| Model | " + " | ".join(metrics) + " |", "| --- |" + " ---: |" * len(metrics)]
    lines += [f"| {_md(r['row'])} | " + " | ".join(_row_cells(r, metrics)) + " |" for r in section["rows"]]
    if section["differences"]:
        paired = section["paired_metrics"]
        lines += [
            "",
            "| a − b (per video) | " + " | ".join(paired) + " |",
            "| --- |" + " ---: |" * len(paired),
        ]
        found = {(d["a"], d["b"], d["metric"]): d for d in section["differences"]}
        for a, b in dict.fromkeys((d["a"], d["b"]) for d in section["differences"]):
            texts = [_difference_text(found.get((a, b, m))) for m in paired]
            lines.append(f"| {_md(a)} − {_md(b)} | " + " | ".join(texts) + " |")
    return lines


def _not_applicable_markdown(task: str, sections: list[dict[str, Any]]) -> list[str]:
    """One line for a task's sections whose every cell is n/a (their datasets carry no labels of the task),
    by dataset: `n/a - no skill labels in: synthetic (linear, CV linear), synthetic-cvs (linear)`."""
    if not sections:
        return []
    by_dataset: dict[str, list[str]] = {}
    for section in sections:
        by_dataset.setdefault(section["dataset"], []).append(section["label"])
    named = ", ".join(f"{_md(d)} ({', '.join(labels)})" for d, labels in by_dataset.items())
    return ["", f"n/a - no {task} labels in: {named}."]


def _skill_folds(folds: str, seeds: str) -> str:
    """How skill's cv cells split the videos, in words."""
    if folds == "louo":
        return "leave-one-user-out folds (one per JIGSAWS user; deterministic: one run)"
    if folds == "loso":
        return "leave-one-supertrial-out folds (one per JIGSAWS trial number; deterministic: one run)"
    return f"{folds} folds by video drawn with each seed {seeds}"


def _intro(info: dict[str, Any], told: str, seeds: str, baseline: str, folds: str = "5") -> str:
    """The paragraph under a task's heading: units, direction, seeds, reference rows and the differences."""
    pairs = (
        "(each video's value averaged over the seeds first), then its mean [95 % t interval over the test "
        f"videos] (in how many videos a is better / videos); a is the first model ({baseline}) or the model "
        "set against a reference"
    )
    if info.get("head", REGRESSION) == REGRESSION:
        return (
            f"{info['summary']}{told}. Minutes, lower is better: mean ± sample std over the seeds {seeds} "
            "(k-NN is deterministic: one run). Reference rows: the task's predictions from the training "
            "videos alone (docs/tasks.md). a − b: per test video the difference of the per-video metric "
            f"{pairs.replace('better', 'lower')}; below 0, a has the lower error."
        )
    select = info["select_metric"]
    if info["head"] == MULTI_LABEL:
        return (
            f"{info['summary']}. The linear multi-label probe (class-balanced, its head chosen on validation "
            f"{select}); higher is better but for Brier scores: mean ± sample std over the seeds {seeds}. "
            f"a − b: per test video the difference of its own {select} {pairs}; above 0, a is better."
        )
    return (
        f"{info['summary']}. linear: ridge fitted on the store's train (and val) videos, scored on its test "
        f"videos (deterministic: one run); cv: ridge over {_skill_folds(folds, seeds)} (mean over folds; "
        "pooled: all held-out videos together). Spearman's rho higher is better, "
        "MAE lower. Reference rows: the training mean (rho undefined: one score for every video) and a "
        "regressor on video duration alone. a − b: per held-out video the difference of the absolute "
        f"error {pairs}; below 0, a errs less."
    )


def tasks_markdown(block: dict[str, Any]) -> str:
    """The task sections of `table.md`: per task, one table per (dataset, protocol) of models and reference
    rows, then its paired differences; the failed task cells last."""
    seeds = ", ".join(str(s) for s in block["seeds"])
    lines: list[str] = []
    for info in block["tasks"]:
        settings = {
            k: v for k, v in block["settings"][info["task"]].items() if k in ("horizon_min", "anticipate")
        }
        told = "".join(f"; {k} {v}" for k, v in settings.items())
        folds = str(block.get("skill_folds", "5"))
        lines += ["", f"## Task: {info['task']}", "", _intro(info, told, seeds, block["baseline"], folds)]
        mine = [section for section in block["sections"] if section["task"] == info["task"]]
        for section in mine:
            if not section.get("not_applicable"):
                lines += _section_markdown(section)
        lines += _not_applicable_markdown(info["task"], [s for s in mine if s.get("not_applicable")])
    if block["failed"]:
        lines += [
            "",
            f"Failed task cells ({len(block['failed'])}; rerun the same command to retry them):",
            "",
        ]
        lines += [
            "| Model | Dataset | Task | Protocol | Seed | Error |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {_md(f['model'])} | {_md(f['dataset'])} | {f['task']} | {f['protocol']} | "
            f"{'-' if f['seed'] is None else f['seed']} | {_md(f['error'] or '')} |"
            for f in block["failed"]
        ]
    return "\n".join(lines) + "\n"


def write_tasks(
    config: BenchmarkConfig, cells: Sequence[Cell], out: Path
) -> tuple[dict[str, Any], str, Path]:
    """The `tasks` block, its markdown and `out/tasks.png` (the block names the figure)."""
    from plstitch_eval.benchmark.task_figure import plot_tasks  # matplotlib: only when tasks are asked

    block = tasks_block(config, cells)
    figure = plot_tasks(block, out / TASKS_FIGURE)
    block["figure"] = figure.name
    return block, tasks_markdown(block), figure

"""The model card of a published probe (`huggingface_hub.ModelCard`): what it recognizes, its pinned backbone,
preprocessing, dataset and split, licence, and its own test metrics with per-video confidence intervals.

Numbers come from the probe alone: its probe.json metrics, and per-video intervals from the results JSON of
the run that saved it, accepted only when that JSON's model digest, classes, dataset and metrics are the
probe's (`read_probe_results`); a card without that JSON says it has no intervals.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from plstitch_eval.data.datasets import dataset_facts
from plstitch_eval.probes.backbone import Backbone
from plstitch_eval.probes.licences import CardLicence
from plstitch_eval.probes.probe import Probe, ProbeError
from plstitch_eval.resources import model_cards_dir
from plstitch_eval.utils.stats import mean_interval

RESULTS_SCHEMA = "plstitch.results/v1"
RESULTS_NAME = "results.json"  # a results JSON kept in the probe folder is found under this name
TEMPLATE = "probe_template.md"
TASK_TYPE = "video-classification"
CONFIDENCE = 0.95


@dataclass(frozen=True)
class MetricRow:
    """One metric of the card's table: its name in the probe's metrics, the test value (None: per-video only)
    and, with a results JSON, the mean over test videos and its Student t interval."""

    name: str
    value: float | None
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    videos: int = 0


def results_of(folder: Path, given: Path | None) -> Path | None:
    """The results JSON to take intervals from: `given`, else ``results.json`` in the probe folder."""
    if given is not None:
        return Path(given).expanduser()
    kept = folder / RESULTS_NAME
    return kept if kept.is_file() else None


def read_probe_results(probe: Probe, path: Path) -> dict[str, Any]:
    """The results JSON at `path`, refused (`ProbeError`, one line) unless it is the probe's own: the same
    model weights, classes and dataset, and every metric equal to the probe's."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProbeError(
            f"{path}: not a readable results JSON ({type(exc).__name__}); pass the --json "
            "file of the run that saved the probe."
        ) from None
    if not isinstance(record, dict) or record.get("schema") != RESULTS_SCHEMA:
        raise ProbeError(
            f"{path}: not a {RESULTS_SCHEMA} file; pass the --json file of the run that saved the probe."
        )
    fix = "pass the --json file of the run that saved this probe, or publish without --results"
    sha = ((record.get("model") or {}).get("provenance") or {}).get("sha256")
    if sha != probe.encoder.get("weights_sha256"):
        raise ProbeError(
            f"{path} was measured on weights sha256 {str(sha)[:12]}…, the probe's features on "
            f"{str(probe.encoder.get('weights_sha256'))[:12]}…; {fix}."
        )
    if record.get("class_names") != probe.class_names or record.get("dataset") != probe.dataset:
        raise ProbeError(
            f"{path} scores other classes or another dataset ({record.get('dataset')}) than "
            f"the probe ({probe.dataset}); {fix}."
        )
    for name, value in (record.get("metrics") or {}).items():
        own = probe.metrics.get(name)
        if _number(value) and (not _number(own) or not math.isclose(value, own, rel_tol=1e-9)):
            raise ProbeError(
                f"{path}: {name} is {value} but the probe records {own}: these results are "
                f"not this probe's; {fix}."
            )
    return record


def metric_rows(probe: Probe, results: dict[str, Any] | None) -> list[MetricRow]:
    """The card's metrics: each per-video metric of `results` (its test value, mean and 95 % interval over
    the test videos), then the probe's other metrics; without results, the probe's metrics alone."""
    metrics = {k: float(v) for k, v in probe.metrics.items() if _number(v)}
    per_video = (results or {}).get("per_video") or {}
    rows, used = [], set()
    names = sorted({m for scores in per_video.values() for m, v in scores.items() if _number(v)})
    for name in names:
        values = [float(s[name]) for s in per_video.values() if _number(s.get(name))]
        interval = mean_interval(values, CONFIDENCE)
        key = next((k for k in (name, f"{name}_pooled") if k in metrics), name)
        used.update({name, f"{name}_pooled", f"{name}_video"})
        low, high = interval["ci_low"], interval["ci_high"]
        rows.append(MetricRow(key, metrics.get(key), interval["mean"], low, high, len(values)))
    rows += [MetricRow(name, value) for name, value in metrics.items() if name not in used]
    return rows


FRACTION_NOTE = " (a fraction, 0 best)"  # a Brier score is not in percent, whatever the table's unit


def is_fraction(metric: str) -> bool:
    """Whether `metric` is a fraction rather than the table's unit: a Brier score (CVS's `brier`,
    `video_brier`, `brier_C1`, ...), lower is better."""
    return "brier" in metric.lower()


def metrics_table(rows: list[MetricRow], unit: str = "%") -> str:
    """Markdown table of `rows` (the interval columns only when some row has them); values in `unit`."""
    with_ci = any(row.mean is not None for row in rows)
    header = ["Metric", f"Test value ({unit})"]
    header += [f"Mean over test videos ({unit})", "95 % CI"] if with_ci else []
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in rows:
        cells = [row.name + (FRACTION_NOTE if unit == "%" and is_fraction(row.name) else ""), _fmt(row.value)]
        if with_ci:
            interval = "n/a" if row.ci_low is None else f"[{row.ci_low:.2f}, {row.ci_high:.2f}]"
            cells += [_fmt(row.mean), f"{interval} ({row.videos} videos)" if row.videos else ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_probe_card(
    probe: Probe,
    backbone: Backbone,
    licence: CardLicence,
    repo_id: str,
    results: dict[str, Any] | None,
) -> ModelCard:
    """The card: YAML (`base_model`, `library_name: plstitch`, `pipeline_tag`, licence, dataset, the probe's
    test metrics as `model-index`) and a body with the backbone pin, preprocessing, split and metrics."""
    facts = dataset_facts(probe.dataset)
    rows = metric_rows(probe, results)
    face = task_face(probe)
    data = ModelCardData(
        model_name=repo_id.split("/")[-1],
        license=licence.license,
        license_name=licence.license_name,
        library_name="plstitch",
        pipeline_tag=TASK_TYPE if probe.gives_classes else None,
        base_model=backbone.base_model,
        datasets=[probe.dataset] if probe.dataset else None,
        tags=["plstitch", "probe", f"{probe.kind}-probe", face["tag"]],
        eval_results=_eval_results(probe, rows, facts.display_name or str(probe.dataset)) or None,
    )
    margin = (probe.preprocessing or {}).get("crop_black_margin")
    return ModelCard.from_template(
        data,
        template_path=str(model_cards_dir() / TEMPLATE),
        title=repo_id,
        repo_id=repo_id,
        kind=probe.kind,
        causal="causal: each prediction uses past frames only" if probe.causal else "not causal",
        what=face["what"],
        task=face["task"],
        outputs_label=face["outputs_label"],
        classes=", ".join(probe.class_names),
        dataset=probe.dataset,
        dataset_name=facts.display_name or probe.dataset,
        split=_split_text(results),
        backbone_spec=backbone.spec,
        backbone_sha=backbone.sha256 or "none (built-in encoder)",
        trained_spec=backbone.trained_spec,
        fps=f"{probe.fps:g}" if probe.fps else "?",
        preprocessing=json.dumps(probe.preprocessing, sort_keys=True),
        black_margin=f"cut before the resize: `{json.dumps(margin, sort_keys=True)}`"
        if margin
        else "not cut (whole frame)",
        license=licence.license
        if licence.license_name is None
        else f"{licence.license} ({licence.license_name})",
        licence_sources=[
            f"{s.what}: {s.licence}" + (f" ({s.source})" if s.source else "") for s in licence.sources
        ],
        eval_note=_eval_note(results, rows, face["unit"]),
        metrics_table=metrics_table(rows, face["unit"]) if rows else "",
    )


TASK_TAGS = {
    "phases": "surgical-phase-recognition",
    "rsd": "remaining-surgery-duration",
    "tools": "surgical-tool-presence",
    "triplets": "surgical-action-triplets",
    "cvs": "critical-view-of-safety",
}


def task_face(probe: Probe) -> dict[str, str]:
    """How the card names the probe's task: what it does in words, the task row, the outputs' label, the
    metrics' unit and a tag (a regression task's metrics are in minutes, lower is better)."""
    if probe.is_multilabel:
        return multilabel_face(probe)
    if not probe.is_regression:
        return {
            "what": f"recognizes {probe.num_classes} classes",
            "task": "phases: the surgical phase of each frame",
            "outputs_label": "Classes",
            "unit": "%",
            "tag": TASK_TAGS["phases"],
        }
    task = probe.task or {}
    name = probe.task_name
    if name == "anticipation":
        what = f"anticipates {probe.num_classes} classes up to {task.get('horizon_min', 0):g} min ahead"
        detail = (
            f"anticipation: minutes until each class next occurs, clipped at {task.get('horizon_min'):g} min"
        )
    elif name == "rsd":
        what = "predicts the remaining surgery duration (minutes)"
        detail = "rsd: minutes from each frame to the end of the case"
    else:
        what, detail = f"predicts {name} (minutes)", f"{name} (a regression task)"
    elapsed = "; elapsed minutes as one more input" if task.get("elapsed") else ""
    return {
        "what": what,
        "task": f"{detail}{elapsed}; columns {', '.join(probe.value_columns)}",
        "outputs_label": "Outputs",
        "unit": "min",
        "tag": TASK_TAGS.get(name, f"surgical-{name}"),
    }


MULTILABEL_WHAT = {"tools": "tools", "triplets": "action triplets", "cvs": "critical view of safety criteria"}


def multilabel_face(probe: Probe) -> dict[str, str]:
    """A multi-label probe's task row: the labels it says are present, their thresholds and columns, and
    the validation metric its head was chosen on with its value."""
    task = probe.task or {}
    name = probe.task_name
    thresholds = sorted({float(t) for t in task.get("thresholds", [])})
    cut = ", ".join(f"{t:g}" for t in thresholds) or "?"
    chosen = task.get("select_metric")
    value = task.get("select_value")
    picked = f"; head chosen on validation {chosen}" if chosen else ""
    picked += f" = {float(value):.2f}" if chosen and isinstance(value, int | float) else ""
    what = MULTILABEL_WHAT.get(name, name)
    return {
        "what": f"says which of {probe.num_classes} {what} are present in each frame",
        "task": (
            f"{name} (multi-label): a probability per label ({', '.join(probe.class_names)}), present above "
            f"{cut}{picked}; columns {', '.join(probe.value_columns)} and present"
        ),
        "outputs_label": "Labels",
        "unit": "%",
        "tag": TASK_TAGS.get(name, f"surgical-{name}"),
    }


def _eval_results(probe: Probe, rows: list[MetricRow], dataset_name: str) -> list[EvalResult]:
    return [
        EvalResult(
            task_type=TASK_TYPE if probe.gives_classes else f"surgical-{probe.task_name}",
            task_name=f"{probe.kind} probe on frozen features ({probe.task_name})",
            dataset_type=str(probe.dataset or "unknown").lower(),
            dataset_name=dataset_name,
            dataset_split="test",
            metric_type=f"{probe.kind}_{row.name}",
            metric_name=row.name,
            metric_value=round(row.value, 4),
        )
        for row in rows
        if row.value is not None
    ]


def _eval_note(results: dict[str, Any] | None, rows: list[MetricRow], unit: str = "%") -> str:
    if not rows:
        return "This probe records no test metrics."
    values = "values in percent" if unit == "%" else "errors in minutes, lower is better"
    if unit == "%" and any(is_fraction(row.name) for row in rows):
        values += "; Brier scores as fractions, lower is better"
    if results is None:
        return (
            f"The probe's own test metrics ({values}, from its probe.json). No per-video confidence "
            "intervals: it was published without the results JSON of the run that saved it."
        )
    videos = max((row.videos for row in rows), default=0)
    return (
        f"The probe's own test metrics ({values}) from the run that saved it; intervals are "
        f"{CONFIDENCE:.0%} Student t intervals of the mean over the {videos} test videos."
    )


def _split_text(results: dict[str, Any] | None) -> str:
    splits = (results or {}).get("splits")
    if not isinstance(splits, dict) or not splits:
        return "not recorded (published without its results JSON)"
    parts = [
        f"{name} {len(videos)} video{'s' * (len(videos) != 1)}"
        for name, videos in splits.items()
        if isinstance(videos, list)
    ]
    test = splits.get("test")
    listed = f" (test: {', '.join(map(str, test))})" if isinstance(test, list) and len(test) <= 20 else ""
    return ", ".join(parts) + listed


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"

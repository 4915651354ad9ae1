"""Model cards: render `README.md` with `huggingface_hub.ModelCard` from results JSON or the paper's numbers.

Evaluation results become `model-index` metadata (`EvalResult`), which the Hub shows and tools parse.
Metric types are `<protocol>_<metric>` (e.g. `knn_accuracy`, `linear_macro_f1_video`) so that a linear-probe
and a k-NN accuracy on the same dataset stay distinct.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from plstitch_eval.data.datasets import dataset_facts
from plstitch_eval.hub.registry import MODELS, get_model_entry
from plstitch_eval.protocols.registry import task_card_detail, task_title
from plstitch_eval.resources import load_paper_results, model_cards_dir, paper_results_path
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import write_text_atomic

__all__ = [
    "MODEL_CARDS_DIR",
    "PAPER_RESULTS_PATH",
    "TASK_TYPE",
    "TEMPLATE_PATH",
    "CardInfo",
    "architecture_text",
    "card_licence",
    "dataset_display_name",
    "eval_results_from_paper",
    "eval_results_from_results",
    "eval_results_table",
    "load_paper_results",  # from plstitch_eval.resources; read through this module since before
    "render_card",
    "render_reference_cards",
    "reported_table",
]

MODEL_CARDS_DIR = model_cards_dir()
TEMPLATE_PATH = MODEL_CARDS_DIR / "modelcard_template.md"
PAPER_RESULTS_PATH = paper_results_path()
TASK_TYPE = "video-classification"


@dataclass
class CardInfo:
    """Everything a card states; `eval_results` go to `model-index`, `reported` rows to a labelled table."""

    model_name: str
    title: str
    description: str
    architecture: str
    feature: str
    preprocessing: str
    usage: str
    license: str = "mit"
    license_source: str = ""  # where the licence is stated (shown beside it on the card)
    pretraining_data: str = "see below"
    training_data: str = ""
    training_config: dict[str, Any] | None = None
    eval_results: list[EvalResult] = field(default_factory=list)
    reported: list[dict[str, Any]] = field(default_factory=list)
    reported_note: str = ""
    eval_note: str = "Measured with plstitch on frozen features; values in percent (test split)."
    no_results_note: str = (
        "No evaluation results were attached to this export (pass `--results results/*.json`)."
    )
    source: str | None = None
    provenance: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    base_model: str | None = None
    model_citation: str = ""
    status: str = ""  # e.g. "unfinished run: stopped at step 3 of 4": shown in bold under the description


def architecture_text(config: dict[str, Any]) -> str:
    """The card's "Architecture" row for a timm `config.json`: the real sizes, then the timm name used.

    Why: exports name ViTs `vit_base_patch16_224` plus size overrides, so the name alone misstates the size.
    """
    args = config.get("model_args", {})
    name = config["architecture"]
    if "embed_dim" not in args:
        return f"timm `{name}` with {json.dumps(args)}"
    patch, size = args.get("patch_size", "?"), args.get("img_size")
    patch = patch[0] if isinstance(patch, list | tuple) else patch
    size = size[0] if isinstance(size, list | tuple) else size
    text = (
        f"timm VisionTransformer, patch {patch}, embed dim {args['embed_dim']}, depth {args.get('depth')}, "
        f"{args.get('num_heads')} heads"
    )
    text += f", {size} px input" if size else ""
    return f"{text} (`{name}` architecture string with size overrides)"


def dataset_display_name(dataset: str) -> str:
    """Pretty name of a dataset key (`cholec80` -> `Cholec80`); unknown names pass through."""
    return dataset_facts(dataset).display_name


def _task_name(dataset: str) -> str:
    surgical = dataset_facts(dataset).family == "surgical"
    return "Surgical phase recognition" if surgical else "Temporal action segmentation"


def eval_results_from_results(results: Sequence[dict[str, Any]]) -> list[EvalResult]:
    """One `EvalResult` per metric of each results JSON; metric type `<task>_<metric>`, values in percent."""
    out = []
    for result in results:
        task, dataset = str(result["task"]), str(result["dataset"])
        protocol = task_title(task)
        hyper = result.get("protocol") or {}
        detail = task_card_detail(task, hyper)
        args = {k: v for k, v in hyper.items() if isinstance(v, str | int | float | bool)}
        for metric, value in result["metrics"].items():
            if not isinstance(value, int | float):
                continue
            out.append(
                EvalResult(
                    task_type=TASK_TYPE,
                    task_name=f"{_task_name(dataset)}, frozen features",
                    dataset_type=dataset.lower(),
                    dataset_name=dataset_display_name(dataset),
                    dataset_split="test",
                    metric_type=f"{task}_{metric}",
                    metric_name=f"{protocol}{detail} {metric}",
                    metric_value=round(float(value), 4),
                    metric_args=args or None,
                )
            )
    return out


def eval_results_from_paper(rows: Sequence[dict[str, Any]], paper: dict[str, Any]) -> list[EvalResult]:
    """`EvalResult`s for the paper's rows, each with `source_name` saying it is reported by the paper."""
    names = load_paper_results().get("metric_names", {})
    out = []
    for row in rows:
        for metric, value in row["metrics"].items():
            out.append(
                EvalResult(
                    task_type=TASK_TYPE,
                    task_name=f"{_task_name(row['dataset'])}, frozen features",
                    dataset_type=row["dataset"].lower(),
                    dataset_name=row["dataset"],
                    dataset_split="test",
                    metric_type=metric,
                    metric_name=names.get(metric, metric),
                    metric_value=float(value),
                    source_name=f"Reported by the PL-Stitch paper ({paper['venue']}), {row['table']}",
                    source_url=paper["code_url"],
                )
            )
    return out


def _markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def eval_results_table(results: Sequence[EvalResult]) -> str:
    """Markdown table: dataset, metric, value, source."""
    return _markdown_table(
        ["Dataset", "Metric", "Value (%)", "Source"],
        (
            (
                r.dataset_name,
                r.metric_name or r.metric_type,
                f"{r.metric_value:.2f}",
                r.source_name or "plstitch",
            )
            for r in results
        ),
    )


def reported_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown table of paper rows: method, pretraining data, dataset, metric, value, table."""
    names = load_paper_results().get("metric_names", {})
    return _markdown_table(
        ["Method (as in the paper)", "Pretraining data", "Dataset", "Metric", "Value (%)", "Paper table"],
        (
            (
                row["method"],
                row["pretraining_data"],
                row["dataset"],
                names.get(m, m),
                f"{v:.1f}",
                row["table"],
            )
            for row in rows
            for m, v in row["metrics"].items()
        ),
    )


def card_licence(chosen: str | None, init: str | None) -> tuple[str, str]:
    """(licence, where it is stated) of a trained model's card: weights trained from a registry model under a
    non-commercial licence keep that licence (a `chosen` other one is refused with a warning); otherwise
    `chosen`, MIT when none was given (plstitch's own)."""
    entry = MODELS.get(init) if init else None
    if entry is None or not entry.non_commercial:
        return (chosen or "mit"), ""
    inherited = entry.license.lower()
    if chosen is not None and chosen.lower() != inherited:
        logger.warning(
            "--license %s ignored: the run started from %s, whose weights are under %s (non-commercial); "
            "the card keeps that licence",
            chosen,
            init,
            entry.license,
        )
    return inherited, f"inherited from the initial weights {init}: {entry.license_source or entry.license}"


def render_card(info: CardInfo, template_path: str | Path = TEMPLATE_PATH) -> ModelCard:
    """Fill `model_cards/modelcard_template.md` with `info`; `model-index` metadata from `eval_results`."""
    paper = load_paper_results()["paper"]
    card_data = ModelCardData(
        model_name=info.model_name,
        license=info.license,
        library_name="timm",
        tags=sorted(
            {"pl-stitch", "self-supervised", "procedural-video", "image-feature-extraction", *info.tags}
        ),
        pipeline_tag="image-feature-extraction",
        base_model=info.base_model,
        eval_results=info.eval_results or None,
    )
    return ModelCard.from_template(
        card_data,
        template_path=str(template_path),
        title=info.title,
        description=info.description,
        status=info.status,
        architecture=info.architecture,
        feature=info.feature,
        preprocessing=info.preprocessing,
        license=f"{info.license} (source: {info.license_source})" if info.license_source else info.license,
        source=info.source,
        provenance=info.provenance,
        usage=info.usage,
        pretraining_data=info.pretraining_data,
        training_data=info.training_data or "See the training configuration.",
        training_config=json.dumps(info.training_config, indent=2, default=str)
        if info.training_config
        else "",
        eval_table=eval_results_table(info.eval_results) if info.eval_results else "",
        eval_note=info.eval_note,
        no_results_note=info.no_results_note,
        reported_table=reported_table(info.reported) if info.reported else "",
        reported_note=info.reported_note,
        citation=paper["bibtex"],
        model_citation=info.model_citation,
    )


def _reference_info(model: dict[str, Any], data: dict[str, Any]) -> CardInfo:
    """CardInfo for an official checkpoint or registry baseline, numbers labelled as reported by the paper."""
    method, datasets = model.get("paper_method"), model.get("datasets")
    rows = [
        row
        for row in data["rows"]
        if method and row["method"] == method and (datasets is None or row["dataset"] in datasets)
    ]
    describes = bool(model.get("numbers_describe_this_checkpoint"))
    entry = get_model_entry(model["name"])  # weights location, license and citation live in the registry
    usage = f'from plstitch_eval.hub import load_encoder\nencoder = load_encoder("{entry.name}")'
    if entry.converter == "timm" and entry.repo_id:
        spec = f"hf-hub:{entry.repo_id}"
        usage += "\n# or plain timm\nimport timm\n"
        usage += f'model = timm.create_model("{spec}", pretrained=True, num_classes=0)'
    preprocessing = (
        "as in the source's timm config" if entry.data_config is None else entry.data_config.describe()
    )
    if entry.preprocessing_source:
        preprocessing += f" (source: {entry.preprocessing_source})"
    tables = ", ".join(sorted({row["table"] for row in rows}))
    venue = data["paper"]["venue"]
    note = f"Numbers **as reported by the PL-Stitch paper** ({venue}, {tables}), not re-measured by plstitch."
    if model.get("note"):
        note += " " + model["note"]
    missing = "plstitch has measured nothing for this checkpoint yet; "
    if rows:
        missing += "the paper's numbers below are for a different model and are shown for reference only."
    else:
        missing += "the paper reports no numbers for it."
    return CardInfo(
        model_name=model["name"],
        title=model["title"],
        description=model["description"],
        architecture=model["architecture"],
        feature=f"{entry.feature_dim}-d {_feature_description(entry)}",
        preprocessing=preprocessing,
        usage=usage,
        license=entry.license.lower(),
        license_source=entry.license_source,
        pretraining_data=model["pretraining_data"],
        training_data=f"Pretraining data: {model['pretraining_data']}.",
        eval_results=eval_results_from_paper(rows, data["paper"]) if describes else [],
        eval_note=note,
        no_results_note=missing,
        reported=[] if describes else rows,
        reported_note=note,
        source=f"`{entry.source}`",
        tags=["reference"],
        model_citation="" if model.get("paper_method") == "PL-Stitch" else entry.citation,
    )


def _feature_description(entry: Any) -> str:
    """What a registry entry's feature vector is (pooling and, for clip models, the window)."""
    pooled = entry.feature_description
    clip = getattr(entry, "clip", None)
    if clip is None:
        return pooled
    return f"{pooled}, one per sampled frame, from a window of {clip.num_frames} frames around it"


def render_reference_cards(out_dir: str | Path = MODEL_CARDS_DIR / "reference") -> list[Path]:
    """Write one `<name>.md` card per official checkpoint and registry baseline; return the paths.

    Only checkpoints the paper's numbers describe get `model-index` metadata; for the others the paper's
    numbers (for the same method pretrained on other data) appear in a labelled table only.
    """
    data = load_paper_results()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for model in data["reference_models"]:
        card = render_card(_reference_info(model, data))
        path = out_dir / f"{model['name']}.md"
        write_text_atomic(path, str(card))
        paths.append(path)
    return paths

"""What a `plstitch extract` command line asks for (`ExtractRequest`: a dataset, its models and where their
stores go), checked before any model loads, and its run (`extract_session`: load, extract, report, the exit
code), so the command only parses its flags."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.text import Text

from plstitch_eval.data.datasets import DatasetAdapter, dataset_class, get_dataset
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract.options import (
    ExtractOptions,
    ExtractTarget,
    check_redo,
    select_videos,
    store_targets,
)
from plstitch_eval.extract.pipeline import extract_many, open_frame_cache
from plstitch_eval.extract.store import check_out_folder, check_stores_folder
from plstitch_eval.extract.summary import MultiExtractSummary, print_summary
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.utils.console import console, print_error
from plstitch_eval.utils.io import write_json_output

__all__ = [
    "SYNTHETIC_DEFAULT_MODEL",
    "ExtractRequest",
    "default_model",
    "extract_session",
    "failed_videos_line",
    "video_names",
]

SYNTHETIC_DEFAULT_MODEL = "plstitch-tiny-synthetic"


def default_model(dataset: str) -> str:
    """The model used when `--model` is omitted: the shipped tiny model for `synthetic`, if registered."""
    if dataset == "synthetic" and SYNTHETIC_DEFAULT_MODEL in MODELS:
        return SYNTHETIC_DEFAULT_MODEL
    raise ConfigError(
        f"--model is required for dataset {dataset!r}: pass a registry name (see `plstitch models`), "
        "hf-hub:ORG/NAME, a timm-format folder or a checkpoint file."
    )


def video_names(text: str | None) -> list[str] | None:
    """`--videos a, b,` as ["a", "b"]; None (every video) when not given."""
    return [v.strip() for v in text.split(",") if v.strip()] if text else None


@dataclass
class ExtractRequest:
    """One extraction as the command line names it: `dataset` (at `root`), the `--model` specs (None: the
    dataset's default model), `out` (the store, or the folder of one store per model), how the encoders load
    (`load`: `load_encoder`'s keywords) and where the summary JSON goes (`json_path`, - = stdout)."""

    dataset: str
    out: Path
    root: Path | None = None
    models: list[str] | None = None
    load: dict[str, Any] = field(default_factory=dict)
    json_path: Path | None = None

    @property
    def specs(self) -> list[str]:
        """The models to extract, each once, in the order given; the dataset's default when none is."""
        return list(dict.fromkeys(self.models)) if self.models else [default_model(self.dataset)]

    @property
    def where(self) -> str:
        """Where the stores are, for the closing lines."""
        return f"{self.out}" if len(self.specs) == 1 else f"the stores under {self.out}"

    def check(self, options: ExtractOptions) -> tuple[DatasetAdapter, list[ExtractTarget]]:
        """The dataset adapter and each model's store target, with the dataset's videos and annotations, the
        chosen videos, the frame cache and the --out folders checked: a wrong --root fails before a model
        loads."""
        dataset_class(self.dataset)  # an unknown name is told (with close matches) before a missing --model
        specs = self.specs
        adapter = get_dataset(self.dataset, root=self.root)
        records = select_videos(adapter, options.split, options.videos, options.split_scheme)
        check_redo(records, options.redo)
        open_frame_cache(options, adapter, records)
        if len(specs) > 1:
            targets = store_targets(specs, self.out)
            check_stores_folder(self.out)
        else:
            targets = [ExtractTarget(specs[0], self.out, specs[0])]
        for target in targets:
            check_out_folder(target.out, options.overwrite)
        return adapter, targets


def extract_session(request: ExtractRequest, options: ExtractOptions) -> int:
    """Check `request`, load its encoders, extract, print each store's summary and write the JSON; the exit
    code: 0, 1 when a video failed (on any rank), 130 when interrupted (finished videos stay)."""
    adapter, targets = request.check(options)
    if request.models is None and os.environ.get("RANK", "0") == "0":  # once under torchrun
        note = f" no --model given: using {targets[0].name}, the shipped toy model for the {request.dataset}"
        console.print(Text.assemble(("note:", "yellow"), note + " dataset"), soft_wrap=True, highlight=False)
    targets = [replace(t, encoder=load_encoder(t.name, **request.load)) for t in targets]
    try:
        summary = extract_many(adapter, targets, options)
    except KeyboardInterrupt:
        print_error(
            f"{request.where} hold(s) every video finished so far; rerun the same command to resume.",
            label="interrupted",
            style="yellow",
        )
        return 130
    if summary.rank != 0:
        return 0 if summary.ok else 1
    for store in summary.stores:
        print_summary(store)
    if request.json_path is not None:
        single = summary.stores[0].to_dict() if len(targets) == 1 else summary.to_dict()
        write_json_output(request.json_path, single)
    if not summary.ok:
        print_error(failed_videos_line(summary, request.where))
        return 1
    return 0


def failed_videos_line(summary: MultiExtractSummary, where: str) -> str:
    """The closing line of a run with failed videos: each by name (and model, with several), and the fix."""
    several = len(summary.stores) > 1
    failed = ", ".join(f"{r.video} ({name})" if several else r.video for name, r in summary.failed)
    return (
        f"{len(summary.failed)} video(s) failed: {failed}; the others are in {where}. "
        "Fix or remove them and rerun the same command to resume."
    )

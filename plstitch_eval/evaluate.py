"""Evaluate one encoder on one dataset: frozen features into a store, then k-NN and the linear probe.

The step `plstitch quickstart` and `plstitch reproduce` share: dataset adapter -> encoder -> feature store
(`extract_features`) -> `run_knn` + `run_linear` -> `<results_dir>/knn.json` and `linear.json`
(plstitch.results/v1). Rerunning resumes the store; the results are computed and written again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import (
    ExtractOptions,
    ExtractSummary,
    ExtractTarget,
    MultiExtractSummary,
    extract_features,
    extract_many,
)
from plstitch_eval.hub import Encoder, load_encoder
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols import get_protocol
from plstitch_eval.results_json import write_results
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.device import resolve_device

PROTOCOLS = ("knn", "linear")  # the registered protocols `evaluate_encoder` runs, each with its section below


def result_paths(results_dir: str | Path) -> dict[str, Path]:
    """Where `evaluate_encoder` writes each protocol's results JSON: {"knn": .../knn.json, "linear": ...}."""
    return {protocol: Path(results_dir) / f"{protocol}.json" for protocol in PROTOCOLS}


@dataclass
class EvaluateConfig:
    """What to evaluate on and how: the dataset (registry name, root, adapter options) and each step's config.

    The adapter gets `extract.fps` as its `fps` when set, so its eval fps matches the extracted one.
    """

    dataset: str = "synthetic"
    root: str | Path | None = None
    dataset_options: dict[str, Any] = field(default_factory=dict)  # e.g. n_videos for the synthetic data
    extract: ExtractOptions = field(default_factory=ExtractOptions)
    knn: KnnConfig = field(default_factory=KnnConfig)
    linear: LinearConfig = field(default_factory=LinearConfig)
    val_fraction: float = 0.2  # linear: training videos held out when the store has no val split

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ConfigError(f"EvaluateConfig.dataset must be a dataset name, got {self.dataset!r}.")
        if "fps" in self.dataset_options:
            raise ConfigError("EvaluateConfig.dataset_options must not hold fps; set extract.fps instead.")
        for name, kind in (("extract", ExtractOptions), ("knn", KnnConfig), ("linear", LinearConfig)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"EvaluateConfig.{name} must be a {kind.__name__}.")


def frozen_evaluation(
    dataset: str,
    dataset_options: dict[str, Any],
    *,
    fps: float | None,
    device: str,
    knn_k: int,
    linear_epochs: int,
    **extract: Any,
) -> EvaluateConfig:
    """The evaluation `quickstart` and `reproduce` run: extraction that stops at the first bad video, then
    k-NN and the linear probe on the same device. `extract` holds further `ExtractOptions` fields."""
    return EvaluateConfig(
        dataset=dataset,
        dataset_options=dataset_options,
        extract=ExtractOptions(fps=fps, device=device, fail_fast=True, **extract),
        knn=KnnConfig(k=knn_k, device=device),
        linear=LinearConfig(epochs=linear_epochs, device=device),
    )


@dataclass
class EncoderEvaluation:
    """What `evaluate_encoder` made: the store, the results dicts and their JSON files, stage timings (s)."""

    features: Path
    results: dict[str, dict[str, Any]]  # protocol ("knn", "linear") -> plstitch.results/v1 dict
    paths: dict[str, Path]  # protocol -> its results JSON
    extraction: ExtractSummary
    seconds: dict[str, float] = field(default_factory=dict)  # dataset, load_model, extract, evaluate


class _Stopwatch:
    """Records the wall time of named stages (reported, never asserted)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._start = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._start, 2)
        self._start = now


def evaluate_encoder(
    model: str | Path | Encoder, features: str | Path, results_dir: str | Path, config: EvaluateConfig
) -> EncoderEvaluation:
    """Extract `model`'s features of `config.dataset` into `features`, score k-NN + linear into `results_dir`.

    `model` is an `Encoder` or any spec `load_encoder` takes (loaded on `config.extract.device`).
    """
    clock = _Stopwatch()
    adapter = _adapter(config)
    clock.lap("dataset")
    device = str(resolve_device(config.extract.device))
    encoder = model if isinstance(model, Encoder) else load_encoder(model, device=device)
    clock.lap("load_model")
    spec = encoder.provenance.get("spec", model)
    logger.info("evaluate: %s (%d-d features) on %s", spec, encoder.feature_dim, device)
    features = Path(features)
    summary = extract_features(adapter, encoder, features, config.extract)
    clock.lap("extract")
    logger.info("%s", summary.headline())

    results = {name: get_protocol(name).run(features, config, None) for name in PROTOCOLS}
    paths = result_paths(results_dir)
    for protocol, result in results.items():
        write_results(paths[protocol], result)
    clock.lap("evaluate")
    return EncoderEvaluation(features, results, paths, summary, clock.seconds)


def _adapter(config: EvaluateConfig) -> Any:
    """The dataset adapter, told the extraction fps when one is set (so its eval fps matches it)."""
    fps = {"fps": config.extract.fps} if config.extract.fps is not None else {}
    return get_dataset(config.dataset, root=config.root, **fps, **config.dataset_options)


def extract_encoders(stores: dict[Path, Encoder], config: EvaluateConfig) -> MultiExtractSummary:
    """Every encoder's store of `config.dataset` in one pass (each video decoded once; `extract_many`), so
    that `evaluate_encoder` on each then only resumes it."""
    targets = [ExtractTarget(encoder, Path(out), Path(out).name) for out, encoder in stores.items()]
    return extract_many(_adapter(config), targets, config.extract)


__all__ = ["EncoderEvaluation", "EvaluateConfig", "evaluate_encoder", "extract_encoders", "result_paths"]

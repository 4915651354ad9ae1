"""Evaluating a reproduction's encoders: frozen k-NN + linear, order measures, gradient scale, the reference
rows and the awareness comparison; each result cached as JSON in the run's folder so a rerun skips it.

Split from `plstitch_train.reproduce.run` (which trains and tabulates) to keep each module one job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from plstitch_eval.analysis.awareness import run_awareness_controls, seed_contrasts
from plstitch_eval.analysis.order import model_order_tau
from plstitch_eval.analysis.time_probe import time_probe, write_time_oracle_store
from plstitch_eval.data.synthetic import generate_synthetic
from plstitch_eval.evaluate import evaluate_encoder, frozen_evaluation, result_paths
from plstitch_eval.hub.architectures.pixels import PIXELS_SPEC
from plstitch_eval.hub.ranking_head import HEAD_WEIGHTS_FILE
from plstitch_eval.hub.run_folder import backbone_dir
from plstitch_eval.protocols import run_knn, run_linear, run_majority
from plstitch_eval.results_json import write_results
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import write_json_atomic
from plstitch_train.config import TrainConfig
from plstitch_train.gradient_scale import objective_gradient_scale
from plstitch_train.heldout import heldout_jigsaw_loss
from plstitch_train.reproduce.presets import RANDOM_SHARED_INIT, ReproduceConfig, ReproduceLayout, run_name
from plstitch_train.reproduce.tables import MAJORITY, METRICS, ORACLE_TIME, PROTOCOLS, RAW_PIXELS, SHARED_INIT

__all__ = [
    "dataset_root",
    "ensure_awareness",
    "ensure_evaluated",
    "ensure_gradient_scale",
    "ensure_order_measures",
    "ensure_references",
    "run_record",
]


def dataset_root(config: ReproduceConfig) -> Path:
    """Generate (or reuse) the synthetic dataset with the configured options; its folder."""

    return generate_synthetic(**config.dataset_options)


def ensure_evaluated(
    run_dir: Path, config: ReproduceConfig, spec: str | None = None
) -> dict[str, dict[str, Any]]:
    """Extract frozen features of every synthetic video and score k-NN + linear (cached JSON).

    The encoder is the run folder itself, or `spec` (a reference encoder) with its outputs in `run_dir`.
    """

    results_dir = ReproduceLayout.eval_dir(run_dir)
    paths = result_paths(results_dir)
    if all(p.is_file() for p in paths.values()):
        return {p: json.loads(path.read_text(encoding="utf-8")) for p, path in paths.items()}
    evaluation = _evaluation(config)
    model = spec if spec is not None else run_dir
    return evaluate_encoder(model, ReproduceLayout.features(run_dir), results_dir, evaluation).results


def _heldout_data(config: ReproduceConfig) -> tuple[str, str | None, str | None]:
    """(dataset, root, split) of the held-out videos: the test split; every video of a reduced dataset."""
    if config.dataset_options:
        return "cholec80", str(dataset_root(config)), None
    return config.preset.dataset, None, "test"


def ensure_order_measures(run_dir: Path, config: ReproduceConfig, trained: bool) -> dict[str, Any]:
    """t/T probe R^2 (any store), Kendall tau of the temporal head and held-out jigsaw loss (cached JSON)."""

    path = ReproduceLayout.eval_dir(run_dir) / "order.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    store = ReproduceLayout.features(run_dir)
    probe = time_probe(store)
    record: dict[str, Any] = {"time_probe": probe, "time_r2": probe["r2"], "time_mae": probe["mae"]}
    record["tau"], record["jigsaw_minus_chance"] = None, None
    if trained and (backbone_dir(run_dir) / HEAD_WEIGHTS_FILE).is_file():
        order = model_order_tau(
            run_dir, store, "test", clip_len=config.preset.order_clip_len, device=config.device
        )
        record["order_tau"] = {k: v for k, v in order.items() if k != "per_video"}
        record["tau"] = order["tau_mean"]
    if trained:
        dataset, root, split = _heldout_data(config)
        jigsaw = heldout_jigsaw_loss(
            run_dir,
            dataset,
            split,
            root=root,
            n_batches=config.preset.heldout_batches,
            cache_dir=ReproduceLayout.of(config).frame_cache,
        )
        if jigsaw is not None:
            record["heldout_jigsaw"] = jigsaw
            record["jigsaw_minus_chance"] = jigsaw["minus_chance"]
    write_json_atomic(path, record)
    return record


def ensure_gradient_scale(run_dir: Path, config: ReproduceConfig, train: TrainConfig) -> dict[str, Any]:
    """Backbone gradient norm of each weighted loss at the run's start (cached JSON): how hard each objective
    pushes the shared initialisation, reported beside its row (the objectives' losses differ in scale)."""

    path = ReproduceLayout.eval_dir(run_dir) / "gradients.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    record = objective_gradient_scale(
        train, n_batches=config.preset.gradient_batches, cache_dir=ReproduceLayout.of(config).frame_cache
    )
    write_json_atomic(path, record)
    return record


def ensure_references(config: ReproduceConfig, source_store: Path) -> dict[str, dict[str, Any]]:
    """The reference rows besides random init: raw pixels, the t/T oracle, the shared initialisation when it
    is a pretrained encoder, and the majority class."""

    out = ReproduceLayout.of(config).references
    records: dict[str, dict[str, Any]] = {}
    pixels = out / RAW_PIXELS
    results = ensure_evaluated(pixels, config, spec=PIXELS_SPEC)
    records[RAW_PIXELS] = run_record(RAW_PIXELS, 0, False, pixels, results)
    records[RAW_PIXELS]["order"] = ensure_order_measures(pixels, config, trained=False)

    oracle = out / ORACLE_TIME
    paths = result_paths(ReproduceLayout.eval_dir(oracle))
    if not all(p.is_file() for p in paths.values()):
        store = write_time_oracle_store(source_store, ReproduceLayout.features(oracle))
        evaluation = _evaluation(config)
        write_results(paths["knn"], run_knn(store, evaluation.knn))
        write_results(paths["linear"], run_linear(store, evaluation.linear))
    results = {p: json.loads(path.read_text(encoding="utf-8")) for p, path in paths.items()}
    records[ORACLE_TIME] = run_record(ORACLE_TIME, 0, False, oracle, results)
    records[ORACLE_TIME]["order"] = ensure_order_measures(oracle, config, trained=False)

    if config.preset.shared_init not in (None, RANDOM_SHARED_INIT):  # the pretrained start, as it is
        start = out / SHARED_INIT
        results = ensure_evaluated(start, config, spec=config.preset.shared_init)
        records[SHARED_INIT] = run_record(SHARED_INIT, 0, False, start, results)
        records[SHARED_INIT]["order"] = ensure_order_measures(start, config, trained=False)

    majority = run_majority(source_store)
    accuracy = majority["metrics"]["accuracy"]
    records[MAJORITY] = {
        "row": MAJORITY,
        "seed": 0,
        "reverse_time": False,
        "class_name": majority["class_name"],
        "metrics": {p: {"accuracy": accuracy, "macro_f1_video": None} for p in PROTOCOLS},
    }
    return records


def _evaluation(config: ReproduceConfig) -> Any:
    """The preset's frozen evaluation (an `EvaluateConfig`: extraction, k-NN, linear) on its device."""

    preset = config.preset
    return frozen_evaluation(
        preset.dataset,
        config.dataset_options,
        fps=preset.eval_fps,
        device=config.device,
        knn_k=preset.knn_k,
        linear_epochs=preset.linear_epochs,
        num_workers=config.num_workers,
        progress=False,
    )


def run_record(
    row: str, seed: int, reverse: bool, run_dir: Path, results: dict[str, dict[str, Any]] | None
) -> dict[str, Any]:
    """One run's record in the summary: row, seed, direction, folder and (when evaluated) its metrics."""
    record: dict[str, Any] = {"row": row, "seed": seed, "reverse_time": reverse, "run_dir": str(run_dir)}
    if results is not None:
        record["metrics"] = {p: {m: results[p]["metrics"][m] for m in METRICS} for p in PROTOCOLS}
        record["metrics_all"] = {p: results[p]["metrics"] for p in PROTOCOLS}
    return record


def ensure_awareness(config: ReproduceConfig, row: str) -> dict[str, Any] | None:
    """Forward vs time-reversed runs of `row` against same-direction controls (violins + JSON), or None.

    Needs two seeds (one forward and one reversed run give no same-direction pair).
    """

    if config.n_seeds < 2:
        logger.warning("awareness of %s skipped: same-direction controls need --seeds >= 2", row)
        return None
    layout = ReproduceLayout.of(config)
    seeds = range(config.n_seeds)
    forward = {run_name(row, s): layout.features(layout.run(row, s)) for s in seeds}
    reverse = {run_name(row, s, True): layout.features(layout.run(row, s, True)) for s in seeds}
    figures = layout.figures
    name = f"awareness-{row}"
    data = figures / f"{name}.json"
    matched = {run_name(row, s): run_name(row, s, True) for s in range(config.n_seeds)}
    wanted = {
        "forward": {k: str(v) for k, v in forward.items()},
        "reversed": {k: str(v) for k, v in reverse.items()},
        "matched": matched,
    }
    if (figures / f"{name}.png").is_file() and data.is_file():
        cached = json.loads(data.read_text(encoding="utf-8"))
        if {k: cached.get(k) for k in wanted} == wanted:
            return _awareness_summary(figures / f"{name}.png", cached)
    png, _, summary = run_awareness_controls(forward, reverse, figures, name, matched=matched)
    return _awareness_summary(png, {**summary, "matched": matched})


def _awareness_summary(png: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """The summary's awareness entry: figure, contrast, group means and per-seed contrasts."""
    stats = summary["stats"]
    matched = summary.get("matched") or {}
    return {
        "seed_contrasts": seed_contrasts(summary["pair_means"], matched) if matched else {},
        "figure": str(png),
        "contrast": summary["contrast"],
        "same_direction_mean": summary["same_direction_mean"],
        "group_means": {group: values["mean"] for group, values in stats.items()},
        "cross_split_means": {k: v["mean"] for k, v in summary.get("cross_split", {}).items()},
        "contrast_definition": summary["contrast_definition"],
    }

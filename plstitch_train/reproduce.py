"""CPU-scale reproduction of the paper's ablations on the synthetic procedural dataset (`plstitch reproduce`).

Rows (same budget each, several seeds): the component table - MIM only; MIM + L_vid; MIM + L_jigsaw; all
three - and the temporal-objective table - pairwise hinge, permutation classification, Plackett-Luce (all
three branches, only the L_vid objective differs; the Plackett-Luce row is the all-three run). With
`shared_init` every trained run starts from one backbone, the seed-0 random init, so seeds differ only in
heads, data order, augmentation and masks. References: the majority class, raw pixels, random init (one per
seed) and the oracle "normalised time t/T". Each encoder is evaluated frozen with k-NN and the linear probe on
the synthetic test split, plus order measures: a ridge probe of t/T, the Kendall tau of the temporal head on
held-out videos and the held-out jigsaw loss minus chance. Rows report mean +- sample std over seeds. The
awareness experiment trains the awareness rows again on time-reversed videos (every seed) and compares
forward-vs-reversed cosine distances with the forward-vs-forward and reversed-vs-reversed spread.

Output folder::

    runs/<row>-seed<s>/           training run (backbone/, last.ckpt, log.jsonl), features/, eval/*.json
    runs/<row>-reversed-seed<s>/  time-reversed runs of the awareness experiment (evaluated the same way)
    references/<name>/            raw pixels and the t/T oracle: features/, eval/*.json
    figures/awareness-<row>.png|json  violins of the three pair groups and their numbers
    ablation.json / ablation.md   every run's metrics and the mean +- std tables

Resumable: a finished run (its `backbone/` exists) or evaluation (its JSON exists) is skipped; an interrupted
run resumes from its `last.ckpt`. A run folder made with other settings is refused, naming the folder.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from plstitch_eval.analysis.awareness import run_awareness_controls, seed_contrasts
from plstitch_eval.analysis.order import model_order_tau
from plstitch_eval.analysis.time_probe import time_probe, write_time_oracle_store
from plstitch_eval.data.synthetic import generate_synthetic
from plstitch_eval.errors import ConfigError
from plstitch_eval.evaluate import evaluate_encoder, frozen_evaluation, result_paths
from plstitch_eval.hub.pixels import PIXELS_SPEC
from plstitch_eval.hub.run_folder import (
    backbone_dir,
    checkpoint_path,
    is_finished,
    read_train_config,
)
from plstitch_eval.hub.temporal_head import HEAD_WEIGHTS_FILE
from plstitch_eval.hub.timm_format import save_timm_dir
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.protocols import run_knn, run_linear, run_majority
from plstitch_eval.results_json import write_results
from plstitch_eval.utils.console import logger, setup_logging
from plstitch_eval.utils.io import write_json_atomic, write_text_atomic
from plstitch_train.config import TrainConfig
from plstitch_train.export import ExportOptions, export_model
from plstitch_train.gradient_scale import objective_gradient_scale
from plstitch_train.heldout import heldout_jigsaw_loss
from plstitch_train.model import build_vit
from plstitch_train.presets import get_preset
from plstitch_train.reproduce_jobs import run_in_parallel, training_seconds
from plstitch_train.reproduce_presets import (
    RANDOM_SHARED_INIT,
    REPRODUCE_PRESETS,
    ROWS,
    SYNTHETIC_EPOCHS,
    SYNTHETIC_TRAINING,
    AblationRow,
    ReproduceConfig,
    ReproduceLayout,
    ReproducePreset,
    get_reproduce_preset,
    run_name,
)
from plstitch_train.reproduce_stats import (
    COMPARISONS,
    awareness_comparison,
    comparisons_markdown,
    paired_comparisons,
    per_seed_markdown,
)
from plstitch_train.reproduce_tables import (
    MAJORITY,
    METRICS,
    ORACLE_TIME,
    PROTOCOLS,
    RANDOM_INIT,
    RAW_PIXELS,
    SHARED_INIT,
    aggregate,
    markdown_tables,
    mean_std,
    shown_tables,
)
from plstitch_train.rng import seed_everything
from plstitch_train.run_dir import config_differences, describe_differences
from plstitch_train.signals import TrainingInterrupted
from plstitch_train.trainer import train as run_training

SCHEMA = "plstitch.reproduce/v2"
__all__ = [  # the orchestrator, and the presets / layout it re-exports from reproduce_presets
    "REPRODUCE_PRESETS",
    "ROWS",
    "SYNTHETIC_EPOCHS",
    "SYNTHETIC_TRAINING",
    "AblationRow",
    "ReproduceLayout",
    "run_name",
    "ReproduceConfig",
    "ReproducePreset",
    "aggregate",
    "best_run",
    "export_best",
    "get_reproduce_preset",
    "markdown_tables",
    "mean_std",
    "reproduce",
    "train_config",
]


# ---------------------------------------------------------------------------------------- configs and runs


def train_config(config: ReproduceConfig, row: str, seed: int, reverse_time: bool = False) -> TrainConfig:
    """The TrainConfig of one run: training preset + preset overrides + row overrides + seed/budget.

    With the preset's `shared_init` the run starts from that backbone (`--init`): the seed-0 random init, or a
    pretrained stand-in such as the shipped MIM initialisation.
    """
    preset = config.preset
    base = get_preset(preset.train_preset)
    changes: dict[str, Any] = {
        **preset.train_overrides,
        **ROWS[row].overrides,
        "dataset": preset.dataset,
        "split": preset.train_split,
        "seed": seed,
        "device": config.device,
        "reverse_time": reverse_time,
        "cache_dir": str(ReproduceLayout.of(config).frame_cache),
    }
    # a clip-length row lowers the step to fit its clip, never raises it
    if "min_step" in ROWS[row].overrides:
        preset_min = preset.train_overrides.get("min_step", base.sampling.min_step)
        changes["min_step"] = min(ROWS[row].overrides["min_step"], preset_min)
    init = shared_init_spec(config)
    if init is not None:
        changes["init"] = init
    if config.n_steps is not None:
        changes["max_steps"] = config.n_steps
    if config.dataset_options:  # a reduced dataset (tests): its folder read as Cholec80, every video
        changes.update(dataset="cholec80", root=str(_dataset_root(config)), split=None)
    return base.with_changes(**changes).validate()


def shared_init_dir(config: ReproduceConfig) -> Path:
    """The run folder of the seed-0 random-init backbone (the `shared_init` of RANDOM_SHARED_INIT)."""
    return ReproduceLayout.of(config).run(RANDOM_INIT, 0)


def shared_init_spec(config: ReproduceConfig) -> str | None:
    """The `--init` of every trained run: the seed-0 random-init folder, the preset's encoder, or None."""
    init = config.preset.shared_init
    if init == RANDOM_SHARED_INIT:
        return str(shared_init_dir(config))
    return init


def _dataset_root(config: ReproduceConfig) -> Path:
    """Generate (or reuse) the synthetic dataset with the configured options; its folder."""

    return generate_synthetic(**config.dataset_options)


def ensure_trained(run_dir: Path, train: TrainConfig) -> Path:
    """Train the run unless finished (`backbone/` exists); resume from `last.ckpt` when interrupted."""

    previous = read_train_config(run_dir)
    diff = config_differences(previous, train.to_dict()) if previous is not None else {}
    if diff:
        raise ConfigError(
            f"{run_dir} was trained with other settings ({describe_differences(diff)}, as old -> new); "
            "remove it or choose another --out."
        )
    if is_finished(run_dir):
        logger.info("skip %s: already trained", run_dir.name)
        return run_dir
    if checkpoint_path(run_dir).is_file():
        logger.info("resume %s", run_dir.name)
        run_training(
            resume=run_dir, runtime={"device": train.run.device, "cache_dir": train.frames.cache_dir}
        )
    else:
        logger.info("train %s", run_dir.name)
        run_training(train, run_dir)
    return run_dir


def ensure_random_init(run_dir: Path, train: TrainConfig) -> Path:
    """Save the untrained backbone (the same init every trained run of this seed starts from)."""

    target = backbone_dir(run_dir)
    if not is_finished(run_dir):
        seed_everything(train.run.seed)
        save_timm_dir(build_vit(train.model, 0.0), target, DataConfig.for_size(train.model.img_size))
    return run_dir


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
        return "cholec80", str(_dataset_root(config)), None
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
    records[RAW_PIXELS] = _run_record(RAW_PIXELS, 0, False, pixels, results)
    records[RAW_PIXELS]["order"] = ensure_order_measures(pixels, config, trained=False)

    oracle = out / ORACLE_TIME
    paths = result_paths(ReproduceLayout.eval_dir(oracle))
    if not all(p.is_file() for p in paths.values()):
        store = write_time_oracle_store(source_store, ReproduceLayout.features(oracle))
        evaluation = _evaluation(config)
        write_results(paths["knn"], run_knn(store, evaluation.knn))
        write_results(paths["linear"], run_linear(store, evaluation.linear))
    results = {p: json.loads(path.read_text(encoding="utf-8")) for p, path in paths.items()}
    records[ORACLE_TIME] = _run_record(ORACLE_TIME, 0, False, oracle, results)
    records[ORACLE_TIME]["order"] = ensure_order_measures(oracle, config, trained=False)

    if config.preset.shared_init not in (None, RANDOM_SHARED_INIT):  # the pretrained start, as it is
        start = out / SHARED_INIT
        results = ensure_evaluated(start, config, spec=config.preset.shared_init)
        records[SHARED_INIT] = _run_record(SHARED_INIT, 0, False, start, results)
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


def _run_record(
    row: str, seed: int, reverse: bool, run_dir: Path, results: dict[str, dict[str, Any]] | None
) -> dict[str, Any]:
    record: dict[str, Any] = {"row": row, "seed": seed, "reverse_time": reverse, "run_dir": str(run_dir)}
    if results is not None:
        record["metrics"] = {p: {m: results[p]["metrics"][m] for m in METRICS} for p in PROTOCOLS}
        record["metrics_all"] = {p: results[p]["metrics"] for p in PROTOCOLS}
    return record


def _train_job(
    config: ReproduceConfig, row: str, seed: int, reverse: bool, threads: int, level: int
) -> int | None:
    """Worker process: train, evaluate and measure one run (results land on disk); the stop signal or None.

    A stop is returned, not raised: `TrainingInterrupted` does not survive pickling back to the parent.
    """

    setup_logging(level, quiet=level > logging.INFO)  # a spawned process starts without the parent's logging
    torch.set_num_threads(threads)
    run_dir = ReproduceLayout.of(config).run(row, seed, reverse)
    try:
        ensure_trained(run_dir, train_config(config, row, seed, reverse))
    except TrainingInterrupted as stop:
        return stop.signum
    ensure_evaluated(run_dir, config)
    ensure_order_measures(run_dir, config, trained=True)
    return None


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


def refuse_other_presets_tables(layout: ReproduceLayout, preset: str) -> None:
    """Stop before any training when `--out` holds another preset's `ablation.json`, which would be replaced.

    Presets may share an output folder (their common rows are trained once); their tables may not.
    """
    path = layout.summary_json
    if not path.is_file():
        return
    try:
        owner = json.loads(path.read_text())["preset"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        owner = None
    if owner == preset:
        return
    held = (
        "cannot be read as the tables of a reproduction"
        if owner is None
        else f"holds the tables of preset {owner!r}"
    )
    shared = "" if owner is None else " (runs shared by both presets are reused)"
    raise ConfigError(
        f"{path} {held}, which --preset {preset} would replace; move {path.name} and "
        f"{layout.summary_md.name} aside{shared} or choose another --out."
    )


def reproduce(
    config: ReproduceConfig, on_run_done: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Train, evaluate and tabulate every row x seed, the references and the awareness runs.

    Writes `ablation.json`/`.md` after every run; returns the summary (runs, aggregated rows, best
    PL-Stitch run, awareness).
    """
    layout = ReproduceLayout.of(config)
    refuse_other_presets_tables(layout, config.preset.name)
    layout.root.mkdir(parents=True, exist_ok=True)
    rows = config.row_names()
    runs: dict[str, dict[str, Any]] = {}
    for seed in range(config.n_seeds):
        run_dir = layout.run(RANDOM_INIT, seed)
        ensure_random_init(run_dir, train_config(config, "mim", seed))
        results = ensure_evaluated(run_dir, config)
        runs[run_dir.name] = _run_record(RANDOM_INIT, seed, False, run_dir, results)
        runs[run_dir.name]["order"] = ensure_order_measures(run_dir, config, trained=False)
    runs.update(ensure_references(config, layout.features(layout.run(RANDOM_INIT, 0))))
    awareness_rows = [r for r in config.preset.awareness_rows if r in rows] if config.awareness else []
    jobs = [
        (row, seed, reverse)
        for seed in range(config.n_seeds)
        for reverse in (False, True)
        for row in (awareness_rows if reverse else rows)
    ]

    def finish(row: str, seed: int, reverse: bool) -> None:
        run_dir = layout.run(row, seed, reverse)
        ensure_trained(run_dir, train_config(config, row, seed, reverse))
        results = ensure_evaluated(run_dir, config)
        runs[run_dir.name] = _run_record(row, seed, reverse, run_dir, results)
        runs[run_dir.name]["order"] = ensure_order_measures(run_dir, config, trained=True)
        runs[run_dir.name]["gradients"] = ensure_gradient_scale(
            run_dir, config, train_config(config, row, seed, reverse)
        )
        runs[run_dir.name]["train_seconds"] = training_seconds(run_dir)
        if on_run_done is not None:
            on_run_done(runs[run_dir.name])
        _write_summary(layout, config, runs, {})

    if config.n_jobs == 1:
        for job in jobs:
            finish(*job)
    else:
        run_in_parallel(config, jobs, finish, _train_job)
    awareness = {row: ensure_awareness(config, row) for row in awareness_rows}
    return _write_summary(layout, config, runs, {k: v for k, v in awareness.items() if v is not None})


def best_run(runs: dict[str, dict[str, Any]], row: str = "pl") -> str | None:
    """The `row` run with the highest k-NN accuracy (ties: higher linear accuracy, then lower seed)."""
    candidates = [
        ((r["metrics"]["knn"]["accuracy"], r["metrics"]["linear"]["accuracy"], -r["seed"]), name)
        for name, r in runs.items()
        if r["row"] == row and not r["reverse_time"] and "metrics" in r
    ]
    return max(candidates)[1] if candidates else None


def _write_summary(
    layout: ReproduceLayout,
    config: ReproduceConfig,
    runs: dict[str, dict[str, Any]],
    awareness: dict[str, Any],
) -> dict[str, Any]:
    aggregated = aggregate(runs)
    seconds = [r["train_seconds"] for r in runs.values() if r.get("train_seconds") is not None]
    markdown = markdown_tables(aggregated, config.n_seeds)
    comparisons = paired_comparisons(runs, COMPARISONS)
    if comparisons:
        markdown += (
            "\n**Differences between rows** (a − b: paired by seed, or unpaired against random init)\n\n"
        )
        markdown += comparisons_markdown(comparisons) + "\n"
    contrasts = awareness_comparison(awareness)
    if contrasts["rows"]:
        markdown += "\n" + contrasts["markdown"] + "\n"
    shown = [(key, label) for _, rows in shown_tables(aggregated) for key, label in rows]
    if config.n_seeds > 1 and shown:
        markdown += "\n**Per seed** (the numbers behind the means)\n\n"
        for column in ("knn/accuracy", "linear/accuracy"):
            markdown += per_seed_markdown(runs, shown, column) + "\n\n"
    if seconds:
        markdown += (
            f"\nTraining time: {sum(seconds) / 60:.1f} min for {len(seconds)} runs (the trainer's wall clock "
            "on this machine, summed; extraction and evaluation not included).\n"
        )
    first = next(iter(awareness.values()), None)
    summary = {
        "schema": SCHEMA,
        "preset": dataclasses.asdict(config.preset),
        "seeds": config.n_seeds,
        "steps": config.n_steps,
        "rows": {slug: ROWS[slug].label for slug in config.row_names()},
        "std": "sample standard deviation over seeds (ddof=1)",
        "shared_init": shared_init_spec(config),
        "runs": runs,
        "aggregated": aggregated,
        "best_pl_run": best_run(runs),
        "best_export_run": best_run(runs, config.preset.export_row),
        "train_seconds_total": sum(seconds) if seconds else None,
        "awareness": awareness,
        "comparisons": comparisons,
        "awareness_comparison": contrasts,
        "awareness_figure": first["figure"] if first else None,
        "table_markdown": markdown,
    }
    write_json_atomic(layout.summary_json, summary)
    write_text_atomic(layout.summary_md, markdown)
    return summary


def export_best(summary: dict[str, Any], out_dir: str | Path, model_name: str) -> Path:
    """Export the preset's export row (PL-Stitch unless it says otherwise) at its best seed (highest k-NN
    accuracy) in timm format, with its card and evaluation."""

    row = summary["preset"].get("export_row", "pl")
    name = best_run(summary["runs"], row)
    if not name:
        raise ConfigError(f"No evaluated {row!r} run to export; run the reproduction first.")
    run_dir = Path(summary["runs"][name]["run_dir"])
    results = [ReproduceLayout.eval_dir(run_dir) / f"{p}.json" for p in PROTOCOLS]
    label = ROWS[row].label if row in ROWS else row
    seeds = summary["seeds"]
    options = ExportOptions(
        model_name=model_name,
        description=(
            f"Tiny ViT, {label}, trained on the synthetic procedural dataset ({name}; best k-NN accuracy of "
            f"{seeds} seed{'s' if seeds != 1 else ''} in "
            f"`plstitch reproduce --preset {summary['preset']['name']}`)."
        ),
        tags=["pl-stitch" if row != "mim-init" else "ibot", "synthetic", "tiny"],
        overwrite=True,
    )
    return export_model(run_dir, out_dir, results, options)

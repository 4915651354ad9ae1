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
This module trains and tabulates; evaluation and the reference rows are `plstitch_train.reproduce.evaluation`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.run_folder import backbone_dir, checkpoint_path, is_finished, read_train_config
from plstitch_eval.hub.timm_format import save_timm_dir
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.utils.console import logger, setup_logging
from plstitch_eval.utils.io import write_json_atomic, write_text_atomic
from plstitch_train.config import TrainConfig
from plstitch_train.model import build_vit
from plstitch_train.presets import get_preset
from plstitch_train.publishing.export import ExportOptions, export_model
from plstitch_train.reproduce.evaluation import (
    dataset_root,
    ensure_awareness,
    ensure_evaluated,
    ensure_gradient_scale,
    ensure_order_measures,
    ensure_references,
    run_record,
)
from plstitch_train.reproduce.jobs import run_in_parallel, training_seconds
from plstitch_train.reproduce.presets import RANDOM_SHARED_INIT, ROWS, ReproduceConfig, ReproduceLayout
from plstitch_train.reproduce.stats import (
    COMPARISONS,
    awareness_comparison,
    comparisons_markdown,
    paired_comparisons,
    per_seed_markdown,
)
from plstitch_train.reproduce.tables import PROTOCOLS, RANDOM_INIT, aggregate, markdown_tables, shown_tables
from plstitch_train.run.plan import config_differences, describe_differences
from plstitch_train.run.rng import seed_everything
from plstitch_train.run.signals import TrainingInterrupted
from plstitch_train.trainer import train as run_training

SCHEMA = "plstitch.reproduce/v2"
__all__ = [
    "SCHEMA",
    "best_run",
    "ensure_random_init",
    "ensure_trained",
    "export_best",
    "refuse_other_presets_tables",
    "reproduce",
    "shared_init_dir",
    "shared_init_spec",
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
        changes.update(dataset="cholec80", root=str(dataset_root(config)), split=None)
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
        runs[run_dir.name] = run_record(RANDOM_INIT, seed, False, run_dir, results)
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
        runs[run_dir.name] = run_record(row, seed, reverse, run_dir, results)
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

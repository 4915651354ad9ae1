"""CPU-scale reproduction of the paper's ablations on the synthetic procedural dataset (`plstitch reproduce`).

Rows (same budget each, several seeds): the component table - MIM only; MIM + L_vid; MIM + L_jigsaw; all
three - and the temporal-objective table - pairwise hinge, permutation classification, Plackett-Luce (all
three branches, only the L_vid objective differs; the Plackett-Luce row is the all-three run). A randomly
initialised backbone is evaluated as a reference. Each run is evaluated frozen with k-NN and the linear probe
on the synthetic test split; rows report mean +- std over seeds (sample std, ddof=1). The procedural-awareness
experiment trains the MIM-only and the full model again on time-reversed videos and draws the per-frame
cosine distances between forward and reversed encoders (violins).

Output folder::

    runs/<row>-seed<s>/          training run (backbone/, last.ckpt, log.jsonl), features/, eval/*.json
    runs/<row>-reversed-seed0/   time-reversed runs of the awareness experiment
    figures/awareness.png|json   violin figure and its numbers
    ablation.json / ablation.md  every run's metrics and the mean +- std tables

Resumable: a finished run (its `backbone/` exists) or evaluation (its JSON exists) is skipped; an interrupted
run resumes from its `last.ckpt`. A run folder made with other settings is refused, naming the folder.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import write_json_atomic, write_text_atomic
from plstitch_train.presets import TrainConfig, get_preset

SCHEMA = "plstitch.reproduce/v1"
METRICS = ("accuracy", "macro_f1_video")
PROTOCOLS = ("knn", "linear")
RANDOM_INIT = "random-init"


@dataclass(frozen=True)
class AblationRow:
    """One row: a slug (run folder prefix), its label in the tables and the training settings it changes."""

    name: str
    label: str
    overrides: dict[str, Any] = field(default_factory=dict)


ROWS: dict[str, AblationRow] = {
    row.name: row
    for row in (
        AblationRow("mim", "MIM only", {"lambda_vid": 0.0, "lambda_jigsaw": 0.0}),
        AblationRow("mim-vid", "MIM + L_vid", {"lambda_jigsaw": 0.0}),
        AblationRow("mim-jigsaw", "MIM + L_jigsaw", {"lambda_vid": 0.0}),
        AblationRow("pl", "MIM + L_vid + L_jigsaw (PL-Stitch)", {}),
        AblationRow("pairwise", "pairwise hinge (margin 1)", {"objective": "pairwise"}),
        AblationRow("permutation", "permutation classification", {"objective": "permutation"}),
    )
}
# (title, [(row slug, label in this table)]); the PL run serves both tables
TABLES = (
    (
        "Components",
        [
            (RANDOM_INIT, "no pretraining (random init)"),
            ("mim", "MIM only"),
            ("mim-vid", "MIM + L_vid"),
            ("mim-jigsaw", "MIM + L_jigsaw"),
            ("pl", "MIM + L_vid + L_jigsaw (PL-Stitch)"),
        ],
    ),
    (
        "Temporal objective (all three branches)",
        [
            ("pairwise", "pairwise hinge"),
            ("permutation", "permutation classification"),
            ("pl", "Plackett-Luce (PL-Stitch)"),
        ],
    ),
)


@dataclass(frozen=True)
class ReproducePreset:
    """What `--preset` fixes: the training preset and its overrides, data, seeds, budget and evaluation."""

    name: str
    train_preset: str = "tiny-cpu"
    train_overrides: dict[str, Any] = field(default_factory=dict)
    dataset: str = "synthetic"
    train_split: str = "train"
    seeds: int = 2
    steps: int | None = None  # None: the training preset's epochs
    eval_fps: float = 1.0
    knn_k: int = 20
    linear_epochs: int = 20
    awareness_rows: tuple[str, ...] = ("mim", "pl")
    awareness_frames_per_video: int = 64


# The synthetic procedure lasts 40-90 s where a surgery lasts 30-90 min, so its time scale is ~40x shorter.
# Clip steps are scaled with it: 4-frame clips at 2 fps with 10-40 frames (5-20 s) between frames span 15-60 s
# of a video, enough for its irreversible changes to show; with the paper's 1-20 frame steps L_vid stays at
# chance within a CPU budget (measured, docs/reproduce.md). Higher lr, short warm-ups and a fast teacher fit
# runs of a few hundred steps (an epoch is every training frame once: ~130 steps of 16).
SYNTHETIC_TRAINING = {
    "base_lr": 1.6e-2,
    "momentum_teacher": 0.99,
    "min_step": 10,
    "max_step": 40,
    "num_workers": 1,
    "warmup_epochs": 0.1,
    "jigsaw_start_epoch": 0.25,
    "jigsaw_ramp_epochs": 0.25,
}
SYNTHETIC_EPOCHS = 6
REPRODUCE_PRESETS = {
    "synthetic": ReproducePreset(
        name="synthetic",
        train_overrides={**SYNTHETIC_TRAINING, "epochs": SYNTHETIC_EPOCHS},
        seeds=3,
    ),
    "synthetic-smoke": ReproducePreset(  # the pipeline end to end in a minute (tests); numbers mean nothing
        name="synthetic-smoke",
        # short clip steps, so that the tests' few-second videos hold a clip
        train_overrides={
            **SYNTHETIC_TRAINING,
            "epochs": 1,
            "warmup_epochs": 0.03,
            "min_step": 1,
            "max_step": 5,
        },
        seeds=2,
        steps=12,
    ),
}


def get_reproduce_preset(name: str) -> ReproducePreset:
    """The named reproduction preset, or a ConfigError listing the known ones."""
    if name not in REPRODUCE_PRESETS:
        raise ConfigError(f"Unknown reproduce preset {name!r}; choose one of {', '.join(REPRODUCE_PRESETS)}.")
    return REPRODUCE_PRESETS[name]


@dataclass
class ReproduceConfig:
    """One reproduction: a preset plus what the command line may change."""

    preset: ReproducePreset
    out: Path = Path("runs/reproduce")
    seeds: int | None = None  # None: the preset's
    steps: int | None = None  # None: the preset's
    rows: Sequence[str] | None = None  # None: every row
    awareness: bool = True
    device: str = "cpu"
    num_workers: int | None = (
        None  # decoding workers of the evaluation's extraction (None: extract's default)
    )
    dataset_options: dict[str, Any] = field(default_factory=dict)  # tests shrink the synthetic dataset

    @property
    def n_seeds(self) -> int:
        return self.seeds if self.seeds is not None else self.preset.seeds

    @property
    def n_steps(self) -> int | None:
        return self.steps if self.steps is not None else self.preset.steps

    def row_names(self) -> list[str]:
        """Rows to train, validated."""
        names = list(self.rows) if self.rows else list(ROWS)
        unknown = [n for n in names if n not in ROWS]
        if unknown:
            raise ConfigError(f"Unknown ablation row(s) {unknown}; known: {', '.join(ROWS)}.")
        return names


# ---------------------------------------------------------------------------------------- configs and runs


def run_name(row: str, seed: int, reverse_time: bool = False) -> str:
    """Run folder name, e.g. `pl-seed0`, `mim-reversed-seed0`."""
    return f"{row}{'-reversed' if reverse_time else ''}-seed{seed}"


def train_config(config: ReproduceConfig, row: str, seed: int, reverse_time: bool = False) -> TrainConfig:
    """The TrainConfig of one run: training preset + preset overrides + row overrides + seed/budget."""
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
        "cache_dir": str(Path(config.out).resolve() / "frame_cache"),
    }
    if config.n_steps is not None:
        changes["max_steps"] = config.n_steps
    if config.dataset_options:  # a reduced dataset (tests): its folder read as Cholec80, every video
        changes.update(dataset="cholec80", root=str(_dataset_root(config)), split=None)
    return dataclasses.replace(base, **changes).validate()


def _dataset_root(config: ReproduceConfig) -> Path:
    """Generate (or reuse) the synthetic dataset with the configured options; its folder."""
    from plstitch_eval.data.synthetic import generate_synthetic

    return generate_synthetic(**config.dataset_options)


def _comparable(settings: dict[str, Any]) -> dict[str, Any]:
    """Training settings that change the result (runtime fields such as workers are left out)."""
    from plstitch_train.trainer import RUNTIME_FIELDS

    return {k: v for k, v in settings.items() if k not in RUNTIME_FIELDS}


def ensure_trained(run_dir: Path, train: TrainConfig) -> Path:
    """Train the run unless finished (`backbone/` exists); resume from `last.ckpt` when interrupted."""
    from plstitch_eval.hub.run_folder import checkpoint_path, is_finished, read_train_config
    from plstitch_train.trainer import train as run_training

    previous = read_train_config(run_dir)
    if previous is not None and _comparable(previous) != _comparable(train.to_dict()):
        diff = sorted(k for k in _comparable(train.to_dict()) if previous.get(k) != train.to_dict().get(k))
        raise ConfigError(
            f"{run_dir} was trained with other settings ({', '.join(diff)} differ); remove it or "
            "choose another --out."
        )
    if is_finished(run_dir):
        logger.info("skip %s: already trained", run_dir.name)
        return run_dir
    if checkpoint_path(run_dir).is_file():
        logger.info("resume %s", run_dir.name)
        run_training(resume=run_dir, runtime={"device": train.device, "cache_dir": train.cache_dir})
    else:
        logger.info("train %s", run_dir.name)
        run_training(train, run_dir)
    return run_dir


def ensure_random_init(run_dir: Path, train: TrainConfig) -> Path:
    """Save the untrained backbone (the same init every trained run of this seed starts from)."""
    from plstitch_eval.hub.run_folder import backbone_dir, is_finished
    from plstitch_eval.hub.timm_format import save_timm_dir
    from plstitch_eval.preprocess import DataConfig
    from plstitch_train.model import build_vit
    from plstitch_train.trainer import seed_everything

    target = backbone_dir(run_dir)
    if not is_finished(run_dir):
        seed_everything(train.seed)
        save_timm_dir(build_vit(train, 0.0), target, DataConfig.for_size(train.img_size))
    return run_dir


def ensure_evaluated(run_dir: Path, config: ReproduceConfig) -> dict[str, dict[str, Any]]:
    """Extract the run's frozen features on every synthetic video and score k-NN + linear (cached JSON)."""
    from plstitch_eval.evaluate import EvaluateConfig, evaluate_encoder, result_paths
    from plstitch_eval.extract import ExtractOptions
    from plstitch_eval.knn import KnnConfig
    from plstitch_eval.linear import LinearConfig

    preset = config.preset
    results_dir = run_dir / "eval"
    paths = result_paths(results_dir)
    if all(p.is_file() for p in paths.values()):
        return {p: json.loads(path.read_text(encoding="utf-8")) for p, path in paths.items()}
    evaluation = EvaluateConfig(
        dataset=preset.dataset,
        dataset_options=config.dataset_options,
        extract=ExtractOptions(
            fps=preset.eval_fps,
            num_workers=config.num_workers,
            device=config.device,
            fail_fast=True,
            progress=False,
        ),
        knn=KnnConfig(k=preset.knn_k, device=config.device),
        linear=LinearConfig(epochs=preset.linear_epochs, device=config.device),
    )
    return evaluate_encoder(run_dir, run_dir / "features", results_dir, evaluation).results


# ------------------------------------------------------------------------------------------ aggregation


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample std (ddof=1; None for one value) of a list of numbers."""
    array = np.asarray(values, dtype=np.float64)
    return float(array.mean()), (float(array.std(ddof=1)) if len(array) > 1 else None)


def aggregate(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per row, per `protocol/metric`: mean, std and the per-seed values (from each run's `row`)."""
    by_row: dict[str, list[dict[str, Any]]] = {}
    for run in runs.values():
        if not run.get("reverse_time"):
            by_row.setdefault(run["row"], []).append(run)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row, items in by_row.items():
        items = sorted(items, key=lambda r: r["seed"])
        out[row] = {}
        for protocol in PROTOCOLS:
            for metric in METRICS:
                values = [r["metrics"][protocol][metric] for r in items]
                mean, std = mean_std(values)
                out[row][f"{protocol}/{metric}"] = {"mean": mean, "std": std, "values": values}
    return out


def _cell(stats: dict[str, Any] | None) -> str:
    if stats is None:
        return "-"
    std = stats["std"]
    return f"{stats['mean']:.1f}" if std is None else f"{stats['mean']:.1f} ± {std:.1f}"


def markdown_tables(aggregated: dict[str, dict[str, dict[str, Any]]], n_seeds: int) -> str:
    """The component and objective tables in GitHub markdown (mean ± std over seeds)."""
    header = "| {} | k-NN Acc | k-NN F1 (videos) | Linear Acc | Linear F1 (videos) |"
    keys = [f"{p}/{m}" for p in PROTOCOLS for m in METRICS]
    lines = []
    for title, rows in TABLES:
        present = [(slug, label) for slug, label in rows if slug in aggregated]
        if not present:
            continue
        lines += [f"**{title}** (synthetic test split, mean ± std over {n_seeds} seeds)", ""]
        lines += [header.format("Row"), "|---|---:|---:|---:|---:|"]
        for slug, label in present:
            lines.append(f"| {label} | " + " | ".join(_cell(aggregated[slug].get(k)) for k in keys) + " |")
        lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- main


def _run_record(
    row: str, seed: int, reverse: bool, run_dir: Path, results: dict[str, dict[str, Any]] | None
) -> dict[str, Any]:
    record: dict[str, Any] = {"row": row, "seed": seed, "reverse_time": reverse, "run_dir": str(run_dir)}
    if results is not None:
        record["metrics"] = {p: {m: results[p]["metrics"][m] for m in METRICS} for p in PROTOCOLS}
        record["metrics_all"] = {p: results[p]["metrics"] for p in PROTOCOLS}
    return record


def run_awareness_figure(config: ReproduceConfig, pairs: dict[str, tuple[Path, Path]]) -> Path:
    """Violin figure of forward-vs-reversed cosine distances on the test frames (analysis module)."""
    from plstitch_eval.analysis.awareness import AwarenessConfig, ModelPair, run_awareness

    out = Path(config.out) / "figures"
    wanted = [
        {"name": ROWS[row].label, "forward": str(f), "backward": str(b)} for row, (f, b) in pairs.items()
    ]
    png, data = out / "awareness.png", out / "awareness.json"
    if (
        png.is_file()
        and data.is_file()
        and json.loads(data.read_text(encoding="utf-8")).get("pairs") == wanted
    ):
        logger.info("skip awareness figure: %s exists", png)
        return png
    awareness = AwarenessConfig(
        pairs=[ModelPair(ROWS[row].label, str(fwd), str(bwd)) for row, (fwd, bwd) in pairs.items()],
        dataset=config.preset.dataset,
        split="test",
        max_videos=0,
        max_frames_per_video=config.preset.awareness_frames_per_video,
        out=out,
        name="awareness",
        device=config.device,
    )
    if config.dataset_options:  # a reduced dataset (tests): its folder read as Cholec80, every video
        awareness.root, awareness.dataset, awareness.split = str(_dataset_root(config)), "cholec80", None
    png, _, _ = run_awareness(awareness)
    return png


def reproduce(
    config: ReproduceConfig, on_run_done: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Train, evaluate and tabulate every row x seed (+ the awareness runs); writes ablation.json/.md.

    Returns the summary written to `ablation.json` (runs, aggregated rows, best PL-Stitch run, figure).
    """
    out = Path(config.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    rows = config.row_names()
    runs: dict[str, dict[str, Any]] = {}
    jobs: list[tuple[str, int, bool]] = [(row, 0, False) for row in rows]  # seed 0 first, then awareness
    if config.awareness:
        jobs += [(row, 0, True) for row in config.preset.awareness_rows if row in rows]
    jobs += [(row, s, False) for s in range(1, config.n_seeds) for row in rows]
    for seed in range(config.n_seeds):
        run_dir = out / "runs" / run_name(RANDOM_INIT, seed)
        ensure_random_init(run_dir, train_config(config, "mim", seed))
        results = ensure_evaluated(run_dir, config)
        runs[run_dir.name] = _run_record(RANDOM_INIT, seed, False, run_dir, results)
    for row, seed, reverse in jobs:
        run_dir = out / "runs" / run_name(row, seed, reverse)
        ensure_trained(run_dir, train_config(config, row, seed, reverse))
        results = None if reverse else ensure_evaluated(run_dir, config)
        runs[run_dir.name] = _run_record(row, seed, reverse, run_dir, results)
        if on_run_done is not None:
            on_run_done(runs[run_dir.name])
        _write_summary(out, config, runs, None)
    figure = None
    if config.awareness:
        pairs = {
            row: (out / "runs" / run_name(row, 0), out / "runs" / run_name(row, 0, True))
            for row in config.preset.awareness_rows
            if row in rows
        }
        if pairs:
            figure = run_awareness_figure(config, pairs)
    return _write_summary(out, config, runs, figure)


def best_run(runs: dict[str, dict[str, Any]], row: str = "pl") -> str | None:
    """The `row` run with the highest k-NN accuracy (ties: higher linear accuracy, then lower seed)."""
    candidates = [
        ((r["metrics"]["knn"]["accuracy"], r["metrics"]["linear"]["accuracy"], -r["seed"]), name)
        for name, r in runs.items()
        if r["row"] == row and not r["reverse_time"] and "metrics" in r
    ]
    return max(candidates)[1] if candidates else None


def _write_summary(
    out: Path, config: ReproduceConfig, runs: dict[str, dict[str, Any]], figure: Path | None
) -> dict[str, Any]:
    aggregated = aggregate({k: v for k, v in runs.items() if "metrics" in v})
    markdown = markdown_tables(aggregated, config.n_seeds)
    summary = {
        "schema": SCHEMA,
        "preset": dataclasses.asdict(config.preset),
        "seeds": config.n_seeds,
        "steps": config.n_steps,
        "rows": {slug: ROWS[slug].label for slug in config.row_names()},
        "std": "sample standard deviation over seeds (ddof=1)",
        "runs": runs,
        "aggregated": aggregated,
        "best_pl_run": best_run(runs),
        "awareness_figure": str(figure) if figure else None,
        "table_markdown": markdown,
    }
    write_json_atomic(out / "ablation.json", summary)
    write_text_atomic(out / "ablation.md", markdown)
    return summary


def export_best(summary: dict[str, Any], out_dir: str | Path, model_name: str) -> Path:
    """Export the best PL-Stitch run (highest k-NN accuracy) in timm format with its card and evaluation."""
    from plstitch_train.export import ExportOptions, export_model

    name = summary.get("best_pl_run")
    if not name:
        raise ConfigError("No evaluated PL-Stitch ('pl') run to export; run the reproduction first.")
    run_dir = Path(summary["runs"][name]["run_dir"])
    results = [run_dir / "eval" / f"{p}.json" for p in PROTOCOLS]
    options = ExportOptions(
        model_name=model_name,
        description=(
            f"Tiny PL-Stitch ViT trained on the synthetic procedural dataset ({name}; best k-NN accuracy of "
            f"{summary['seeds']} seed{'s' if summary['seeds'] != 1 else ''} in "
            f"`plstitch reproduce --preset {summary['preset']['name']}`)."
        ),
        tags=["pl-stitch", "synthetic", "tiny"],
        overwrite=True,
    )
    return export_model(run_dir, out_dir, results, options)

"""What `plstitch reproduce` can be asked for: the ablation rows, the presets, one reproduction's settings and
where it writes (`ReproduceLayout`). Light to import: the CLI lists rows and presets without the trainer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.errors import ConfigError
from plstitch_train.presets import SHIPPED_MIM_INIT, SYNTHETIC_EPOCHS, SYNTHETIC_TRAINING


@dataclass(frozen=True)
class AblationRow:
    """One row: a slug (run folder prefix), its label in the tables and the training settings it changes."""

    name: str
    label: str
    overrides: dict[str, Any] = field(default_factory=dict)


# The clip-length rows lower the minimum step where the shortest synthetic video (40 s = 80 frames at 2 fps)
# cannot hold k frames 10 apart; the paper keeps one step range for every k (its videos are 30-90 min long).
CLIP_LENGTH_MIN_STEP = {4: 10, 8: 10, 12: 7, 16: 5}
# The permutation baseline at k = 8 classifies among a fixed sampled set of orders: 8! = 40320 classes are too
# many for a 64-dim model (Noroozi & Favaro's jigsaw likewise uses 1000 of the 9! tile orders).
PERMUTATION_CLASSES_K8 = 1000
# Stand-in for the ImageNet iBOT weights every row of the paper starts from: MIM alone with DINOv2's
# Sinkhorn-Knopp targets and teacher temperatures of 0.02, 24 epochs from the seed-0 random init. At 0.04 the
# tiny head's outputs differ by less than the temperature, the teacher stays uniform and MIM collapses
# (docs/reproduce.md, "What the collapse looks like"); at 0.02 it does not.
MIM_INIT_TEACHER_TEMP = 0.02
MIM_INIT_OVERRIDES = {
    "lambda_vid": 0.0,
    "lambda_jigsaw": 0.0,
    "centering": "sinkhorn_knopp",
    "epochs": 24,
    "teacher_temp": MIM_INIT_TEACHER_TEMP,
    "warmup_teacher_temp": MIM_INIT_TEACHER_TEMP,
    "teacher_patch_temp": MIM_INIT_TEACHER_TEMP,
    "warmup_teacher_patch_temp": MIM_INIT_TEACHER_TEMP,
}

ROWS: dict[str, AblationRow] = {
    row.name: row
    for row in (
        AblationRow("mim", "MIM only", {"lambda_vid": 0.0, "lambda_jigsaw": 0.0}),
        AblationRow("mim-vid", "MIM + L_vid", {"lambda_jigsaw": 0.0}),
        AblationRow("mim-jigsaw", "MIM + L_jigsaw", {"lambda_vid": 0.0}),
        AblationRow("pl", "MIM + L_vid + L_jigsaw (PL-Stitch)", {}),
        AblationRow("pairwise", "pairwise hinge (margin 1)", {"objective": "pairwise"}),
        AblationRow("permutation", "permutation classification", {"objective": "permutation"}),
        # the paper's objective ablation (its Table 4): MIM + L_vid, jigsaw off, clips of k = 8
        AblationRow("mim-pl-k8", "MIM + L_vid, Plackett-Luce (k=8)", {"lambda_jigsaw": 0.0, "clip_len": 8}),
        AblationRow(
            "mim-pairwise-k8",
            "MIM + L_vid, pairwise hinge (k=8)",
            {"lambda_jigsaw": 0.0, "clip_len": 8, "objective": "pairwise"},
        ),
        AblationRow(
            "mim-permutation-k8",
            f"MIM + L_vid, permutation classification (k=8, {PERMUTATION_CLASSES_K8} orders)",
            {
                "lambda_jigsaw": 0.0,
                "clip_len": 8,
                "objective": "permutation",
                "permutation_classes": PERMUTATION_CLASSES_K8,
            },
        ),
        # the paper's clip-length ablation (its Table 5) on the full model; k = 4 is the `pl` row
        *(
            AblationRow(
                f"pl-k{k}",
                f"PL-Stitch, k={k}",
                {"clip_len": k, "min_step": CLIP_LENGTH_MIN_STEP[k]},
            )
            for k in (8, 12, 16)
        ),
        AblationRow("mim-init", "MIM pretraining (the shared initialisation)", MIM_INIT_OVERRIDES),
    )
}
COMPONENT_ROWS = ("mim", "mim-vid", "mim-jigsaw", "pl")
OBJECTIVE_ROWS = ("mim-pl-k8", "mim-pairwise-k8", "mim-permutation-k8")
CLIP_LENGTH_ROWS = ("pl", "pl-k8", "pl-k12", "pl-k16")
RANDOM_SHARED_INIT = "random"  # `shared_init` value: the seed-0 random-init backbone of the output folder


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
    rows: tuple[str, ...] = COMPONENT_ROWS  # the rows trained (`--row` picks among them)
    awareness_rows: tuple[str, ...] = ()  # trained again on time-reversed videos, every seed
    # what every trained run starts from: RANDOM_SHARED_INIT (the seed-0 random-init backbone), an encoder
    # spec (a registry name or folder: a pretrained stand-in, as the paper starts from ImageNet iBOT), or None
    # (each run from its own fresh weights)
    shared_init: str | None = RANDOM_SHARED_INIT
    heldout_batches: int = 8  # batches of the test split scored by the held-out jigsaw loss
    gradient_batches: int = 8  # training batches of the gradient-scale measure at each run's start
    order_clip_len: int = 8  # frames per clip of the Kendall tau measure
    jobs: int = 1  # runs trained at once (`--jobs` overrides)
    export_row: str = "pl"  # the row whose best seed `--export-best` exports
    minutes: str = ""  # wall time of the whole preset as measured (docs/reproduce.md), for the help text


_SYNTHETIC = {**SYNTHETIC_TRAINING, "epochs": SYNTHETIC_EPOCHS}

REPRODUCE_PRESETS = {
    "synthetic": ReproducePreset(  # the component table from the shipped MIM initialisation
        name="synthetic",
        train_overrides=_SYNTHETIC,
        rows=COMPONENT_ROWS,
        seeds=5,
        shared_init=SHIPPED_MIM_INIT,
        jobs=2,  # two one-thread runs side by side: 1.65x the throughput of one on 2 cores
        minutes="about 67 min on 2 cores (measured; 120.6 min of trainer time, two runs at a time)",
    ),
    "synthetic-objectives": ReproducePreset(  # the objective ablation and the awareness experiment, k = 8
        name="synthetic-objectives",
        train_overrides=_SYNTHETIC,
        rows=("mim", *OBJECTIVE_ROWS, "pl-k8"),
        awareness_rows=("mim", "pl-k8"),
        seeds=5,
        shared_init=SHIPPED_MIM_INIT,
        jobs=2,
        export_row="pl-k8",
        minutes="about 2 h 20 min on 2 cores (measured: 2 h 10 min for its 30 runs not in synthetic)",
    ),
    "synthetic-clip-length": ReproducePreset(  # the clip-length ablation of the full model
        name="synthetic-clip-length",
        train_overrides=_SYNTHETIC,
        rows=CLIP_LENGTH_ROWS,
        seeds=5,
        shared_init=SHIPPED_MIM_INIT,
        jobs=2,
        minutes="about 1 h 50 min on 2 cores (from its measured per-run trainer times, two at a time)",
    ),
    "synthetic-mim-init": ReproducePreset(  # regenerates the shipped MIM initialisation (one run)
        name="synthetic-mim-init",
        train_overrides=SYNTHETIC_TRAINING,
        rows=("mim-init",),
        seeds=1,
        shared_init=RANDOM_SHARED_INIT,
        export_row="mim-init",
        minutes="about 13 min on 2 cores (measured: 10.7 min of training beside another run)",
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
        rows=(*COMPONENT_ROWS, "pairwise", "permutation"),
        awareness_rows=("pl",),
        seeds=2,
        steps=12,
        minutes="2.5-3 min on 2 cores (measured: 149 s on a shared machine, 3 min in another run)",
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
    jobs: int | None = None  # runs trained at once (own process, cpu_count // jobs threads); None: preset's

    def __post_init__(self) -> None:
        if self.jobs is not None and self.jobs < 1:
            raise ConfigError(f"jobs must be >= 1 (runs trained at once), got {self.jobs}.")

    @property
    def n_jobs(self) -> int:
        return self.jobs if self.jobs is not None else self.preset.jobs

    @property
    def n_seeds(self) -> int:
        return self.seeds if self.seeds is not None else self.preset.seeds

    @property
    def n_steps(self) -> int | None:
        return self.steps if self.steps is not None else self.preset.steps

    def row_names(self) -> list[str]:
        """Rows to train (`rows`, else the preset's), validated against every known row."""
        names = list(self.rows) if self.rows else list(self.preset.rows)
        unknown = [n for n in names if n not in ROWS]
        if unknown:
            raise ConfigError(f"Unknown ablation row(s) {unknown}; known: {', '.join(ROWS)}.")
        return names


def run_name(row: str, seed: int, reverse_time: bool = False) -> str:
    """Run folder name, e.g. `pl-seed0`, `mim-reversed-seed0`."""
    return f"{row}{'-reversed' if reverse_time else ''}-seed{seed}"


@dataclass(frozen=True)
class ReproduceLayout:
    """Where a reproduction writes under its `--out` folder: the one place its paths are built.

    Paths are absolute (the folder resolved once), so settings that record them compare alike on every rerun.
    """

    root: Path

    @classmethod
    def of(cls, config: ReproduceConfig) -> ReproduceLayout:
        """The layout of `config.out`, resolved."""
        return cls(Path(config.out).expanduser().resolve())

    @property
    def runs(self) -> Path:
        """`runs/`: one folder per training run (and per seed's random init)."""
        return self.root / "runs"

    def run(self, row: str, seed: int, reverse_time: bool = False) -> Path:
        """`runs/<row>[-reversed]-seed<s>/`."""
        return self.runs / run_name(row, seed, reverse_time)

    @property
    def frame_cache(self) -> Path:
        """Decoded training frames, shared by every run."""
        return self.root / "frame_cache"

    @property
    def references(self) -> Path:
        """`references/<name>/`: raw pixels and the t/T oracle."""
        return self.root / "references"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def summary_json(self) -> Path:
        return self.root / "ablation.json"

    @property
    def summary_md(self) -> Path:
        return self.root / "ablation.md"

    @staticmethod
    def features(run_dir: Path) -> Path:
        """A run's (or reference's) frozen feature store."""
        return run_dir / "features"

    @staticmethod
    def eval_dir(run_dir: Path) -> Path:
        """A run's results JSON (`knn.json`, `linear.json`, `order.json`)."""
        return run_dir / "eval"

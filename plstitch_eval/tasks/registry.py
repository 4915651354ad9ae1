"""The task registry: one `Task` per thing a probe predicts - its targets, head kind, metrics and selection.

A task says *what* is predicted from which labels and how it is scored; a protocol (k-NN, linear, temporal)
says *how* a head is fitted. `phases` and `tools` are the classification tasks the protocols ran before this
registry; `tools` and `triplets` are multi-label tasks, whose `MultiLabel` names the store's labels and scores
each test video's scores; `anticipation` and `rsd` are regression tasks, whose `Regression` builds targets
from a store's labels and frame times, scores predictions and gives the reference predictions every table
carries; `skill` is a video-regression task (one score per video, `tasks/skill.py`, run by
`protocols/skill.py`). A new task is one module that calls `register_task(Task(...))`, shipped or from a
plugin's `plstitch.tasks` entry point (docs/tasks.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from plstitch_eval.errors import ConfigError
from plstitch_eval.registry import Registry, import_modules

if TYPE_CHECKING:
    from plstitch_eval.store.features import FeatureStore, VideoFeatures

MULTI_CLASS, MULTI_LABEL, REGRESSION = "multi-class", "multi-label", "regression"
VIDEO_REGRESSION = "video-regression"  # one value per video (skill), from its mean-pooled features
HEADS = (MULTI_CLASS, MULTI_LABEL, REGRESSION, VIDEO_REGRESSION)
# modules of `plstitch_eval.tasks`, in order
SHIPPED = ("phases", "tools", "anticipation", "rsd", "triplets", "cvs", "skill")
DEFAULT_HORIZON_MIN = 3.0


@dataclass(frozen=True)
class TaskSettings:
    """What a task's targets depend on besides the store: passed whole from the CLI to the task.

    `horizon_min`: anticipation's horizon (minutes, > 0). `anticipate`: which labels anticipation predicts
    ("auto": phases, and tools where the store has tool labels; or "phases", "tools", "phases,tools").
    `elapsed`: the elapsed minutes are one more input column (RSDNet's input; linear and temporal heads).
    """

    horizon_min: float = DEFAULT_HORIZON_MIN
    anticipate: str = "auto"
    elapsed: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.horizon_min, int | float) and math.isfinite(self.horizon_min)):
            raise ConfigError(f"--horizon must be a number of minutes, got {self.horizon_min!r}.")
        if self.horizon_min <= 0:
            raise ConfigError(
                f"--horizon must be above 0 minutes (the anticipation window), got {self.horizon_min:g}; "
                "e.g. --horizon 3 (the synthetic set's minute-long videos: --horizon 0.25)."
            )
        groups = [g for g in self.anticipate.split(",") if g]
        if self.anticipate != "auto" and (not groups or set(groups) - {"phases", "tools"}):
            raise ConfigError(
                f"--anticipate must be auto, phases, tools or phases,tools, got {self.anticipate!r}."
            )

    def record(self) -> dict[str, Any]:
        """The settings as a results `protocol` records them."""
        return {
            "horizon_min": float(self.horizon_min),
            "anticipate": self.anticipate,
            "elapsed": self.elapsed,
        }


@dataclass(frozen=True)
class StoreInfo:
    """What a task reads off a feature store besides its videos: names, dataset and where it lives."""

    root: str
    dataset: str | None
    class_names: tuple[str, ...]
    tool_names: tuple[str, ...]
    triplet_names: tuple[str, ...] = ()

    @classmethod
    def of(cls, store: FeatureStore) -> StoreInfo:
        manifest = store.manifest
        return cls(
            str(store.root),
            manifest.get("dataset"),
            tuple(manifest.get("class_names") or ()),
            tuple(manifest.get("tool_names") or ()),
            tuple(manifest.get("triplet_names") or ()),
        )

    def labels_held(self) -> str:
        """The labels this store has, in words, for a one-line refusal."""
        held = [f"phases ({len(self.class_names)} classes)"] if self.class_names else []
        if self.tool_names:
            held.append(f"tools ({len(self.tool_names)})")
        if self.triplet_names:
            held.append(f"triplets ({len(self.triplet_names)})")
        return " and ".join(held) or "no labels"


@dataclass(frozen=True)
class Scored:
    """A regression task's scores of predictions: the flat metrics (None: undefined), each video's, the
    per-class block (may be empty) and the figure a head is chosen on (lower is better)."""

    metrics: dict[str, float | None]
    per_video: dict[str, dict[str, float | None]]
    per_class: dict[str, Any]
    select: float


Targets = Callable[["VideoFeatures", StoreInfo, TaskSettings], np.ndarray]
Score = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray], StoreInfo, TaskSettings], Scored]
References = Callable[
    [Sequence["VideoFeatures"], Sequence["VideoFeatures"], StoreInfo, TaskSettings],
    dict[str, tuple[str, dict[str, np.ndarray]]],
]


@dataclass(frozen=True)
class Regression:
    """How a regression task builds, bounds, scores and references its per-frame targets (minutes).

    `outputs(info, settings)`: the names of its outputs (one column each); `targets(video, info, settings)`:
    frames x outputs; `bounds(info, settings)`: (low, high or None) that predictions are clipped to and whose
    span scales the targets while a head trains; `score`: `Scored` from predictions and targets by video;
    `references(train, test, info, settings)`: {name: (description, predictions by test video)};
    `check(info, settings)`: refuse a store lacking the labels (one line), before any work.
    """

    outputs: Callable[[StoreInfo, TaskSettings], list[str]]
    targets: Targets
    bounds: Callable[[StoreInfo, TaskSettings], tuple[float, float | None]]
    score: Score
    references: References
    check: Callable[[StoreInfo, TaskSettings], None] = lambda _info, _settings: None
    column: Callable[[str], str] = lambda name: f"{name}_min"  # predict's CSV/JSONL column of an output


MultiLabelScore = Callable[[Sequence[np.ndarray], Sequence[np.ndarray], Sequence[str]], dict[str, Any]]


@dataclass(frozen=True)
class MultiLabel:
    """What a multi-label task reads off a store and how it scores: one 0/1 column per name.

    `names_key`: the manifest key naming the columns (`tool_names`); `labels(video)`: its [T, K] int8 rows
    (-1 on a frame not annotated; None: the video has none); `score(scores, targets, names)`: the metrics of
    the test (or validation) frames, one [F, K] array each per video (annotated frames only), the task's
    `select_metric` among them (higher is better); `per_video`: the metrics each test video gets alone;
    `missing`: what a store lacking the labels needs (the fix of a one-line refusal); `decimals` of the
    stored per-frame probabilities; `score_stored`: metrics from those rounded probabilities, so that the
    results' `predictions` give them again exactly (otherwise from the unrounded ones). `soft`: the rows are
    fractions in [0, 1] (a raters' mean, NaN on a frame not rated), fitted as soft targets and scored as
    they are (CVS); otherwise 0/1 with -1 on a frame not annotated.
    """

    names_key: str
    labels: Callable[[VideoFeatures], np.ndarray | None]
    score: MultiLabelScore
    per_video: tuple[str, ...]
    missing: str
    decimals: int = 4
    score_stored: bool = False
    soft: bool = False


@dataclass(frozen=True)
class Task:
    """A prediction task: its name, one-line summary, head kind, the labels it reads, its metrics (the
    headline first), the metric a head is chosen on, and the protocols that fit it. Regression tasks carry a
    `Regression`, multi-label tasks a `MultiLabel`; classification tasks are run by their protocols as before
    (`results_task` maps a protocol to the results task it writes)."""

    name: str
    summary: str
    head: str
    labels: str
    metrics: tuple[str, ...]
    select_metric: str
    protocols: tuple[str, ...]
    regression: Regression | None = None
    multilabel: MultiLabel | None = None
    results_tasks: Mapping[str, str] = field(default_factory=dict)  # protocol -> results task written
    uses_horizon: bool = False
    # the store manifest's keys that must be non-empty for the task to have labels there (`class_names`,
    # `skill`); () with a `MultiLabel`: its `names_key`. What `benchmark` reads to mark a cell n/a.
    needs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.head not in HEADS:
            raise ConfigError(
                f"Task {self.name!r}: head must be one of {', '.join(HEADS)}, got {self.head!r}."
            )
        if (self.head == REGRESSION) != (self.regression is not None):
            raise ConfigError(f"Task {self.name!r}: a regression head needs a Regression, and only it.")
        if self.multilabel is not None and self.head != MULTI_LABEL:
            raise ConfigError(f"Task {self.name!r}: a MultiLabel goes with a multi-label head only.")

    @property
    def label_keys(self) -> tuple[str, ...]:
        """The manifest keys naming the task's labels: `needs`, else a multi-label task's `names_key`."""
        if self.needs or self.multilabel is None:
            return self.needs
        return (self.multilabel.names_key,)

    def lacking(self, manifest: Mapping[str, Any]) -> tuple[str, ...]:
        """The `label_keys` that `manifest` (a store's, or what a dataset would write) leaves empty."""
        return tuple(key for key in self.label_keys if not manifest.get(key))

    def has_labels(self, manifest: Mapping[str, Any]) -> bool:
        """Whether a store with `manifest` carries this task's labels (a task reading none: always)."""
        return not self.lacking(manifest)

    def results_task(self, protocol: str) -> str:
        """The results `task` a protocol writes for this task (`linear-anticipation`, `linear-tools`)."""
        return self.results_tasks.get(
            protocol, protocol if self.name == "phases" else f"{protocol}-{self.name}"
        )


def _adopt(task: object) -> object:
    if not isinstance(task, Task):
        raise ConfigError(f"it names a {type(task).__name__}, not a Task or a module")
    return register_task(task)


TASKS: Registry[Task] = Registry(
    "task", "plstitch.tasks", import_modules("plstitch_eval.tasks", SHIPPED), _adopt
)


def register_task(task: Task) -> Task:
    """Register `task` under its name (a second task of that name is refused, naming both packages)."""
    place = SHIPPED.index(task.name) if task.name in SHIPPED else math.inf
    return TASKS.register(task.name, task, place=place)


def get_task(name: str, option: str = "task") -> Task:
    """The task registered as `name`; else one line with close matches and the known tasks."""
    return TASKS.lookup(name, option)


def registered_tasks() -> list[Task]:
    """Every registered task: the shipped ones in listing order, then the plugins'."""
    return [TASKS[name] for name in TASKS.names()]


def task_for(name: str, protocol: str) -> Task:
    """`name`'s task, refused in one line when `protocol` cannot fit its head."""
    task = get_task(name)
    if protocol not in task.protocols:
        fits = [t.name for t in registered_tasks() if protocol in t.protocols]
        raise ConfigError(
            f"--task {name} is not fitted by {protocol} (its head is {task.head}; {name} runs with "
            f"{', '.join(task.protocols) or 'no shipped protocol'}); {protocol} takes --task "
            f"{', '.join(fits)}."
        )
    return task

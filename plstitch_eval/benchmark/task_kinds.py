"""What a benchmark does with each head kind of task (`--tasks`): the protocols its cells run, whether they
are seeded, the settings a rerun must match, which way its metrics are better and what its table pairs on.

Regression tasks (anticipation, rsd) run k-NN, linear, MS-TCN or cv heads in minutes; multi-label tasks
(tools, triplets, cvs) the linear multi-label probe (`protocols/multilabel.py`) or the multi-label MS-TCN
(`protocols/temporal_multilabel.py`); skill a ridge on each
video's mean-pooled features (`protocols/skill.py`: linear on the store's split, cv over `--skill-folds`:
K folds by video, or JIGSAWS' leave-one-user-out / leave-one-supertrial-out).
One table of head kind -> behaviour, as CLIP_benchmark's task -> function, so the rest asks this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plstitch_eval.errors import ConfigError
from plstitch_eval.protocols.registry import CV_TASK, cv_task
from plstitch_eval.protocols.regression import HEADS as REGRESSION_HEADS
from plstitch_eval.tasks.registry import MULTI_LABEL, REGRESSION, VIDEO_REGRESSION, Task

__all__ = [
    "SKILL_FOLDS_BY_TRIAL",
    "SKILL_SCORE",
    "UNSEEDED",
    "cell_protocols",
    "headline_metric",
    "lower_is_better",
    "paired_metrics",
    "parse_skill_folds",
    "results_task",
    "runs_in_benchmark",
    "seeded",
    "skill_settings",
    "table_protocol",
]

UNSEEDED = ("knn",)  # regression cells of these protocols are deterministic: one cell, no seed
MULTILABEL_PROTOCOLS = ("linear", "temporal")  # the multi-label probe and MS-TCN (cv cross-validates one)
SKILL_TASK, SKILL_SCORE = "skill", "grs"  # the video-regression task benchmark runs, the score regressed
SKILL_PROTOCOLS = ("linear", CV_TASK)
SKILL_INNER = "linear"  # skill's cv cross-validates the ridge (results task cv-linear-skill)
SKILL_PAIRED = "abs_error"  # each held-out video's |predicted - score| (`protocols/skill.py` per_video)
SKILL_FOLDS_BY_TRIAL = ("louo", "loso")  # JIGSAWS' folds from the trial names (`protocols/skill.py`): no seed


def runs_in_benchmark(task: Task) -> bool:
    """Whether benchmark has cells for `task`: a regression task, a multi-label task with its `MultiLabel`,
    or skill (the one video-regression task whose head `protocols/skill.py` fits)."""
    if task.head == MULTI_LABEL:
        return task.multilabel is not None and any(p in MULTILABEL_PROTOCOLS for p in task.protocols)
    return task.head == REGRESSION or (task.head == VIDEO_REGRESSION and task.name == SKILL_TASK)


def cell_protocols(task: Task, cv_protocol: str) -> tuple[str, ...]:
    """Every protocol a cell of `task` may run (regression: cv when `--cv-protocol` fits it too)."""
    if task.head == MULTI_LABEL:
        fits = tuple(p for p in task.protocols if p in MULTILABEL_PROTOCOLS)
        return (*fits, CV_TASK) if multilabel_inner(cv_protocol) in fits else fits
    if task.head == VIDEO_REGRESSION:
        return SKILL_PROTOCOLS if task.name == SKILL_TASK else ()
    fits = tuple(p for p in task.protocols if p in REGRESSION_HEADS)
    return (*fits, CV_TASK) if cv_protocol in fits else fits


def seeded(task: Task, protocol: str, skill_folds: str = "") -> bool:
    """Whether a cell's numbers depend on its seed: not k-NN's, nor skill's ridge on the store's split, nor
    skill's cv over LOUO / LOSO folds (`skill_folds`)."""
    if task.head == VIDEO_REGRESSION:  # the K folds by video are drawn with the seed
        return protocol == CV_TASK and skill_folds not in SKILL_FOLDS_BY_TRIAL
    return protocol not in UNSEEDED


def parse_skill_folds(value: str | int | None, cv_folds: int) -> str:
    """`--skill-folds` as a skill cv cell runs it: louo, loso, or a number of folds by video >= 2 (None:
    `--folds`'s); anything else one line."""
    text = str(cv_folds if value is None else value).strip().lower()
    if text in SKILL_FOLDS_BY_TRIAL or (text.isdigit() and int(text) >= 2):
        return text if text in SKILL_FOLDS_BY_TRIAL else str(int(text))
    raise ConfigError(
        f"--skill-folds must be louo (leave one user out), loso (leave one supertrial out) or a number of "
        f"folds by video >= 2, got {value!r}."
    )


def skill_settings(protocol: str, folds: str, seed: int | None) -> dict[str, Any]:
    """What a skill cell's numbers depend on besides the store: the score, the ridge's alphas, cv's folds."""
    from plstitch_eval.protocols.skill import ALPHAS  # scikit-learn: only when skill is asked

    settings: dict[str, Any] = {"score": SKILL_SCORE, "head": "ridge", "alphas": list(ALPHAS)}
    if protocol == CV_TASK:
        settings.update(folds=folds, seed=seed)
    return settings


def multilabel_inner(cv_protocol: str) -> str:
    """The head a multi-label task's cv cells cross-validate: `--cv-protocol` when it is linear or temporal,
    else (k-NN, the default) the linear probe: there is no k-NN multi-label head."""
    return cv_protocol if cv_protocol in MULTILABEL_PROTOCOLS else "linear"


def cv_inner(task: Task, cv_protocol: str) -> str:
    """The protocol a cv cell of `task` cross-validates: skill's ridge, a multi-label task's
    `multilabel_inner`, else `--cv-protocol`."""
    if task.head == VIDEO_REGRESSION:
        return SKILL_INNER
    return multilabel_inner(cv_protocol) if task.head == MULTI_LABEL else cv_protocol


def results_task(task: Task, protocol: str, cv_protocol: str) -> str:
    """The results `task` of a section's cells (`linear-rsd`, `cv-knn-rsd`, `linear-triplets`,
    `cv-linear-triplets`, `cv-linear-skill`)."""
    if protocol != CV_TASK:
        return task.results_task(protocol)
    return f"{CV_TASK}-{task.results_task(cv_inner(task, cv_protocol))}"


def table_protocol(task: Task, protocol: str, cv_protocol: str) -> str:
    """The protocol's name in the labels of the table (`cv` becomes `cv-knn`; skill's and a multi-label
    task's with the default --cv-protocol: `cv-linear`)."""
    if protocol != CV_TASK:
        return protocol
    return cv_task(cv_inner(task, cv_protocol))


def lower_is_better(task: Task, metric: str) -> bool:
    """Which way `metric` of `task` is better: errors (minutes, MAE, |error|, Brier) down, the rest up."""
    if task.head == REGRESSION:
        return True
    if task.head == MULTI_LABEL:
        return "brier" in metric.lower()
    return not metric.startswith("spearman")


def headline_metric(task: Task, metrics: Sequence[str]) -> str:
    """The metric a task's figure panel shows: the first (regression), the select metric (multi-label:
    mAP_IVT, mAP), Spearman's rho (skill)."""
    wanted = {MULTI_LABEL: task.select_metric, VIDEO_REGRESSION: "spearman_rho"}.get(task.head)
    return wanted if wanted in metrics else metrics[0]


def paired_metrics(task: Task, metrics: Sequence[str]) -> list[str]:
    """The per-video metrics the differences pair on: regression, the select metric per group
    (anticipation: phase_wMAE, tool_wMAE; rsd: MAE); multi-label, the select metric each test video gets
    alone; skill, each held-out video's absolute error."""
    if task.head == VIDEO_REGRESSION:
        return [SKILL_PAIRED]
    if task.head == MULTI_LABEL:
        return [task.select_metric]
    select = (task.select_metric.split() or [""])[0]
    paired = [m for m in metrics if m == select or m.endswith(f"_{select}")]
    return paired or list(metrics[:1])

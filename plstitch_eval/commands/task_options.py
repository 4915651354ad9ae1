"""What `--task` and its options become: a regression task's `TaskSettings`, or None (a classification task);
and `cv --task tools|triplets|cvs`, the multi-label cross-validation (`protocols/multilabel_cv.py`).

Shared by the commands that take `--task` (knn, linear, temporal, cv); the task registry and the protocols are
imported inside, for `plstitch --help`'s start-up (see commands/evaluate.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from plstitch_eval.errors import ConfigError
from plstitch_eval.tasks.registry import TaskSettings

OFFICIAL_FOLDS = "official"  # `cv --folds official` (multi-label tasks): the store's crossval-* schemes


def task_settings(
    task: str, protocol: str, horizon: float | None, anticipate: str | None, elapsed: bool
) -> TaskSettings | None:
    """A regression task's `TaskSettings` from the options (None: a classification task, run as before);
    the task checked against the protocol and the options against the task, one line each."""
    from plstitch_eval.tasks import REGRESSION, task_for

    chosen = task_for(task, protocol)
    given = {"--horizon": horizon is not None, "--anticipate": anticipate is not None, "--elapsed": elapsed}
    if chosen.head != REGRESSION:
        named = [option for option, used in given.items() if used]
        if named:
            raise ConfigError(
                f"{', '.join(named)}: only with a regression task (--task anticipation or rsd)."
            )
        return None
    if not chosen.uses_horizon and (horizon is not None or anticipate is not None):
        raise ConfigError(
            f"--horizon and --anticipate set anticipation's targets; --task {task} takes neither."
        )
    settings = TaskSettings(anticipate=anticipate or "auto", elapsed=elapsed)
    return settings if horizon is None else TaskSettings(horizon, settings.anticipate, elapsed)


def refuse_for_regression(task: str, used: dict[str, bool]) -> None:
    """One line naming the options a regression task does not take."""
    named = [f"--{option}" for option, on in used.items() if on]
    if named:
        raise ConfigError(
            f"{', '.join(named)}: not with --task {task} (a regression task: its heads are chosen on "
            f"validation error and scored in minutes); drop {'them' if len(named) > 1 else 'it'}."
        )


def cv_protocol(task: str, protocol: str) -> str:
    """The protocol `task_settings` checks `cv --task` against: `cv` for phases (any inner protocol), else
    --protocol; one line for a multi-label task with --protocol knn (no k-NN multi-label head)."""
    from plstitch_eval.tasks import MULTI_LABEL, get_task

    if task == "phases":
        return "cv"
    if protocol == "knn" and get_task(task).head == MULTI_LABEL:
        raise ConfigError(
            f"cv --task {task} --protocol knn: there is no k-NN multi-label head; cross-validate the {task} "
            "probe with --protocol linear or temporal."
        )
    return protocol


def multilabel_cv(
    features: Path, task: str, protocol: str, configs: dict[str, Any], tables: dict[str, Any],
    folds: int | str, seed: int, fraction: Any, relaxed: bool, json_path: Path | None,
) -> None:  # fmt: skip
    """`cv --task tools|triplets|cvs`: the linear probe (class-balanced unless `--set balance_classes=false`)
    or the multi-label MS-TCN cross-validated by video (`folds` a number or `official`); prints the mean ±
    std over folds and writes the results JSON."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols.fractions import fraction_title
    from plstitch_eval.protocols.multilabel_cv import run_multilabel_cv
    from plstitch_eval.protocols.settings import cv_config, section_table
    from plstitch_eval.utils.console import is_quiet

    if relaxed:
        raise ConfigError(
            f"--relaxed: only with --task phases (the relaxed phase metrics); drop it for --task {task}."
        )
    cv_config(protocol, tables, seed)  # refuses --set tables of another protocol
    config = configs[protocol]
    if protocol == "linear" and "balance_classes" not in section_table(tables, "linear"):
        config = dataclasses.replace(config, balance_classes=True)  # as `plstitch linear --task` fits it
    results = run_multilabel_cv(
        task, features, protocol, config, folds, seed, progress=not is_quiet(), train_fraction=fraction
    )
    count = len(results["folds"])
    which = "official crossval-* folds, " if folds == OFFICIAL_FOLDS else ""
    title = f"{count}-fold CV by video ({which}{protocol}, {task}{fraction_title(fraction, results)})"
    print_and_write_results(results, json_path, title)


def video_task(task: str, skill_score: str | None = None) -> bool:
    """Whether `task` scores one value per video (`skill`: its own head, `protocols/skill.py`); one line for
    --skill-score with any other task."""
    from plstitch_eval.tasks import get_task
    from plstitch_eval.tasks.registry import VIDEO_REGRESSION

    per_video = get_task(task).head == VIDEO_REGRESSION
    if skill_score is not None and not per_video:
        raise ConfigError(
            f"--skill-score: only with --task skill (it names the score regressed), not {task}."
        )
    return per_video


def refuse_for_video_task(task: str, used: dict[str, bool]) -> None:
    """One line naming the options a per-video task (skill: ridge on mean-pooled features) does not take."""
    named = [f"--{option}" for option, on in used.items() if on]
    if named:
        raise ConfigError(
            f"{', '.join(named)}: not with --task {task} (one score per video, a ridge on its mean-pooled "
            f"features, alpha chosen by leave-one-out on the training videos); drop "
            f"{'them' if len(named) > 1 else 'it'}."
        )


def fold_count(folds: str, task: str) -> int | str:
    """`cv --folds` as a number of folds; `official` (the store's crossval-* schemes) only with a
    multi-label task; loso / louo only with --task skill (JIGSAWS' folds)."""
    from plstitch_eval.tasks import MULTI_LABEL, get_task

    if folds == OFFICIAL_FOLDS and get_task(task).head == MULTI_LABEL:
        return folds
    try:
        return int(folds)
    except ValueError:
        raise ConfigError(
            f"--folds must be a number of folds by video, got {folds!r} (official: with --task tools, "
            f"triplets or cvs; loso and louo: with --task skill on a JIGSAWS store; not --task {task})."
        ) from None


def refuse_temporal(task: str, used: dict[str, bool], why: str) -> None:
    """One line naming the options `--task task` does not take with `temporal`, and why."""
    named = [f"--{option}" for option, on in used.items() if on]
    if named:
        raise ConfigError(
            f"{', '.join(named)}: not with temporal --task {task} ({why}); drop "
            f"{'them' if len(named) > 1 else 'it'}."
        )

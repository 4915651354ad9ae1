"""What `--task` and its options become: a regression task's `TaskSettings`, or None (a classification task).

Shared by the commands that take `--task` (knn, linear, temporal); the task registry is imported inside, for
`plstitch --help`'s start-up (see commands/evaluate.py).
"""

from __future__ import annotations

from plstitch_eval.errors import ConfigError
from plstitch_eval.tasks.registry import TaskSettings


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


def refuse_classification_cv(task: str) -> None:
    """One line for `cv --task` of a classification task other than phases (tools, triplets): cv
    cross-validates the phase heads and the regression heads, not the multi-label probe."""
    if task != "phases":
        raise ConfigError(
            f"cv --task {task}: cv cross-validates phases and the regression tasks, not the {task} "
            f"probe; run plstitch linear --task {task} (on each recorded split scheme with --split-scheme, "
            "e.g. cholect50's crossval-1 ... crossval-5)."
        )


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


def fold_count(folds: str, task: str) -> int:
    """`cv --folds` as a number of folds; loso / louo only with --task skill (JIGSAWS' folds)."""
    try:
        return int(folds)
    except ValueError:
        raise ConfigError(
            f"--folds must be a number of folds by video, got {folds!r} (loso and louo: with --task skill "
            f"on a JIGSAWS store, not --task {task})."
        ) from None

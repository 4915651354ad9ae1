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

"""Tasks: what a probe predicts from which labels and how it is scored (``registry``), one module each.

``phases`` (which phase: multi-class), ``tools`` (which instruments: multi-label), ``anticipation`` (minutes
until each phase or tool next occurs, within a horizon), ``rsd`` (remaining surgery duration) and
``triplets`` (CholecT50's action triplets: multi-label), then the ``plstitch.tasks`` entry points of
installed packages. ``plstitch tasks`` lists them; docs/tasks.md.
"""

from plstitch_eval.tasks.registry import (
    HEADS,
    MULTI_CLASS,
    MULTI_LABEL,
    REGRESSION,
    TASKS,
    MultiLabel,
    Regression,
    Scored,
    StoreInfo,
    Task,
    TaskSettings,
    get_task,
    register_task,
    registered_tasks,
    task_for,
)

__all__ = [
    "HEADS",
    "MULTI_CLASS",
    "MULTI_LABEL",
    "REGRESSION",
    "TASKS",
    "MultiLabel",
    "Regression",
    "Scored",
    "StoreInfo",
    "Task",
    "TaskSettings",
    "get_task",
    "register_task",
    "registered_tasks",
    "task_for",
]

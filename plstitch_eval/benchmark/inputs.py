"""The comma lists of `plstitch benchmark` (`--models`, `--datasets`, `--protocols`, `--metrics`, `--tasks`):
the one splitter they share, and the protocols, table metrics and tasks a run may name."""

from __future__ import annotations

from collections.abc import Sequence

from plstitch_eval.errors import ConfigError
from plstitch_eval.protocols import TASK_LABELS, benchmark_protocols
from plstitch_eval.tables import METRIC_LABELS

PROTOCOLS = benchmark_protocols()  # the shipped ones; `parse_protocols` asks the registry at each call
PROTOCOL_LABELS = TASK_LABELS  # a live view of the registry's labels
PHASES = "phases"  # the task of the phase table's cells (today's benchmark)


def parse_protocols(protocols: str | Sequence[str]) -> tuple[str, ...]:
    """`knn,linear[,cv]` -> ("knn", "linear", ...); an unknown name is a ConfigError listing the choices."""
    items = split_items(protocols, "--protocols")
    known = benchmark_protocols()
    for item in items:
        if item not in known:
            raise ConfigError(
                f"Unknown protocol {item!r} in --protocols; choose from {', '.join(known)} "
                "(e.g. --protocols knn,linear)."
            )
    return tuple(dict.fromkeys(items))


def parse_metrics(metrics: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """`accuracy,macro_f1_video` -> a tuple of table metrics (None: each dataset's headline metrics)."""
    if metrics is None or (isinstance(metrics, str) and not metrics.strip()):
        return None
    items = split_items(metrics, "--metrics")
    for item in items:
        if item not in METRIC_LABELS:
            raise ConfigError(
                f"Unknown metric {item!r} in --metrics; choose from {', '.join(METRIC_LABELS)}."
            )
    return tuple(dict.fromkeys(items))


def split_items(value: str | Sequence[str], option: str) -> list[str]:
    """Items of a comma list (or of a sequence of comma lists), stripped; an empty item is a ConfigError."""
    parts = [value] if isinstance(value, str) else list(value)
    items = [item.strip() for part in parts for item in str(part).split(",")]
    if not items or any(not item for item in items):
        raise ConfigError(f"{option} has an empty item (two commas in a row, or nothing at all).")
    return items


def parse_tasks(tasks: str | Sequence[str]) -> tuple[str, ...]:
    """`phases,anticipation,rsd,triplets` -> the tasks; an unknown name is the task registry's one line (with
    close matches); a task benchmark has no cells for is refused: a classification task other than phases
    (the phase table runs it as a protocol), or a plugin's task without a head benchmark fits."""
    from plstitch_eval.benchmark.task_kinds import runs_in_benchmark
    from plstitch_eval.tasks import MULTI_CLASS, get_task  # the registry loads the shipped tasks and plugins

    items = tuple(dict.fromkeys(split_items(tasks, "--tasks")))
    for item in items:
        task = get_task(item, "tasks")
        if item == PHASES or runs_in_benchmark(task):
            continue
        cells = [name for name in task.results_tasks.values() if name in benchmark_protocols()]
        if task.head == MULTI_CLASS and cells:
            raise ConfigError(
                f"--tasks {item}: a {task.head} task, scored as a protocol of the phase table; leave it out "
                f"of --tasks and add {', '.join(cells)} to --protocols."
            )
        raise ConfigError(
            f"--tasks {item}: a {task.head} task that benchmark does not run yet; leave it out of "
            f"--tasks and run plstitch {' / '.join(task.protocols) or 'linear'} --task {item} on each store."
        )
    return items

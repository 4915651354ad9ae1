"""CLI command `tasks`: list the task registry - what each task predicts, its head, labels and metrics.

Library imports sit inside the command for `plstitch --help`'s start-up (see commands/evaluate.py).
"""

from __future__ import annotations

from typing import Any

import typer

from plstitch_eval.commands.options import JsonOpt


def task_rows() -> list[dict[str, Any]]:
    """One row per registered task, in listing order, with the package it comes from."""
    from plstitch_eval.tasks import TASKS, registered_tasks

    return [
        {
            "name": task.name,
            "summary": task.summary,
            "head": task.head,
            "labels": task.labels,
            "metrics": list(task.metrics),
            "select_metric": task.select_metric,
            "protocols": list(task.protocols),
            "results_tasks": {p: task.results_task(p) for p in task.protocols},
            "horizon": task.uses_horizon,
            "package": TASKS.package(task.name),
        }
        for task in registered_tasks()
    ]


def tasks(json_path: JsonOpt = None) -> None:
    """List the tasks a probe predicts: targets, head kind, metrics, the protocols that fit each (--task)."""
    from rich.text import Text

    from plstitch_eval.registry import SHIPPED_PACKAGE
    from plstitch_eval.utils.console import result_console
    from plstitch_eval.utils.io import write_json_output

    rows = task_rows()
    if json_path is not None:
        write_json_output(json_path, {"tasks": rows})
        if str(json_path) == "-":
            return
    out = result_console(soft_wrap=True)
    out.print(Text("Tasks (--task NAME of knn, linear, ...)", style="bold"))
    for row in rows:
        origin = "" if row["package"] == SHIPPED_PACKAGE else f" (from {row['package']})"
        out.print()
        out.print(Text(f"{row['name']}{origin}: {row['summary']}", style="bold cyan"))
        facts = (
            ("head", row["head"]),
            ("labels", row["labels"]),
            ("metrics", ", ".join(row["metrics"])),
            ("chosen on", row["select_metric"]),
            ("protocols", ", ".join(f"{p} ({r})" for p, r in row["results_tasks"].items())),
        )
        for name, value in facts:
            out.print(Text(f"  {name}: {value}", style="dim" if name != "protocols" else ""))
        if row["horizon"]:
            out.print(
                Text("  options: --horizon MINUTES (default 3), --anticipate phases|tools", style="dim")
            )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("tasks")(tasks)

"""The `tools` task: which instruments a frame shows - multi-label, scored by AP per tool and mAP.

Fitted by the linear protocol's tool probe (`protocols/tools.py`, results task `linear-tools`), as
`linear --task tools` did before this registry.
"""

from __future__ import annotations

from plstitch_eval.tasks.registry import MULTI_LABEL, Task, register_task

TASK = register_task(
    Task(
        name="tools",
        summary="which instruments each frame shows (tool presence)",
        head=MULTI_LABEL,
        labels="per-frame tool presence (the manifest's tool_names)",
        metrics=("mAP",),
        select_metric="mAP",
        protocols=("linear",),
        results_tasks={"linear": "linear-tools"},
    )
)

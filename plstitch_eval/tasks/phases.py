"""The `phases` task: which phase (or action) a frame shows - one class per frame, the protocols' first task.

Its heads are fitted by the classification protocols as before this registry (k-NN, linear, MS-TCN, CV), so
`--task phases` writes the results it always wrote (results task = the protocol's name).
"""

from __future__ import annotations

from plstitch_eval.tasks.registry import MULTI_CLASS, Task, register_task

TASK = register_task(
    Task(
        name="phases",
        summary="which phase (or action) each frame shows",
        head=MULTI_CLASS,
        labels="per-frame phase labels",
        metrics=("accuracy", "macro_f1", "edit", "f1@10", "f1@25", "f1@50"),
        select_metric="accuracy",
        protocols=("knn", "linear", "temporal", "cv"),
        needs=("class_names",),
    )
)

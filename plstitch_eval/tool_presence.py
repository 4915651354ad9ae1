"""The tool-presence protocol's old home: it lives in ``plstitch_eval.protocols.tools`` now."""

from plstitch_eval.protocols.tools import (
    MAP,
    TOOLS_TASK,
    ap_key,
    average_precisions,
    mean_ap,
    multilabel_grad,
    positive_weights,
    run_tool_linear,
    sigmoid,
    tool_frames,
    train_multilabel_grid,
)

__all__ = [
    "MAP",
    "TOOLS_TASK",
    "ap_key",
    "average_precisions",
    "mean_ap",
    "multilabel_grad",
    "positive_weights",
    "run_tool_linear",
    "sigmoid",
    "tool_frames",
    "train_multilabel_grid",
]

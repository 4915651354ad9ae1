"""The frame-ranking head's old import path (docs/training.md, model cards, `plstitch_train`): it lives in
``plstitch_eval.hub.ranking_head`` now."""

from plstitch_eval.hub.ranking_head import (
    AUTHORS_TEMPORAL_HEADS,
    HEAD_CONFIG_FILE,
    HEAD_WEIGHTS_FILE,
    TemporalHead,
    TemporalTrunk,
    check_state_dict,
    head_state_from_checkpoint,
    load_temporal_head,
    resolve_head_source,
    save_temporal_head,
    strip_wrappers,
    temporal_head_from_state_dict,
    temporal_trunk,
)

__all__ = [
    "AUTHORS_TEMPORAL_HEADS",
    "HEAD_CONFIG_FILE",
    "HEAD_WEIGHTS_FILE",
    "TemporalHead",
    "TemporalTrunk",
    "check_state_dict",
    "head_state_from_checkpoint",
    "load_temporal_head",
    "resolve_head_source",
    "save_temporal_head",
    "strip_wrappers",
    "temporal_head_from_state_dict",
    "temporal_trunk",
]

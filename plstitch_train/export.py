"""Export a run or checkpoint as a timm folder: old import path; the code is in plstitch_train/publishing/
(`plstitch_train.publishing.export`). Kept because README.md documented `plstitch_train.export`.
"""

from plstitch_train.publishing.export import (
    CARD_NAME,
    EXPORT_SCHEMA,
    METADATA_NAME,
    ExportOptions,
    ExportSource,
    RunProgress,
    check_results,
    data_summary,
    export_model,
    git_commit,
    load_backbone,
    resolve_source,
    run_progress,
    source_train_config,
    source_weights_sha256,
    teacher_state,
    trainer_config,
    training_status,
    verify_export,
    write_temporal_head,
)

__all__ = [
    "CARD_NAME",
    "EXPORT_SCHEMA",
    "METADATA_NAME",
    "ExportOptions",
    "ExportSource",
    "RunProgress",
    "check_results",
    "data_summary",
    "export_model",
    "git_commit",
    "load_backbone",
    "resolve_source",
    "run_progress",
    "source_train_config",
    "source_weights_sha256",
    "teacher_state",
    "trainer_config",
    "training_status",
    "verify_export",
    "write_temporal_head",
]

"""Publishing a trained model: run or checkpoint -> timm folder (`export`, over `source`, `folder`) -> model
card (`cards`) -> push to the Hugging Face Hub (`publish`); the public names of each, re-exported here."""

from plstitch_train.publishing.cards import CardInfo, card_licence, render_card, render_reference_cards
from plstitch_train.publishing.export import (
    CARD_NAME,
    EXPORT_SCHEMA,
    METADATA_NAME,
    ExportOptions,
    ExportSource,
    check_results,
    export_model,
)
from plstitch_train.publishing.publish import (
    PushResult,
    UploadFile,
    check_folder_loads,
    check_results_belong,
    format_file_table,
    list_upload_files,
    push_to_hub,
)

__all__ = [
    "CARD_NAME",
    "EXPORT_SCHEMA",
    "METADATA_NAME",
    "CardInfo",
    "ExportOptions",
    "ExportSource",
    "PushResult",
    "UploadFile",
    "card_licence",
    "check_folder_loads",
    "check_results",
    "check_results_belong",
    "export_model",
    "format_file_table",
    "list_upload_files",
    "push_to_hub",
    "render_card",
    "render_reference_cards",
]

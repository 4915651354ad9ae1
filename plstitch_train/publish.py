"""Push an exported folder to the Hub: old import path; the code is in plstitch_train/publishing/
(`plstitch_train.publishing.publish`). Kept because README.md documented `plstitch_train.publish`.
"""

from plstitch_train.publishing.publish import (
    PICKLE_SUFFIXES,
    PushResult,
    UploadFile,
    check_folder_loads,
    check_results_belong,
    format_file_table,
    hub_failure,
    list_upload_files,
    push_to_hub,
    refuse_pickles,
    resolve_token,
)

__all__ = [
    "PICKLE_SUFFIXES",
    "PushResult",
    "UploadFile",
    "check_folder_loads",
    "check_results_belong",
    "format_file_table",
    "hub_failure",
    "list_upload_files",
    "push_to_hub",
    "refuse_pickles",
    "resolve_token",
]

"""Dataset adapters: a registry of one module per dataset (`get_dataset(name, root, **options)`)."""

from __future__ import annotations

from plstitch_eval.data.datasets import (  # noqa: F401
    autolaparo,
    breakfast,
    cholec80,
    cholect50,
    endoscapes,
    folder,
    gtea,
    jigsaws,
    m2cai16,
    synthetic,
)
from plstitch_eval.data.datasets.base import (
    DatasetAdapter,
    VideoRecord,
    cvs_at,
    decode,
    labels_at,
    tools_at,
    triplets_at,
)
from plstitch_eval.data.datasets.registry import (
    DatasetFacts,
    dataset_class,
    dataset_facts,
    describe_datasets,
    get_dataset,
    list_datasets,
    register_dataset,
    registered_dataset,
    unregister_dataset,
)

__all__ = [
    "DatasetAdapter",
    "DatasetFacts",
    "VideoRecord",
    "cvs_at",
    "dataset_class",
    "dataset_facts",
    "decode",
    "describe_datasets",
    "get_dataset",
    "labels_at",
    "list_datasets",
    "register_dataset",
    "registered_dataset",
    "tools_at",
    "triplets_at",
    "unregister_dataset",
]

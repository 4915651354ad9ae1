"""`from plstitch_eval.benchmark import X` keeps working for every public name of the old single module, each
the very object of the module that defines it."""

from __future__ import annotations

import importlib

import plstitch_eval.benchmark as face

HOMES = {
    "models": (
        "CHECKPOINT_SUFFIXES",
        "COLLECTIONS",
        "Collection",
        "check_model_spec",
        "expand_models",
        "model_dirs",
    ),
    "inputs": ("PROTOCOLS", "PROTOCOL_LABELS", "parse_metrics", "parse_protocols"),
    "datasets_file": (
        "DATASET_FILE_KEYS",
        "DATASET_FILE_SUFFIXES",
        "DatasetSpec",
        "parse_datasets",
        "read_datasets_file",
    ),
    "config": ("RUNTIME_FIELDS", "BenchmarkConfig"),
    "cells": (
        "CELL_SCHEMA",
        "FEATURES_DIR",
        "MAX_ERRORS_SHOWN",
        "RESULTS_DIR",
        "Cell",
        "cell_state",
        "plan_cells",
        "read_cell_metrics",
        "store_digest",
    ),
    "paper": ("PAPER_METRICS", "paper_numbers", "paper_results"),
    "table": ("SCHEMA", "TABLE_JSON", "TABLE_MD", "benchmark_table", "table_markdown"),
    "runner": ("BenchmarkResult", "describe_error", "run_benchmark"),
}


def test_every_public_name_is_re_exported_from_its_home() -> None:
    for module, names in HOMES.items():
        home = importlib.import_module(f"plstitch_eval.benchmark.{module}")
        for name in names:
            assert getattr(face, name) is getattr(home, name), (module, name)
    assert sorted(face.__all__) == sorted(name for names in HOMES.values() for name in names)

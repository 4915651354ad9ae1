"""Many encoders x many datasets x several protocols in one resumable run (`plstitch benchmark`); the
output layout and resume rules are in docs/benchmark.md. This face re-exports the modules' public names."""

from plstitch_eval.benchmark.cells import (
    CELL_SCHEMA,
    FEATURES_DIR,
    MAX_ERRORS_SHOWN,
    RESULTS_DIR,
    Cell,
    cell_state,
    plan_cells,
    read_cell_metrics,
    store_digest,
)
from plstitch_eval.benchmark.config import RUNTIME_FIELDS, BenchmarkConfig
from plstitch_eval.benchmark.datasets_file import (
    DATASET_FILE_KEYS,
    DATASET_FILE_SUFFIXES,
    DatasetSpec,
    parse_datasets,
    read_datasets_file,
)
from plstitch_eval.benchmark.inputs import PROTOCOL_LABELS, PROTOCOLS, parse_metrics, parse_protocols
from plstitch_eval.benchmark.models import (
    CHECKPOINT_SUFFIXES,
    COLLECTIONS,
    Collection,
    check_model_spec,
    expand_models,
    model_dirs,
)
from plstitch_eval.benchmark.paper import PAPER_METRICS, paper_numbers, paper_results
from plstitch_eval.benchmark.runner import BenchmarkResult, describe_error, run_benchmark
from plstitch_eval.benchmark.table import SCHEMA, TABLE_JSON, TABLE_MD, benchmark_table, table_markdown

__all__ = [
    "CELL_SCHEMA",
    "CHECKPOINT_SUFFIXES",
    "COLLECTIONS",
    "DATASET_FILE_KEYS",
    "DATASET_FILE_SUFFIXES",
    "FEATURES_DIR",
    "MAX_ERRORS_SHOWN",
    "PAPER_METRICS",
    "PROTOCOLS",
    "PROTOCOL_LABELS",
    "RESULTS_DIR",
    "RUNTIME_FIELDS",
    "SCHEMA",
    "TABLE_JSON",
    "TABLE_MD",
    "BenchmarkConfig",
    "BenchmarkResult",
    "Cell",
    "Collection",
    "DatasetSpec",
    "benchmark_table",
    "cell_state",
    "check_model_spec",
    "describe_error",
    "expand_models",
    "model_dirs",
    "paper_numbers",
    "paper_results",
    "parse_datasets",
    "parse_metrics",
    "parse_protocols",
    "plan_cells",
    "read_cell_metrics",
    "read_datasets_file",
    "run_benchmark",
    "store_digest",
    "table_markdown",
]

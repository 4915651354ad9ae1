"""The temporal (MS-TCN) protocol's old home: it lives in ``plstitch_eval.protocols.temporal`` now."""

from plstitch_eval.protocols.temporal import (
    TASK,
    TemporalData,
    load_temporal_data,
    run_temporal,
    run_temporal_seeds,
    save_temporal_probe,
)

__all__ = [
    "TASK",
    "TemporalData",
    "load_temporal_data",
    "run_temporal",
    "run_temporal_seeds",
    "save_temporal_probe",
]

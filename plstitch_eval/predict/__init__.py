"""`plstitch predict`: a saved probe on new videos, whose frames reach the encoder exactly as in extraction.

Each video gets `<video>.csv` (time, frame, predicted class, one probability column per class, and a
`progression` column when the encoder carries a PL-Stitch temporal head) and a timeline `<video>.png`.

The modules, in the order a run uses them:
- `options`: `PredictOptions`, the run's settings;
- `sources`: which videos (files, `-` for stdin, a `--root` folder, a dataset) and their labels;
- `encoder`: the probe's encoder, loaded and checked against the probe, encoding frames as extraction does;
- `request`: `PredictRequest`, what the command line asks for, checked before any model loads;
- `heads`: what the probe says per frame (classes and probabilities, or a regression probe's minutes), for a
  whole video and frame by frame online;
- `live`: live sources (stream URLs, capture devices) read by a thread that keeps the newest frame;
- `online`: a causal probe following one video frame by frame as it decodes (`--online`: files, pipes,
  live sources);
- `outputs`: `VideoPrediction`, the per-video CSV and timeline figure, the refusal to overwrite;
- `probeset`: several `--probe` (`ProbeSet`), their column prefixes and backbones;
- `backbones`: one encoder per backbone of the probes, sharing one decode;
- `case`: one video under several probes (`CasePrediction`): one encoder pass, prefixed columns;
- `pipeline`: the run's line, source -> reader -> encoder -> heads -> outputs (`FrameSink`), each output one
  module: `out_console` (the per-second line), `out_jsonl` (`--jsonl`), `out_page` (`--serve`), `out_csv`
  (each video's CSV and figures);
- `run`: the run over many videos, offline through extraction's loader or online, and its summary;
- `session`: one command's run from its request to the summary JSON and the exit code.
(`plstitch_eval.utils.sender` streams a file at real-time pace: to try live mode, for tests and benchmarks.)
Every name other modules use is importable from `plstitch_eval.predict` itself.
"""

from plstitch_eval.predict.backbones import load_backbones
from plstitch_eval.predict.case import CaseHeads, CasePrediction
from plstitch_eval.predict.encoder import ProbeEncoder, describe, encode_crops, load_probe_encoder
from plstitch_eval.predict.live import (
    END_OF_STREAM,
    LOW_DELAY,
    Captured,
    LiveReader,
    LiveSource,
    is_live,
    live_name,
    parse_input_options,
)
from plstitch_eval.predict.online import (
    END_OF_RECORDING,
    FOLLOWED_FORMATS,
    FRAMEWISE_KINDS,
    INTERRUPTED,
    PIPE_HINT,
    STOPPED,
    TERMINATED,
    OnlineUpdate,
    PolledReader,
    StopNow,
    StopRequest,
    follows,
    online_plan,
    predict_online,
    quiet_for,
    read_stream,
    stdin_binary,
)
from plstitch_eval.predict.options import PredictOptions
from plstitch_eval.predict.outputs import (
    FIXED_COLUMNS,
    PROGRESSION_COLUMN,
    VideoPrediction,
    check_outputs,
    csv_text,
    output_paths,
    plot_prediction,
    probability_columns,
    write_prediction,
)
from plstitch_eval.predict.pipeline import FrameSink, Outputs, PredictedFrame
from plstitch_eval.predict.probeset import ProbeSet, as_probe_set
from plstitch_eval.predict.request import PredictRequest, live_settings
from plstitch_eval.predict.run import (
    PredictSummary,
    VideoFailure,
    apply_probe,
    predict_decoding,
    predict_videos,
    run_online,
)
from plstitch_eval.predict.session import predict_session
from plstitch_eval.predict.sources import (
    PHASE_TSV_HEADER,
    STDIN,
    STDIN_NAME,
    VIDEO_EXTENSIONS,
    VideoSource,
    check_unique_names,
    check_video,
    is_video_file,
    read_labels,
    sources_from_dataset,
    sources_from_paths,
    videos_in_folder,
)

__all__ = [
    "FrameSink",
    "Outputs",
    "PredictedFrame",
    "load_backbones",
    "CaseHeads",
    "CasePrediction",
    "ProbeSet",
    "as_probe_set",
    "END_OF_STREAM",
    "LOW_DELAY",
    "Captured",
    "LiveReader",
    "LiveSource",
    "PredictRequest",
    "is_live",
    "live_name",
    "live_settings",
    "parse_input_options",
    "predict_session",
    "END_OF_RECORDING",
    "FIXED_COLUMNS",
    "FOLLOWED_FORMATS",
    "FRAMEWISE_KINDS",
    "INTERRUPTED",
    "PHASE_TSV_HEADER",
    "PIPE_HINT",
    "PROGRESSION_COLUMN",
    "STDIN",
    "STDIN_NAME",
    "STOPPED",
    "TERMINATED",
    "VIDEO_EXTENSIONS",
    "OnlineUpdate",
    "PolledReader",
    "PredictOptions",
    "PredictSummary",
    "ProbeEncoder",
    "StopNow",
    "StopRequest",
    "VideoFailure",
    "VideoPrediction",
    "VideoSource",
    "apply_probe",
    "check_outputs",
    "check_unique_names",
    "check_video",
    "csv_text",
    "describe",
    "encode_crops",
    "follows",
    "is_video_file",
    "load_probe_encoder",
    "online_plan",
    "output_paths",
    "plot_prediction",
    "predict_decoding",
    "predict_online",
    "predict_videos",
    "probability_columns",
    "quiet_for",
    "read_labels",
    "read_stream",
    "run_online",
    "sources_from_dataset",
    "sources_from_paths",
    "stdin_binary",
    "videos_in_folder",
    "write_prediction",
]

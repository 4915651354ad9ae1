"""CLI command `predict`: a saved probe on new videos (CSV + timeline per video), or online on a stream."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import (
    DatasetSchemeOpt,
    DecodeDeviceOpt,
    EncodeBatchOpt,
    EncodeDeviceOpt,
    NumWorkersOpt,
    PrecisionOpt,
    ProbeDecoderOpt,
    TrustPickleOpt,
    WhichOpt,
    checked_output,
    dataset_opt,
    encode_settings,
    given,
    json_opt,
    out_opt,
    root_opt,
    split_opt,
)
from plstitch_eval.utils.outputs import FILE

VideosRootOpt = root_opt("Every video in this folder; with --dataset, the dataset's folder instead.")
PredictOutOpt = out_opt("Folder for <video>.csv and <video>.png (optional with --online).", kind=Path | None)
PredictDatasetOpt = dataset_opt(
    "Predict a dataset's videos, its annotations as ground truth.", kind=str | None
)
PredictSplitOpt = split_opt("With --dataset: only this split.")
ProbeOpt = Annotated[
    list[str],
    typer.Option(
        "--probe",
        help="Probe folder (plstitch linear --save DIR), or a published probe hf-hub:ORG/NAME\\[@REV]; "
        "repeatable: probes share one decode and one encoder pass per backbone, their columns prefixed "
        "<probe>.<column>.",
    ),
]
VideosArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Video files (or frame folders); with --online also - (a stream piped into stdin), a stream "
        "URL (rtsp:// rtmp:// srt:// udp:// tcp:// http(s)://) or a capture device (/dev/videoN)."
    ),
]
OnlyOpt = Annotated[
    str | None, typer.Option("--videos", help="With --dataset: only these videos (comma-separated).")
]
LabelsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--labels",
        help="Ground truth of a VIDEO, one per VIDEO in order: Frame<TAB>Phase TSV (Cholec80) or one "
        "class name per line (MS-TCN), a row per video frame.",
        dir_okay=False,
    ),
]
LabelsFpsOpt = Annotated[
    float | None,
    typer.Option("--labels-fps", help="Rows per second of the --labels files (default: the video's fps)."),
]
OnlineOpt = Annotated[
    bool,
    typer.Option(
        "--online",
        help="Predict as the video arrives (causal probes): one line per video second on stdout, with the "
        "phase and its latency.",
    ),
]
FollowTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--follow-timeout",
        metavar="SECONDS",
        help="With --online: a video file still being written (MPEG-TS, Matroska, ...; written to in the "
        "last SECONDS) is followed, waiting at its end for more, until no byte came for SECONDS; "
        "0 reads to its current end (default 10).",
    ),
]
JsonlOpt = Annotated[
    str | None,
    typer.Option(
        "--jsonl",
        metavar="PATH",
        help="With --online: one JSON line per sampled frame, flushed as it is made (time_s, frame_index, "
        "predicted, a probability per class, captured_at, latency_s, dropped); - = stdout.",
        callback=checked_output(FILE),
    ),
]
InputFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--input-format",
        help="With --online: FFmpeg's input format of a live source (v4l2 for a capture card, lavfi, "
        "mpegts, ...); default: from the address (/dev/videoN: v4l2).",
    ),
]
InputOptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--input-option",
        metavar="KEY=VALUE",
        help="With --online: an FFmpeg option for a live source, over the low-delay defaults "
        "(flags=low_delay probesize=32 analyzeduration=0, rtsp_transport=tcp); repeatable.",
    ),
]
ConnectTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--connect-timeout",
        metavar="SECONDS",
        help="With --online: a live source from which no packet arrives for SECONDS, or no keyframe for "
        "SECONDS after the first packet, has failed; later, a silence as long means it dropped (default 10).",
    ),
]
ReconnectTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--reconnect-timeout",
        metavar="SECONDS",
        help="With --online: a dropped live source is waited for (reopened once its connection closed) for "
        "up to SECONDS more (the gap is recorded); 0 ends the video (default 0).",
    ),
]
ProgressionOpt = Annotated[
    bool | None,
    typer.Option(
        "--progression/--no-progression",
        help="Progression column from the encoder's PL-Stitch temporal head (default: when it has one).",
    ),
]
RuntimeOpt = Annotated[
    str,
    typer.Option(
        "--runtime",
        help="torch (default), or onnx: the probe's encoder and head run by onnxruntime from an export "
        "folder (plstitch export-onnx PROBE --out DIR; --probe DIR).",
    ),
]
RecordOpt = Annotated[
    Path | None,
    typer.Option(
        "--record",
        metavar="FILE",
        help="With --online and one live source: write the stream to FILE (.mkv, .ts or .mp4) as it arrives, "
        "remuxed, not re-encoded, flushed packet by packet; an existing FILE is refused unless --overwrite.",
    ),
]
ServeOpt = Annotated[
    str | None,
    typer.Option(
        "--serve",
        metavar="HOST:PORT",
        help="With --online: serve the live procedure page there (pip install 'plstitch[serve]'); loopback "
        "needs no token, any other address --serve-token (one is generated and printed if not given).",
    ),
]
ServeTokenOpt = Annotated[
    str | None,
    typer.Option("--serve-token", metavar="TOKEN", help="With --serve: the token the page's requests carry."),
]
ShowFramesOpt = Annotated[
    bool,
    typer.Option(
        "--show-frames",
        help="With --serve: show the newest video frame on the page (downscaled JPEG, same token); off by "
        "default so that patient video stays off the page.",
    ),
]
OverwriteOpt = Annotated[
    bool, typer.Option("--overwrite", help="Replace existing output files (and an existing --record FILE).")
]
SummaryJsonOpt = json_opt(
    "Write the summary JSON to this file (atomically); - = stdout. Default: stdout, except with --online, "
    "whose stdout carries the per-second lines."
)


def predict(
    probe_dir: ProbeOpt,
    videos: VideosArg = None,
    root: VideosRootOpt = None,
    out: PredictOutOpt = None,
    dataset: PredictDatasetOpt = None,
    split: PredictSplitOpt = None,
    split_scheme: DatasetSchemeOpt = None,
    only: OnlyOpt = None,
    labels: LabelsOpt = None,
    labels_fps: LabelsFpsOpt = None,
    online: OnlineOpt = False,
    follow_timeout: FollowTimeoutOpt = None,
    jsonl: JsonlOpt = None,
    input_format: InputFormatOpt = None,
    input_options: InputOptionOpt = None,
    connect_timeout: ConnectTimeoutOpt = None,
    reconnect_timeout: ReconnectTimeoutOpt = None,
    record: RecordOpt = None,
    serve: ServeOpt = None,
    serve_token: ServeTokenOpt = None,
    show_frames: ShowFramesOpt = False,
    progression: ProgressionOpt = None,
    batch_size: EncodeBatchOpt = None,
    num_workers: NumWorkersOpt = None,
    device: EncodeDeviceOpt = None,
    decoder: ProbeDecoderOpt = None,
    decode_device: DecodeDeviceOpt = None,
    precision: PrecisionOpt = None,
    which: WhichOpt = None,
    trust_pickle: TrustPickleOpt = False,
    runtime: RuntimeOpt = "torch",
    overwrite: OverwriteOpt = False,
    json_path: SummaryJsonOpt = None,
) -> None:
    """Apply a saved probe to videos, decoded and encoded exactly as `plstitch extract` does.

    Writes per video <video>.csv (time_s, frame_index, predicted, a probability per class, progression) and
    a timeline <video>.png under --out; prints a JSON summary. The probe's encoder, preprocessing and fps
    are used; another model or preprocessing is refused. --online follows files, pipes and live sources.
    """
    # imported when run: the predict and probes packages pull in torchvision, torchcodec and timm (measured
    # +10 s or more on a 6 to 7 s start-up of `plstitch --help`, 2 busy cores)
    from plstitch_eval.predict import PredictOptions, PredictRequest, live_settings, predict_session
    from plstitch_eval.predict.probeset import ProbeSet
    from plstitch_eval.predict.serve import serve_settings
    from plstitch_eval.predict.session import stopped_twice
    from plstitch_eval.probes.hub import resolve_probe

    options = PredictOptions(
        **encode_settings(
            batch_size=batch_size,
            num_workers=num_workers,
            device=device,
            precision=precision,
            decoder=decoder,
            decode_device=decode_device,
        ),
        **given(which=which, follow_timeout=follow_timeout),
        overwrite=overwrite, progression=progression, trust_pickle=trust_pickle, runtime=runtime,
    )  # fmt: skip
    live, live_flags = live_settings(
        input_format, input_options, connect_timeout, reconnect_timeout, record, overwrite
    )
    request = PredictRequest(
        videos=list(videos or []), root=root, dataset=dataset, split=split, split_scheme=split_scheme,
        only=only, labels=list(labels or []), labels_fps=labels_fps, out=out, online=online,
        follow_timeout=follow_timeout, jsonl=jsonl, live=live, live_flags=live_flags, summary_json=json_path,
        serve=serve_settings(serve, serve_token, show_frames) if serve is not None else None,
        show_frames=show_frames,
    )  # fmt: skip
    request.check()
    probes = ProbeSet.of([resolve_probe(folder) for folder in probe_dir])
    try:
        code = predict_session(request, probes, options, json_path)
    except KeyboardInterrupt as exc:  # a second Ctrl-C or SIGTERM: stopped at once
        raise typer.Exit(code=stopped_twice(exc, out)) from None
    if code:
        raise typer.Exit(code=code)


ExportOutOpt = out_opt("Export folder: the probe plus its ONNX graphs.", replaced=True)


def export_onnx(
    probe_dir: Annotated[
        str, typer.Argument(help="Probe folder (linear/temporal --save DIR) or hf-hub:ORG/NAME[@REV].")
    ],
    out: ExportOutOpt,
    opset: Annotated[int, typer.Option("--opset", help="ONNX opset of the graphs.")] = 17,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an earlier export.")] = False,
) -> None:
    """Export a probe and its encoder to ONNX (recognizer.onnx: frames -> features and probabilities;
    head.onnx: features -> logits) for onnxruntime, TensorRT or `predict --probe OUT --runtime onnx`;
    push-to-hub OUT publishes the graphs with the probe."""
    from plstitch_eval.predict.onnx import export_onnx as export
    from plstitch_eval.utils.io import write_json_output

    write_json_output("-", {"out": str(out), **export(probe_dir, out, overwrite=overwrite, opset=opset)})


def register(app: typer.Typer) -> None:
    """Add `plstitch predict` and `plstitch export-onnx` to the app."""
    app.command("predict")(predict)
    app.command("export-onnx")(export_onnx)

"""One `plstitch predict` run from a checked `PredictRequest`: the inputs, the encoder, offline or online
prediction, the summary JSON and the lines on stderr; returns the exit code (0, 1 when a video failed, 128 +
the signal that stopped an online run)."""

from __future__ import annotations

import signal
from pathlib import Path

from rich.text import Text

from plstitch_eval.errors import ConfigError
from plstitch_eval.predict.backbones import load_backbones
from plstitch_eval.predict.encoder import describe
from plstitch_eval.predict.onnx import load_onnx_runtime
from plstitch_eval.predict.options import PredictOptions
from plstitch_eval.predict.out_console import second_printer
from plstitch_eval.predict.out_jsonl import JsonLinesOut
from plstitch_eval.predict.out_page import PageOut
from plstitch_eval.predict.outputs import check_outputs
from plstitch_eval.predict.pipeline import Outputs
from plstitch_eval.predict.probeset import ProbeSet, as_probe_set
from plstitch_eval.predict.request import PredictRequest, stopped_twice_line, stopped_verb
from plstitch_eval.predict.run import (
    PredictSummary,
    case_prefixes,
    predict_decoding,
    predict_videos,
    run_online,
)
from plstitch_eval.probes import Probe
from plstitch_eval.utils.console import console, error_console, print_error, progress_bar
from plstitch_eval.utils.io import write_json_output

ONLINE_DECODING_NOTE = (
    " --online decodes files on the CPU, frame by frame; a stream on stdin, a recording still being "
    "written or a live source is read by PyAV"
)


def predict_session(
    request: PredictRequest, probe: Probe | ProbeSet, options: PredictOptions, json_path: Path | None
) -> int:
    """Predict the request's inputs with `probe` (or several probes: one decode, one encoder pass per
    backbone per frame); write the outputs and the summary; the exit code."""
    probes = as_probe_set(probe)
    sources = request.sources(probes.label_classes)
    if request.out is not None:  # before the model loads
        check_outputs(request.out, [s.name for s in sources], options.overwrite, case_prefixes(probes))
    lines = JsonLinesOut(request.jsonl, options.overwrite) if request.jsonl is not None else None
    if options.runtime == "onnx":
        if not probes.single:
            raise ConfigError(
                f"--runtime onnx runs one exported probe; got {len(probes.probes)} --probe: drop --runtime "
                "onnx, or run one predict per probe."
            )
        probe, model = load_onnx_runtime(probes.first, options)
        probes = as_probe_set(probe)
        models = [model]
    else:
        models = load_backbones(probes, options)  # one encoder per backbone the probes are on
        model = models[0]
    for i, each in enumerate(probes.probes):
        say(describe(each, models[probes.group(i)]))
    probe = probes.first
    if request.online:
        decoding = predict_decoding(probe, model, sources, options)
        files_only = all(s.source is not None for s in sources)
        if decoding.on_cuda or (options.decoder == "torchcodec" and not files_only):
            console.print(Text.assemble(("note:", "yellow"), ONLINE_DECODING_NOTE), soft_wrap=True)
        page = PageOut(request.serve, probes, [s.name for s in sources]) if request.serve else None
        with Outputs([lines, page]) as outputs:  # the outputs beside the CSV and the per-second line
            summary = run_online(
                probes,
                models,
                sources,
                request.out,
                second_printer(len(sources) > 1, to_stderr=request.stdout_lines),
                overwrite=options.overwrite,
                decoding=decoding,
                follow_s=options.follow_timeout,
                sink=outputs,
            )
            outputs.close(summary)
    else:
        with progress_bar() as bar:
            task = bar.add_task("predict", total=len(sources))
            summary = predict_videos(
                probes, models, sources, request.out, options, on_video=lambda _: bar.update(task, advance=1)
            )
    return report(summary, json_path, request)


def report(summary: PredictSummary, json_path: Path | None, request: PredictRequest) -> int:
    """Write the summary JSON (stdout offline; online only to --json, stdout being the lines'), print the
    failures and how a stopped run ended; the exit code."""
    if json_path is not None or not request.online:
        write_json_output(json_path or "-", summary.to_dict())
    if json_path is not None and str(json_path) != "-":
        say(f"summary written to {json_path}")
    for failure in summary.failed:
        print_error(failure.error)  # names the file
    if summary.interrupted:
        error_console.print(Text(interrupted_line(summary)), highlight=False, soft_wrap=True)
        return summary.exit_code or 130  # 130 (Ctrl-C) or 143 (SIGTERM)
    return 0 if summary.ok else 1


def interrupted_line(summary: PredictSummary) -> str:
    """The one line Ctrl-C or SIGTERM leaves on stderr: where the video stopped and what was written."""
    verb = stopped_verb(summary.stop_signal)
    video = summary.interrupted_video
    if video is None:
        done = summary.predictions[-1].video if summary.predictions else None
        after = f" after {done} ended" if done else " before the first video"
        return f"{verb}{after}; the videos after it were not read"
    if not video.frames:
        return f"{verb} before the first frame of {video.source}; nothing to write"
    at = f"{verb} at {video.last_time:.1f} s of video ({video.source})"
    if not video.files:
        return f"{at}; nothing written (no --out)"
    files = list(video.files.values())
    return f"{at}; wrote {', '.join(files[:-1])} and {files[-1]}"


def stopped_twice(exc: KeyboardInterrupt, out: Path | None) -> int:
    """Say that a second Ctrl-C or SIGTERM stopped the run at once; the exit code (128 + the signal)."""
    signum = int(getattr(exc, "signum", signal.SIGINT))  # `online.StopNow` says which signal
    error_console.print(Text(stopped_twice_line(signum, out)), highlight=False, soft_wrap=True)
    return 128 + signum


def say(text: str) -> None:
    """An informational line on stderr (silenced by --quiet), printed verbatim."""
    console.print(Text(text), soft_wrap=True, highlight=False)

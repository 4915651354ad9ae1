"""One `plstitch predict` run from a checked `PredictRequest`: the inputs, the encoder, offline or online
prediction, the summary JSON and the lines on stderr; returns the exit code (0, 1 when a video failed, 128 +
the signal that stopped an online run)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from plstitch_eval.errors import ConfigError
from plstitch_eval.predict.encoder import describe, load_probe_encoder
from plstitch_eval.predict.online import OnlineUpdate
from plstitch_eval.predict.onnx import load_onnx_runtime
from plstitch_eval.predict.options import PredictOptions
from plstitch_eval.predict.outputs import JsonLines, check_outputs
from plstitch_eval.predict.probeset import ProbeSet, as_probe_set
from plstitch_eval.predict.request import PredictRequest, stopped_twice_line, stopped_verb
from plstitch_eval.predict.run import (
    PredictSummary,
    case_prefixes,
    predict_decoding,
    predict_videos,
    run_online,
)
from plstitch_eval.predict.serve import LivePage, open_page
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
    """Predict the request's inputs with `probe` (or several probes of one backbone, one encoder pass per
    frame); write the outputs and the summary; the exit code."""
    probes = as_probe_set(probe)
    sources = request.sources(probes.label_classes)
    if request.out is not None:  # before the model loads
        check_outputs(request.out, [s.name for s in sources], options.overwrite, case_prefixes(probes))
    lines = JsonLines(request.jsonl, options.overwrite) if request.jsonl is not None else None
    if options.runtime == "onnx":
        if not probes.single:
            raise ConfigError(
                f"--runtime onnx runs one exported probe; got {len(probes.probes)} --probe: drop --runtime "
                "onnx, or run one predict per probe."
            )
        probe, model = load_onnx_runtime(probes.first, options)
        probes = as_probe_set(probe)
    else:
        model = load_probe_encoder(probes.first, options)  # the others share its backbone (`ProbeSet.of`)
    for each in probes.probes:
        say(describe(each, model))
    probe = probes.first
    if request.online:
        decoding = predict_decoding(probe, model, sources, options)
        files_only = all(s.source is not None for s in sources)
        if decoding.on_cuda or (options.decoder == "torchcodec" and not files_only):
            console.print(Text.assemble(("note:", "yellow"), ONLINE_DECODING_NOTE), soft_wrap=True)
        with ExitStack() as scope:
            outputs = [scope.enter_context(lines).write] if lines is not None else []
            page = live_page(request, probes, sources, scope)
            outputs += [page.publish] if page is not None else []
            on_frame = fan_out(outputs)
            summary = run_online(
                probes,
                model,
                sources,
                request.out,
                second_printer(len(sources) > 1, to_stderr=request.stdout_lines),
                overwrite=options.overwrite,
                decoding=decoding,
                follow_s=options.follow_timeout,
                on_frame=on_frame,
                on_image=page.show if page is not None and request.serve.show_frames else None,
            )
            if page is not None:
                page.finish(case_ended(summary))
    else:
        with progress_bar() as bar:
            task = bar.add_task("predict", total=len(sources))
            summary = predict_videos(
                probes, model, sources, request.out, options, on_video=lambda _: bar.update(task, advance=1)
            )
    return report(summary, json_path, request)


def live_page(request: PredictRequest, probe: ProbeSet, sources: list, scope: ExitStack) -> LivePage | None:
    """`--serve`: the live page, serving until the run ends (closed by `scope`)."""
    if request.serve is None:
        return None
    page = open_page(request.serve, probe, [s.name for s in sources])
    scope.callback(page.close)
    return page


def fan_out(outputs: list[Callable[[dict[str, Any]], None]]) -> Callable[[dict[str, Any]], None] | None:
    """One `on_frame` handing each frame's row to every output (the JSON lines, the page)."""
    if not outputs:
        return None
    if len(outputs) == 1:
        return outputs[0]

    def each(row: dict[str, Any]) -> None:
        for output in outputs:
            output(row)

    return each


def case_ended(summary: PredictSummary) -> str:
    """How the case ended, as the page says it: the last video's end, or the stop."""
    if summary.interrupted:
        return stopped_verb(summary.stop_signal)
    last = summary.predictions[-1] if summary.predictions else None
    return (last.ended if last is not None else None) or "the run ended"


def second_printer(with_video: bool, to_stderr: bool):
    """The per-second line printer of an online run: stdout, or stderr when stdout carries `--jsonl -`."""

    def emit(update: OnlineUpdate) -> None:
        typer.echo(update.line(with_video=with_video), err=to_stderr)

    return emit


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

"""CLI command `predict`: a saved probe on new videos (CSV + timeline per video), or online on a stream."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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
    dataset_opt,
    encode_settings,
    given,
    out_opt,
    root_opt,
    split_opt,
)
from plstitch_eval.errors import ConfigError

if TYPE_CHECKING:
    from plstitch_eval.predict import PredictSummary

VideosRootOpt = root_opt("Every video in this folder; with --dataset, the dataset's folder instead.")
PredictOutOpt = out_opt("Folder for <video>.csv and <video>.png (optional with --online).", kind=Path | None)
PredictDatasetOpt = dataset_opt(
    "Predict a dataset's videos, its annotations as ground truth.", kind=str | None
)
PredictSplitOpt = split_opt("With --dataset: only this split.")


def predict(
    probe_dir: Annotated[
        Path,
        typer.Option("--probe", help="Probe folder (plstitch linear --save DIR).", file_okay=False),
    ],
    videos: Annotated[
        list[str] | None,
        typer.Argument(help="Video files (or frame folders); - reads a stream piped into stdin (--online)."),
    ] = None,
    root: VideosRootOpt = None,
    out: PredictOutOpt = None,
    dataset: PredictDatasetOpt = None,
    split: PredictSplitOpt = None,
    split_scheme: DatasetSchemeOpt = None,
    only: Annotated[
        str | None, typer.Option("--videos", help="With --dataset: only these videos (comma-separated).")
    ] = None,
    labels: Annotated[
        list[Path] | None,
        typer.Option(
            "--labels",
            help="Ground truth of a VIDEO, one per VIDEO in order: Frame<TAB>Phase TSV (Cholec80) or one "
            "class name per line (MS-TCN), a row per video frame.",
            dir_okay=False,
        ),
    ] = None,
    labels_fps: Annotated[
        float | None,
        typer.Option(
            "--labels-fps", help="Rows per second of the --labels files (default: the video's fps)."
        ),
    ] = None,
    online: Annotated[
        bool,
        typer.Option(
            "--online",
            help="Predict as the video decodes (causal probes): one line per video second on stdout, with "
            "the phase and its latency.",
        ),
    ] = False,
    follow_timeout: Annotated[
        float | None,
        typer.Option(
            "--follow-timeout",
            metavar="SECONDS",
            help="With --online: a video file still being written (MPEG-TS, Matroska, ...; written to in the "
            "last SECONDS) is followed, waiting at its end for more, until no byte came for SECONDS; "
            "0 reads to its current end (default 10).",
        ),
    ] = None,
    progression: Annotated[
        bool | None,
        typer.Option(
            "--progression/--no-progression",
            help="Progression column from the encoder's PL-Stitch temporal head (default: when it has one).",
        ),
    ] = None,
    batch_size: EncodeBatchOpt = None,
    num_workers: NumWorkersOpt = None,
    device: EncodeDeviceOpt = None,
    decoder: ProbeDecoderOpt = None,
    decode_device: DecodeDeviceOpt = None,
    precision: PrecisionOpt = None,
    which: WhichOpt = None,
    trust_pickle: TrustPickleOpt = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace existing output files.")] = False,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Write the summary JSON to this file (atomically); - = stdout. Default: stdout, except "
            "with --online, whose stdout carries the per-second lines.",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Apply a saved probe to videos, decoded and encoded exactly as `plstitch extract` does.

    Writes per video <video>.csv (time_s, frame_index, predicted, a probability per class, progression) and
    a timeline <video>.png under --out; prints a JSON summary. The probe's encoder, preprocessing and fps
    are used; another model or preprocessing is refused.
    """
    # imported when run: the predict and probes packages pull in torchvision, torchcodec and timm (measured
    # +10 s or more on a 6 to 7 s start-up of `plstitch --help`, 2 busy cores)
    from rich.text import Text

    from plstitch_eval.predict import (
        PredictOptions,
        check_outputs,
        describe,
        load_probe_encoder,
        predict_decoding,
        predict_videos,
        run_online,
        sources_from_dataset,
        sources_from_paths,
        videos_in_folder,
    )
    from plstitch_eval.probes import load_probe
    from plstitch_eval.utils.console import console, error_console, print_error, progress_bar
    from plstitch_eval.utils.io import write_json_output

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
        overwrite=overwrite,
        progression=progression,
        trust_pickle=trust_pickle,
    )
    _check_inputs(videos or [], root, dataset, labels or [], out, online, follow_timeout)
    probe = load_probe(probe_dir)
    if dataset is not None:
        names = [v.strip() for v in only.split(",") if v.strip()] if only else None
        sources = sources_from_dataset(dataset, root, probe.class_names, split, names, split_scheme)
    else:
        paths = list(videos or []) or [str(p) for p in videos_in_folder(root)]
        sources = sources_from_paths(paths, probe.class_names, labels or [], labels_fps)
    if out is not None:
        check_outputs(out, [s.name for s in sources], overwrite)  # before the model loads
    model = load_probe_encoder(probe, options)
    console.print(Text(describe(probe, model)), soft_wrap=True, highlight=False)

    if online:
        several = len(sources) > 1

        def emit(update) -> None:
            typer.echo(update.line(with_video=several))

        decoding = predict_decoding(probe, model, sources, options)
        if decoding.on_cuda or (decoder == "torchcodec" and any(s.source is None for s in sources)):
            note = (
                " --online decodes files on the CPU, frame by frame; a stream on stdin, or a recording "
                "still being written, is read by PyAV"
            )
            console.print(Text.assemble(("note:", "yellow"), note), soft_wrap=True, highlight=False)
        try:
            summary = run_online(
                probe,
                model,
                sources,
                out,
                emit,
                overwrite=overwrite,
                decoding=decoding,
                follow_s=options.follow_timeout,
            )
        except KeyboardInterrupt as exc:  # a second Ctrl-C or SIGTERM: stopped at once
            signum = getattr(exc, "signum", signal.SIGINT)  # `online.StopNow` says which signal
            where = "" if out is None else f"; {out} holds the videos that had ended"
            said = f"{stopped_verb(signum)} twice: stopped at once, the video in hand is not written{where}"
            error_console.print(
                Text(said),
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(code=128 + int(signum)) from None
    else:
        with progress_bar() as bar:
            task = bar.add_task("predict", total=len(sources))
            summary = predict_videos(
                probe, model, sources, out, options, on_video=lambda _: bar.update(task, advance=1)
            )
    if json_path is not None or not online:
        write_json_output(json_path or "-", summary.to_dict())
    if json_path is not None and str(json_path) != "-":
        console.print(Text(f"summary written to {json_path}"), highlight=False)
    for failure in summary.failed:
        print_error(failure.error)  # names the file
    if summary.interrupted:
        error_console.print(Text(interrupted_line(summary)), highlight=False, soft_wrap=True)
        raise typer.Exit(code=summary.exit_code)  # 130 (Ctrl-C) or 143 (SIGTERM)
    if not summary.ok:
        raise typer.Exit(code=1)


def stopped_verb(signum: int | None) -> str:
    """How a stop signal is named on stderr: `terminated` (SIGTERM) or `interrupted` (Ctrl-C)."""
    return "terminated" if signum == signal.SIGTERM else "interrupted"


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
    return f"{at}; wrote {video.files['csv']} and {video.files['png']}"


def _check_inputs(
    videos: list[str],
    root: Path | None,
    dataset: str | None,
    labels: list[Path],
    out: Path | None,
    online: bool,
    follow_timeout: float | None = None,
) -> None:
    """One way to name the inputs; --out unless online; stdin and --follow-timeout only online."""
    if dataset is None and videos and root is not None:
        raise ConfigError("Give VIDEO arguments or --root DIR, not both.")
    if dataset is None and not videos and root is None:
        raise ConfigError(
            "Nothing to predict: give VIDEO arguments, --root DIR, or --dataset NAME --root DIR."
        )
    if dataset is not None and videos:
        raise ConfigError(
            "--dataset takes its videos from the dataset; name them with --videos, not arguments."
        )
    if labels and not videos:
        raise ConfigError(
            "--labels go with VIDEO arguments (one per video); --dataset brings its own labels."
        )
    if "-" in videos and not online:
        raise ConfigError("Reading stdin (-) needs --online; or save the stream to a file first.")
    if follow_timeout is not None and not online:
        raise ConfigError("--follow-timeout goes with --online (it follows a recording as it is written).")
    if out is None and not online:
        raise ConfigError(
            "--out is required (the folder for <video>.csv and <video>.png); --online may omit it."
        )


def register(app: typer.Typer) -> None:
    """Add `plstitch predict` to the app."""
    app.command("predict")(predict)

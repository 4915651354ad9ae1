"""A predict run over many videos, and what it did (`PredictSummary`).

Offline (`predict_videos`), the videos go through extraction's own decoding pipeline (`extract.make_loader`:
the same frame sampling, uint8 crops, batches, pinned host memory and on-device normalisation), so a video's
features equal the ones `plstitch extract` stores for it, and the probe's outputs equal the evaluation path's
(a probe of `--crop-black-margin` features gets each new video's own black border found and cut the same way).
Online (`run_online`), each video is followed frame by frame (`online.predict_online`). Each video gets its
CSV and timeline figure (`outputs`) as soon as it ends; a video that fails to decode is reported, the others
go on. Ctrl-C or SIGTERM in an online run ends the video in hand with what was seen (written as any other) and
the run.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from plstitch_eval.data.decoders import PYAV, Decoding, recorded_decoder
from plstitch_eval.errors import ConfigError, DecodeError
from plstitch_eval.extract import VideoJob, default_workers, make_loader, run_decoding
from plstitch_eval.extract.chunks import FrameChunk
from plstitch_eval.predict.backbones import as_encoders, spec_names
from plstitch_eval.predict.case import CasePrediction, case_prediction
from plstitch_eval.predict.encoder import ProbeEncoder
from plstitch_eval.predict.heads import video_outputs
from plstitch_eval.predict.online import STOPPED, OnlineUpdate, StopRequest, predict_online
from plstitch_eval.predict.options import PredictOptions
from plstitch_eval.predict.out_console import SecondLines
from plstitch_eval.predict.out_csv import CsvOut, write_result  # noqa: F401 - write_result: its old home
from plstitch_eval.predict.outputs import VideoPrediction, check_outputs
from plstitch_eval.predict.pipeline import Callbacks, FrameSink, Outputs
from plstitch_eval.predict.probeset import ProbeSet, as_probe_set
from plstitch_eval.predict.sources import VideoSource
from plstitch_eval.probes import Probe


def apply_probe(
    probe: Probe,
    model: ProbeEncoder,
    source: VideoSource,
    features: np.ndarray,
    frame_times: np.ndarray,
    wall_seconds: float,
) -> VideoPrediction:
    """The probe (and the temporal head) on one whole video's features: classes, or a regression probe's
    minutes."""
    return VideoPrediction(
        video=source.name,
        source=source.shown,
        frame_times=np.asarray(frame_times, dtype=np.float64),
        **video_outputs(probe, features, frame_times),
        task=probe.task_name if probe.is_regression else None,
        progression=model.progression(features),
        labels=source.ground_truth(frame_times),
        wall_seconds=wall_seconds,
    )


def apply_probes(
    probes: ProbeSet,
    model: ProbeEncoder,
    source: VideoSource,
    features: np.ndarray | Sequence[np.ndarray],
    frame_times: np.ndarray,
    wall_seconds: float,
) -> VideoPrediction | CasePrediction:
    """`apply_probe`, or with several probes each on its backbone's features (`CasePrediction`; `features`
    a list, one per backbone, when they are on several); the progression is the first backbone's."""
    first = features[0] if isinstance(features, (list, tuple)) else features
    if probes.single:
        return apply_probe(probes.first, model, source, first, frame_times, wall_seconds)
    times = np.asarray(frame_times, dtype=np.float64)
    return case_prediction(
        probes, features, model.progression(first), video=source.name, source=source.shown,
        frame_times=times, labels=source.ground_truth(times), wall_seconds=wall_seconds,
    )  # fmt: skip


def run_title(probes: ProbeSet, model: ProbeEncoder | Sequence[ProbeEncoder], online: bool) -> str:
    """The figures' title: `linear probe on MODEL (2 fps)`, or the probes' prefixes when several (and each
    backbone's model, `A + B`, when they are on several)."""
    what = f"{probes.first.kind} probe" if probes.single else f"probes {', '.join(probes.prefixes)}"
    on = spec_names(as_encoders(model, probes))
    return f"{what} on {on} ({probes.first.fps:g} fps{', online' if online else ''})"


@dataclass
class VideoFailure:
    """A video that could not be decoded."""

    video: str
    source: str
    error: str


@dataclass
class PredictSummary:
    """What a run did: the probe (the first of several), the encoder, one prediction per finished video, the
    failures; `probes`: all the run's probes."""

    probe: Probe
    model: ProbeEncoder
    out: Path | None
    predictions: list[VideoPrediction | CasePrediction]
    failed: list[VideoFailure]
    online: bool = False
    interrupted: bool = False  # Ctrl-C or SIGTERM stopped the run (online)
    stop_signal: int | None = None  # the signal that stopped it (None: not stopped, or stopped by hand)
    probes: ProbeSet | None = None  # None: `probe` alone

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def interrupted_video(self) -> VideoPrediction | CasePrediction | None:
        """The video Ctrl-C or SIGTERM stopped (online), if any: it holds the frames seen until then."""
        return next((p for p in self.predictions if p.ended in STOPPED.values()), None)

    @property
    def signal_name(self) -> str | None:
        """`SIGINT` or `SIGTERM` when a signal stopped the run (a stop asked by hand reads as SIGINT)."""
        if not self.interrupted:
            return None
        return signal.Signals(self.stop_signal or signal.SIGINT).name

    @property
    def exit_code(self) -> int | None:
        """128 + the signal that stopped the run, as a shell reports it (130 Ctrl-C, 143 SIGTERM); None
        when it was not stopped."""
        return None if not self.interrupted else 128 + int(self.stop_signal or signal.SIGINT)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (printed on stdout, or written by --json); with several probes, `probes` lists
        each (its prefix, name, kind, task, classes or columns) and each video holds each probe's summary."""
        names = self.probe.class_names
        if self.probes is not None and not self.probes.single:
            which: dict[str, Any] = {"probes": [probe_entry(x, p) for x, p in self.probes.named()]}
        else:
            which = {
                "probe": self.probe.name,
                "probe_folder": str(self.probe.folder),
                "kind": self.probe.kind,
            }
        return {
            **which,
            "encoder": self.model.spec,
            "runtime": self.model.runtime,
            "fps": self.probe.fps,
            "class_names": list(names),
            "progression": self.model.progression_head is not None,
            "online": self.online,
            "out": None if self.out is None else str(self.out),
            "ok": self.ok,
            "interrupted": self.interrupted,
            "signal": self.signal_name,
            "videos": [p.summary(names) for p in self.predictions],
            "failed": [vars(f) for f in self.failed],
        }


def probe_entry(prefix: str, probe: Probe) -> dict[str, Any]:
    """One probe of a several-probe summary: the prefix its columns carry and what it is."""
    return {
        "prefix": prefix,
        "probe": probe.name,
        "probe_folder": str(probe.folder),
        "kind": probe.kind,
        "task": probe.task_name,
        "class_names": list(probe.class_names),
        "columns": probe.value_columns if not probe.gives_classes else [],
        "encoder": probe.encoder.get("spec"),
    }


def predict_videos(
    probe: Probe | ProbeSet,
    model: ProbeEncoder | Sequence[ProbeEncoder],
    sources: Sequence[VideoSource],
    out: str | Path,
    options: PredictOptions,
    on_video: Callable[[VideoPrediction | VideoFailure], None] | None = None,
) -> PredictSummary:
    """Decode, encode and classify every source with extraction's loader (each frame decoded once and
    encoded once per backbone, whatever the number of probes: `model` is a list, one encoder per backbone,
    when they are on several); write each video's CSV and figures as soon as its last frame is in. A video
    that fails to decode is reported, the others go on."""
    probes = as_probe_set(probe)
    probe = probes.first
    models = as_encoders(model, probes)
    model = models[0]
    if any(src.source is None for src in sources):
        raise ConfigError(
            "Reading stdin (-) or a live source needs --online; or save the stream to a file first."
        )
    check_outputs(out, [src.name for src in sources], options.overwrite, case_prefixes(probes))
    backbones = tuple(range(len(models)))
    jobs = [VideoJob(i, src.source, src.folder_fps, models=backbones) for i, src in enumerate(sources)]
    workers = default_workers(model.device) if options.num_workers is None else options.num_workers
    decoding = predict_decoding(probe, model, sources, options)
    plans = model.plan if len(models) == 1 else [m.plan for m in models]
    loader = make_loader(jobs, plans, options.batch_size, workers, model.device, decoding=decoding)
    pending: dict[int, VideoChunks] = {}
    margins: dict[int, dict[str, float]] = {}  # the black-margin box each video was cut with
    done: dict[int, VideoPrediction | VideoFailure] = {}
    written = CsvOut(out, probes, run_title(probes, models, online=False))
    for chunk in loader:
        if chunk.video_index in done:  # the other backbones' error chunks of a failed video
            continue
        src = sources[chunk.video_index]
        got = pending.setdefault(chunk.video_index, VideoChunks(len(models)))
        if chunk.error is not None:
            pending.pop(chunk.video_index)
            done[chunk.video_index] = VideoFailure(src.name, src.shown, chunk.error)
        else:
            if chunk.margin is not None:
                margins[chunk.video_index] = chunk.margin
            got.add(chunk, models[chunk.model])
            if not got.complete:
                continue
            pending.pop(chunk.video_index)
            features = [torch.cat(f).cpu().numpy() for f in got.features]
            result = apply_probes(
                probes,
                model,
                src,
                features if len(models) > 1 else features[0],
                np.concatenate(got.times),
                time.perf_counter() - got.started,
            )
            for part in result.parts if isinstance(result, CasePrediction) else [result]:
                part.black_margin = margins.get(chunk.video_index)
            margins.pop(chunk.video_index, None)
            written.video(result)
            done[chunk.video_index] = result
        if on_video is not None:
            on_video(done[chunk.video_index])
    ordered = [done[i] for i in range(len(sources)) if i in done]
    return PredictSummary(
        probe,
        model,
        Path(out),
        [r for r in ordered if not isinstance(r, VideoFailure)],
        [r for r in ordered if isinstance(r, VideoFailure)],
        probes=probes,
    )


class VideoChunks:
    """One video's encoded chunks as they come, per backbone (a backbone's chunks come in order; the
    backbones' interleave); complete once every backbone's last chunk is in."""

    def __init__(self, backbones: int) -> None:
        self.features: list[list[torch.Tensor]] = [[] for _ in range(backbones)]
        self.times: list[np.ndarray] = []  # the first backbone's (all sample the same frames)
        self.ended: set[int] = set()
        self.started = time.perf_counter()

    def add(self, chunk: FrameChunk, model: ProbeEncoder) -> None:
        if len(chunk.images):
            self.features[chunk.model].append(model.encode(chunk.images))
            if chunk.model == 0:
                self.times.append(chunk.frame_times.numpy())
        if chunk.last:
            self.ended.add(chunk.model)

    @property
    def complete(self) -> bool:
        return len(self.ended) == len(self.features)


def predict_decoding(
    probe: Probe, model: ProbeEncoder, sources: Sequence[VideoSource], options: PredictOptions
) -> Decoding:
    """The decoding of a predict run: `options.decoder`, else the decoder the probe's features were made
    with (PyAV for probes that record none), resolved as extraction resolves it."""
    requested = options.decoder or recorded_decoder(probe.preprocessing)
    files = [src.source for src in sources if src.source is not None]
    return run_decoding(requested, options.decode_device, model.device, model.plan, files)


def case_prefixes(probes: ProbeSet) -> tuple[str, ...]:
    """The figure names' prefixes of a run's videos: none for one probe (`<video>.png`), else each probe's."""
    return () if probes.single else probes.prefixes


def run_online(
    probe: Probe | ProbeSet,
    model: ProbeEncoder | Sequence[ProbeEncoder],
    sources: Sequence[VideoSource],
    out: str | Path | None,
    emit: Callable[[OnlineUpdate], None],
    stream: IO[bytes] | None = None,
    overwrite: bool = False,
    decoding: Decoding = PYAV,
    follow_s: float = 0.0,
    on_frame: Callable[[dict[str, Any]], None] | None = None,
    on_image: Callable[[np.ndarray], None] | None = None,
    sink: FrameSink | None = None,
) -> PredictSummary:
    """`predict_online` on each source in turn (files still being written followed until quiet for
    `follow_s` seconds; live sources read newest frame first), each frame's predictions to the outputs
    (`pipeline`): the per-second line to `emit`, every frame's row to `on_frame`, its image to `on_image`,
    both and each finished video to `sink` (opened and closed by its owner: `--jsonl`, the page), and with
    `out` each video's CSV and figure when it ends (`out_csv`). Ctrl-C or SIGTERM ends the video in hand,
    whose outputs are written, and the run. Several probes share each frame's encoder pass, one per
    backbone (`model`: a list, one encoder per backbone)."""
    probes = as_probe_set(probe)
    models = as_encoders(model, probes)
    if out is not None:
        check_outputs(out, [src.name for src in sources], overwrite, case_prefixes(probes))
    predictions, failed = [], []
    written = CsvOut(out, probes, run_title(probes, models, online=True)) if out is not None else None
    outputs = Outputs([Callbacks(on_frame, on_image), sink, SecondLines(emit), written])
    with StopRequest() as stop:
        for src in sources:
            if stop.requested:
                break
            try:
                prediction = predict_online(
                    probes, models, src, None, stream, decoding, follow_s, stop, sink=outputs
                )
            except DecodeError as exc:
                failed.append(VideoFailure(src.name, src.shown, str(exc)))
                continue
            outputs.video(prediction)
            predictions.append(prediction)
    folder = None if out is None else Path(out)
    signum = stop.signum if stop.requested else None
    return PredictSummary(
        probes.first, models[0], folder, predictions, failed, online=True, interrupted=stop.requested,
        stop_signal=signum, probes=probes,
    )  # fmt: skip

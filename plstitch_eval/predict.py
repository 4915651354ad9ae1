"""`plstitch predict`: a saved probe on new videos, whose frames reach the encoder exactly as in extraction.

A probe records the features it was trained on (encoder spec + weights sha256, the store's preprocessing
record, fps); `load_probe_encoder` loads that encoder, rebuilds the frame plan and refuses (through
`probes.check_probe_matches`) an encoder or preprocessing that differs. Offline, the videos go through
extraction's own decoding pipeline (`extract.make_loader`: the same frame sampling, uint8 crops, batches,
pinned host memory and on-device normalisation, `encode_crops` the same precision), so a video's features
equal the ones `plstitch extract` stores for it, and the probe's outputs equal the evaluation path's (a probe
of `--crop-black-margin` features gets each new video's own black border found and cut the same way). Each
video gets `<video>.csv` (time, frame, predicted class, one probability column per class, and a
`progression` column when the encoder carries a PL-Stitch temporal head) and a timeline `<video>.png`.

Online (`predict_online`), frames are decoded one at a time from a file or a pipe and each is encoded and
classified as soon as it is decoded; a causal probe only (its output at t may use frames <= t). A framewise
probe (linear) looks at the new frame alone; any other causal probe is run again on the growing prefix
(output at t is then the offline output at t; cost O(t) per frame, O(T^2) per video).
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import av
import numpy as np
import torch
from matplotlib.patches import Patch

from plstitch_eval.analysis.progression import minmax_progress, score_frames
from plstitch_eval.analysis.style import ERROR_STRIP, UNLABELLED, class_colors, new_figure, save_figure
from plstitch_eval.analysis.timeline import segment_edges, segments
from plstitch_eval.data.datasets import VideoRecord, get_dataset, labels_at
from plstitch_eval.data.datasets.annotations import read_ground_truth, read_lines, read_phase_tsv
from plstitch_eval.data.datasets.base import natural_key
from plstitch_eval.data.decoders import (
    DECODER_FIELDS,
    PYAV,
    Decoding,
    check_decoder_options,
    read_frames,
    recorded_decoder,
)
from plstitch_eval.data.margin import detect_video_margin
from plstitch_eval.data.media import VIDEO_EXTENSIONS, is_video_file
from plstitch_eval.data.video import (
    DEFAULT_VIDEO_FPS,
    DecodedFrame,
    _frame_to_rgb,
    _TargetClock,
    _video_stream,
)
from plstitch_eval.data.video import probe as probe_video
from plstitch_eval.errors import CheckpointError, ConfigError, DecodeError, ModelNotFoundError
from plstitch_eval.extract import (
    VideoJob,
    default_workers,
    make_loader,
    preprocessing_record,
    run_decoding,
    select_videos,
)
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.temporal_head import load_temporal_head
from plstitch_eval.preprocess import TRANSFORMS, FramePlan, frame_plan, normalize_crops, prepare_frame
from plstitch_eval.probes import Probe, ProbeError, check_probe_matches
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.device import PRECISIONS, autocast, resolve_device, resolve_precision
from plstitch_eval.utils.io import write_text_atomic

STDIN = "-"  # the VIDEO argument that reads the stream piped into stdin
STDIN_NAME = "stdin"  # its name in outputs and the summary
PIPE_HINT = (
    "pipe a streamable container (MPEG-TS or Matroska, e.g. ffmpeg ... -f mpegts -); an MP4 keeps its "
    "index at its end, so pass it as a file"
)
FIXED_COLUMNS = ("time_s", "frame_index", "predicted")
PROGRESSION_COLUMN = "progression"
FRAMEWISE_KINDS = ("linear",)  # probe kinds whose output at t depends on frame t alone
PHASE_TSV_HEADER = ("Frame", "Phase")  # Cholec80-style label files; any other file: one class per line


# ------------------------------------------------------------------------------------------------ options


@dataclass
class PredictOptions:
    """Settings of one `plstitch predict` run, checked when made."""

    batch_size: int = 64  # frames per forward, as `plstitch extract` (same batches: same features)
    num_workers: int | None = None  # decoding workers (offline); None: as extraction chooses
    device: str = "auto"
    precision: str = "auto"  # auto = bf16 on CUDA, fp32 on CPU (extraction's default)
    overwrite: bool = False
    progression: bool | None = None  # None: a progression column when the encoder has a temporal head
    which: str = "teacher"
    trust_pickle: bool = False
    decoder: str | None = None  # pyav | torchcodec | auto; None: the decoder of the probe's features
    decode_device: str = "auto"  # as `plstitch extract --decode-device`

    def __post_init__(self) -> None:
        self.device = str(self.device)
        check_decoder_options(self.decoder or "auto", self.decode_device)
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {self.batch_size}.")
        if self.num_workers is not None and self.num_workers < 0:
            raise ConfigError(f"--num-workers must be >= 0, got {self.num_workers}.")
        if self.precision != "auto" and self.precision not in PRECISIONS:
            known = " | ".join(["auto", *PRECISIONS])
            raise ConfigError(f"--precision must be {known}, got {self.precision!r}.")


# ------------------------------------------------------------------------------------------------ sources


@dataclass(frozen=True)
class VideoSource:
    """One input: its name in the outputs, its file or frame folder (None: stdin) and optional labels
    (class ids at `label_fps`, from a `--labels` file or a dataset's annotations)."""

    name: str
    source: Path | None
    labels: np.ndarray | None = None
    label_fps: float | None = None
    folder_fps: float | None = None

    @property
    def shown(self) -> str:
        """How messages name the input."""
        return STDIN_NAME if self.source is None else str(self.source)

    def ground_truth(self, frame_times: np.ndarray) -> np.ndarray | None:
        """Labels at the sampled frame times (step floor(t * label_fps)); -1 past the annotations."""
        if self.labels is None or self.label_fps is None:
            return None
        record = VideoRecord(self.name, self.source or Path(STDIN), self.labels, self.label_fps)
        labels, _ = labels_at(record, frame_times)
        out = np.full(len(frame_times), -1, dtype=np.int64)
        out[: len(labels)] = labels
        return out


def videos_in_folder(root: str | Path) -> list[Path]:
    """The video files (extraction's extensions) directly in `root`, in natural order."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ConfigError(f"{root}: --root is not a folder; pass the folder holding the videos.")
    found = [p for p in root.iterdir() if p.is_file() and is_video_file(p)]
    if not found:
        raise ConfigError(f"{root}: holds no video file ({' '.join(VIDEO_EXTENSIONS)}); pass another --root.")
    return sorted(found, key=lambda p: natural_key(p.name))


def read_labels(path: str | Path, class_names: Sequence[str]) -> np.ndarray:
    """Class ids of a label file: Cholec80-style `Frame<TAB>Phase` TSV (header first), else MS-TCN ground
    truth (one class name per line); names must be the probe's classes."""
    path = Path(path).expanduser()
    class_index = {name: i for i, name in enumerate(class_names)}
    lines = read_lines(path)
    if lines and tuple(lines[0].split()) == PHASE_TSV_HEADER:
        return read_phase_tsv(path, class_index)
    return read_ground_truth(path, class_index)


def sources_from_paths(
    videos: Sequence[str | Path],
    class_names: Sequence[str],
    labels: Sequence[str | Path] = (),
    label_fps: float | None = None,
) -> list[VideoSource]:
    """Inputs named on the command line (`-` = stdin), each with its `--labels` file when given (in order).

    Labels are one per frame at `label_fps`, default the video's own frame rate (as Cholec80's files are).
    """
    if labels and len(labels) != len(videos):
        raise ConfigError(
            f"--labels was given {len(labels)} time(s) for {len(videos)} video(s); give one label file per "
            "video, in the same order."
        )
    if label_fps is not None and not label_fps > 0:
        raise ConfigError(f"--labels-fps must be > 0, got {label_fps}.")
    sources = []
    for i, video in enumerate(videos):
        if str(video) == STDIN:
            path = None
        else:
            path = Path(video).expanduser()
            check_video(path)
        labels_file = labels[i] if labels else None
        if labels_file is None:
            sources.append(VideoSource(STDIN_NAME if path is None else path.stem, path))
            continue
        if path is None and label_fps is None:
            raise ConfigError("--labels for stdin (-) needs --labels-fps (the rate of the label rows).")
        ids = read_labels(labels_file, class_names)
        rate = label_fps if label_fps is not None else _native_fps(path)
        sources.append(VideoSource(STDIN_NAME if path is None else path.stem, path, ids, rate))
    check_unique_names(sources)
    return sources


def sources_from_dataset(
    dataset: str,
    root: str | Path | None,
    class_names: Sequence[str],
    split: str | None = None,
    videos: Sequence[str] | None = None,
    scheme: str | None = None,
) -> list[VideoSource]:
    """A dataset's videos (a split of it, or the named ones) with their annotations as ground truth; the
    dataset's classes must be the probe's."""
    adapter = get_dataset(dataset, root=root)
    records = select_videos(adapter, split, videos, scheme)
    if list(adapter.class_names) != list(class_names):
        raise ConfigError(
            f"Dataset {dataset!r} has classes {list(adapter.class_names)} but the probe predicts "
            f"{list(class_names)}; use a probe trained on {dataset} or leave --dataset out."
        )
    return [VideoSource(r.name, Path(r.source), r.labels, r.label_fps, r.folder_fps) for r in records]


def check_video(path: Path) -> None:
    """Refuse a missing file or one FFmpeg cannot open as a video (one line naming it); frame folders pass
    when they hold images."""
    if not path.exists():
        raise DecodeError(f"{path}: no such video file or frame folder; check the path.")
    probe_video(path)  # opens the container (or lists the folder): DecodeError naming the file


def check_unique_names(sources: Sequence[VideoSource]) -> None:
    """Two inputs may not write the same `<name>.csv`."""
    seen: dict[str, str] = {}
    for src in sources:
        if src.name in seen:
            raise ConfigError(
                f"{seen[src.name]} and {src.shown} would both write {src.name}.csv; predict them into "
                "different --out folders."
            )
        seen[src.name] = src.shown


def _native_fps(path: Path | None) -> float:
    info = probe_video(path) if path is not None else None
    if info is None or not info.fps > 0:
        raise ConfigError(f"{path}: states no frame rate; pass --labels-fps.")
    return float(info.fps)


# ------------------------------------------------------------------------------------------------ outputs


def output_paths(out: str | Path, name: str) -> tuple[Path, Path]:
    """(`OUT/<name>.csv`, `OUT/<name>.png`)."""
    out = Path(out)
    return out / f"{name}.csv", out / f"{name}.png"


def check_outputs(out: str | Path, names: Sequence[str], overwrite: bool) -> None:
    """Refuse an `--out` that is a file, and existing output files unless `overwrite` (checked before any
    model loads)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; --out must be a folder (new or existing).")
    if overwrite:
        return
    existing = [str(p) for name in names for p in output_paths(out, name) if p.exists()]
    if existing:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise ConfigError(
            f"{existing[0]}{more} exists; pass --overwrite to replace, or choose another --out."
        )


def probability_columns(class_names: Sequence[str]) -> list[str]:
    """One column per class, named by the class (`p(<name>)` where a name would clash with another column)."""
    taken = {*FIXED_COLUMNS, PROGRESSION_COLUMN}
    return [f"p({name})" if name in taken else name for name in class_names]


# ---------------------------------------------------------------------------------------------- prediction


@dataclass
class VideoPrediction:
    """The probe's outputs on one video: per sampled frame its time, class probabilities [T, C], predicted
    class, progression (None without a temporal head) and ground truth (None without labels)."""

    video: str
    source: str
    frame_times: np.ndarray
    probabilities: np.ndarray
    predicted: np.ndarray
    progression: np.ndarray | None = None
    labels: np.ndarray | None = None
    wall_seconds: float = 0.0
    files: dict[str, str] = field(default_factory=dict)

    @property
    def frames(self) -> int:
        return len(self.frame_times)

    def summary(self, class_names: Sequence[str]) -> dict[str, Any]:
        """JSON-ready per-video summary: frames, seconds covered, class share, segments, files (and
        accuracy against the ground truth when there is one)."""
        edges = segment_edges(self.frame_times)
        counts = np.bincount(self.predicted, minlength=len(class_names)) if self.frames else []
        out: dict[str, Any] = {
            "video": self.video,
            "source": self.source,
            "frames": self.frames,
            "seconds": round(float(edges[-1] - edges[0]), 6) if self.frames else 0.0,
            "wall_seconds": self.wall_seconds,
            "class_share": {
                name: float(counts[i] / self.frames) for i, name in enumerate(class_names) if counts[i]
            },
            "segments": [
                {
                    "class": class_names[c],
                    "start_s": round(float(edges[s]), 6),
                    "end_s": round(float(edges[e]), 6),
                    "frames": e - s,
                }
                for s, e, c in segments(self.predicted)
            ],
        }
        if self.labels is not None:
            labelled = self.labels >= 0
            correct = (self.predicted == self.labels)[labelled]
            out["accuracy"] = float(correct.mean() * 100) if correct.size else None
            out["labelled_frames"] = int(labelled.sum())
        out["files"] = dict(self.files)
        return out


def csv_text(prediction: VideoPrediction, class_names: Sequence[str]) -> str:
    """The per-frame CSV: time_s, frame_index (sample number at the probe's fps), predicted class name, a
    probability per class (shortest repr: reads back to the same float32), progression if any."""
    handle = io.StringIO()
    writer = csv.writer(handle, lineterminator="\n")
    header = [*FIXED_COLUMNS, *probability_columns(class_names)]
    if prediction.progression is not None:
        header.append(PROGRESSION_COLUMN)
    writer.writerow(header)
    for i, time_s in enumerate(prediction.frame_times):
        row = [f"{time_s:.6f}", i, class_names[int(prediction.predicted[i])]]
        row += [repr(float(p)) for p in prediction.probabilities[i]]
        if prediction.progression is not None:
            row.append(f"{prediction.progression[i]:.6f}")
        writer.writerow(row)
    return handle.getvalue()


def plot_prediction(prediction: VideoPrediction, class_names: Sequence[str], title: str):
    """Timeline figure: prediction ribbon (ground truth above it and an error strip when labelled, as in
    `analysis.timeline`), then the class probabilities stacked over time with the progression curve."""
    colors = class_colors(len(class_names))
    edges = segment_edges(prediction.frame_times)
    fig = new_figure(9.0, 3.6 if prediction.labels is not None else 3.2)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1.0, 1.4]})
    rows = [(1.0, prediction.predicted, "prediction")]
    if prediction.labels is not None:
        rows.insert(0, (2.0, prediction.labels, "ground truth"))
        wrong = (prediction.labels != prediction.predicted) & (prediction.labels >= 0)
        for s, e, c in segments(wrong.astype(np.int64)):
            if c:
                top.broken_barh([(edges[s], edges[e] - edges[s])], (0.05, 0.3), facecolors=ERROR_STRIP)
    for y, labels, _ in rows:
        for s, e, c in segments(labels):
            color = UNLABELLED if c < 0 else colors[c]
            top.broken_barh([(edges[s], edges[e] - edges[s])], (y - 0.4, 0.8), facecolors=color)
    ticks = [(y, name) for y, _, name in rows]
    if prediction.labels is not None:
        ticks.append((0.2, "errors"))
    top.set_yticks([y for y, _ in ticks], [name for _, name in ticks])
    top.set_ylim(0.0 if prediction.labels is not None else 0.55, max(y for y, _ in ticks) + 0.45)
    top.set_title(title, loc="left")
    steps = np.repeat(edges, 2)[1:-1]  # hold each frame's probabilities over its interval
    bottom.stackplot(steps, np.repeat(prediction.probabilities.T, 2, axis=1), colors=colors, linewidth=0)
    if prediction.progression is not None:
        centres = prediction.frame_times
        bottom.plot(centres, prediction.progression, color="black", lw=1.2, label=PROGRESSION_COLUMN)
        bottom.legend(loc="upper left", frameon=False)
    bottom.set_ylim(0.0, 1.0)
    bottom.set_xlim(edges[0], edges[-1])
    bottom.set_ylabel("probability")
    bottom.set_xlabel("time (s)")
    handles = [Patch(color=colors[i], label=name) for i, name in enumerate(class_names)]
    if prediction.labels is not None:
        handles.append(Patch(color=ERROR_STRIP, label="wrong prediction"))
    ncol = min(len(handles), 4)
    fig.legend(handles=handles, loc="lower center", ncol=ncol, frameon=False)
    legend_inches = 0.25 * int(np.ceil(len(handles) / ncol)) + 0.15
    fig.set_figheight(fig.get_figheight() + legend_inches)
    fig.tight_layout(rect=(0, legend_inches / fig.get_figheight(), 1, 1))
    return fig


def write_prediction(
    prediction: VideoPrediction, probe: Probe, out: str | Path, title: str
) -> dict[str, str]:
    """Write `<video>.csv` and `<video>.png` under `out`, each atomically; returns their paths."""
    csv_path, png_path = output_paths(out, prediction.video)
    write_text_atomic(csv_path, csv_text(prediction, probe.class_names))
    save_figure(plot_prediction(prediction, probe.class_names, title), png_path)
    prediction.files = {"csv": str(csv_path), "png": str(png_path)}
    return prediction.files


# ------------------------------------------------------------------------------------------------ encoder


@dataclass
class ProbeEncoder:
    """The probe's encoder, ready to turn frames into the probe's features: frame plan, device, precision,
    and the temporal head scoring progression (None without one)."""

    encoder: Any
    plan: FramePlan
    device: torch.device
    precision: str
    progression_head: Any = None

    @property
    def spec(self) -> str:
        return str(self.encoder.provenance.get("spec"))

    def encode(self, crops: torch.Tensor) -> torch.Tensor:
        """uint8 crops (or windows) -> float32 features on the device (see `encode_crops`)."""
        return encode_crops(self.encoder, crops, self.plan, self.device, self.precision)

    def progression(self, features: np.ndarray) -> np.ndarray | None:
        """Min-max normalised temporal-head progress of one video's features, or None without a head."""
        if self.progression_head is None or not len(features):
            return None
        return minmax_progress(score_frames(features, self.progression_head, device=self.device))


@torch.inference_mode()
def encode_crops(
    encoder: Any, crops: torch.Tensor, plan: FramePlan, device: torch.device, precision: str
) -> torch.Tensor:
    """One batched forward as extraction runs it: uint8 to the device (asynchronously from pinned memory),
    normalised there, under the precision's autocast; float32 features, left on the device."""
    x = normalize_crops(crops.to(device, non_blocking=True), plan)
    with autocast(device, precision):
        features = encoder(x)
    return features.float()


def load_probe_encoder(probe: Probe, options: PredictOptions) -> ProbeEncoder:
    """Load the encoder the probe records and rebuild extraction's frame plan at the probe's fps; refuse
    (`ProbeError`, one line naming both) weights or preprocessing other than the probe's.

    A store made with `--transform` recorded another crop mode than the model's own: the encoder is then
    loaded with the transform that gives the recorded preprocessing.
    """
    spec = probe.encoder.get("spec")
    if not spec:
        raise ProbeError(
            f"probe {probe.folder}: records no encoder spec; save it again from a feature store."
        )
    if not probe.fps or probe.fps <= 0:
        raise ProbeError(f"probe {probe.folder}: records no frame rate (fps); save it again.")
    device = resolve_device(options.device)
    precision = resolve_precision(options.precision, device)
    load = {"device": str(device), "which": options.which, "trust_pickle": options.trust_pickle}
    encoder = load_encoder(spec, **load)
    wanted = probe.preprocessing if isinstance(probe.preprocessing, dict) else {}
    transform = _transform_for(encoder.data_config, wanted)
    if transform is not None:
        encoder = load_encoder(spec, transform=transform, **load)
    resize_on_decode, crop_black_margin = bool(wanted.get("resize_on_decode")), "crop_black_margin" in wanted
    plan = frame_plan(encoder.data_config, probe.fps, resize_on_decode, encoder.clip, crop_black_margin)
    record = preprocessing_record(encoder.data_config, plan)
    # the decoder is not held against a probe: decoders give the same frames, pixels within rounding
    record.update({key: wanted[key] for key in DECODER_FIELDS if key in wanted})
    _check_matches(probe, spec, encoder, record)
    head = _progression_head(spec, encoder.feature_dim, device, options)
    return ProbeEncoder(encoder, plan, device, precision, head)


def _check_matches(probe: Probe, spec: str, encoder: Any, record: dict[str, Any]) -> None:
    """`check_probe_matches` with predict's fix: its own names `--model`, which predict does not take (it
    loads the probe's recorded spec), so the fix clause after the last `; ` is replaced."""
    try:
        check_probe_matches(probe, spec, encoder.provenance.get("sha256"), record)
    except ProbeError as exc:
        text = str(exc).rstrip(".")
        cut = text.rfind("; ")
        fix = (
            f"the encoder at {spec} is not the one the probe was trained with: restore its weights and "
            f"preprocessing (or point encoder.spec in {probe.folder}/probe.json at them), or save a new "
            "probe from features of this encoder"
        )
        raise ProbeError(f"{text[:cut] if cut > 0 else text}; {fix}.") from None


def _transform_for(data_config: Any, wanted: dict[str, Any]) -> str | None:
    """The `--transform` name that turns the model's preprocessing into the recorded one (other crop mode),
    or None when the crop modes agree (any other difference is left for `check_probe_matches`)."""
    mode = wanted.get("crop_mode")
    if mode is None or mode == data_config.crop_mode:
        return None
    for name, crop_mode in TRANSFORMS.items():
        if crop_mode == mode and data_config.with_transform(name).to_dict().items() <= wanted.items():
            return name
    return None


def _progression_head(spec: str, feature_dim: int, device: torch.device, options: PredictOptions) -> Any:
    """The encoder's PL-Stitch temporal head, if it has one (asked for: must have), else None."""
    if options.progression is False:
        return None
    try:
        head = load_temporal_head(spec, device, trust_pickle=options.trust_pickle)
    except (CheckpointError, ModelNotFoundError) as exc:
        if options.progression:
            raise ConfigError(f"--progression: {exc}") from exc
        logger.debug("no temporal head behind %s (%s): no progression column", spec, exc)
        return None
    if head.config["in_dim"] != feature_dim:
        raise ConfigError(
            f"{spec}: its temporal head takes {head.config['in_dim']}-d features but the encoder gives "
            f"{feature_dim}-d; pass --no-progression."
        )
    return head


def apply_probe(
    probe: Probe,
    model: ProbeEncoder,
    source: VideoSource,
    features: np.ndarray,
    frame_times: np.ndarray,
    wall_seconds: float,
) -> VideoPrediction:
    """The probe (and the temporal head) on one whole video's features."""
    return VideoPrediction(
        video=source.name,
        source=source.shown,
        frame_times=np.asarray(frame_times, dtype=np.float64),
        probabilities=probe.probabilities(features),
        predicted=probe.predict(features),
        progression=model.progression(features),
        labels=source.ground_truth(frame_times),
        wall_seconds=wall_seconds,
    )


def describe(probe: Probe, model: ProbeEncoder) -> str:
    """One line naming the probe, its classes, the encoder and the sampling."""
    return (
        f"{probe.kind} probe {probe.folder} ({probe.num_classes} classes) on {model.spec} features, "
        f"{probe.fps:g} fps, {model.device.type} {model.precision}"
    )


# ------------------------------------------------------------------------------------------------ offline


@dataclass
class VideoFailure:
    """A video that could not be decoded."""

    video: str
    source: str
    error: str


@dataclass
class PredictSummary:
    """What a run did: the probe, the encoder, one prediction per finished video, the failures."""

    probe: Probe
    model: ProbeEncoder
    out: Path | None
    predictions: list[VideoPrediction]
    failed: list[VideoFailure]
    online: bool = False

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (printed on stdout, or written by --json)."""
        names = self.probe.class_names
        return {
            "probe": str(self.probe.folder),
            "kind": self.probe.kind,
            "encoder": self.model.spec,
            "fps": self.probe.fps,
            "class_names": list(names),
            "progression": self.model.progression_head is not None,
            "online": self.online,
            "out": None if self.out is None else str(self.out),
            "ok": self.ok,
            "videos": [p.summary(names) for p in self.predictions],
            "failed": [vars(f) for f in self.failed],
        }


def predict_videos(
    probe: Probe,
    model: ProbeEncoder,
    sources: Sequence[VideoSource],
    out: str | Path,
    options: PredictOptions,
    on_video: Callable[[VideoPrediction | VideoFailure], None] | None = None,
) -> PredictSummary:
    """Decode, encode and classify every source with extraction's loader; write each video's CSV and figure
    as soon as its last frame is in. A video that fails to decode is reported, the others go on."""
    if any(src.source is None for src in sources):
        raise ConfigError("Reading stdin (-) needs --online; or save the stream to a file first.")
    check_outputs(out, [src.name for src in sources], options.overwrite)
    jobs = [VideoJob(i, src.source, src.folder_fps) for i, src in enumerate(sources)]
    workers = default_workers(model.device) if options.num_workers is None else options.num_workers
    decoding = predict_decoding(probe, model, sources, options)
    loader = make_loader(jobs, model.plan, options.batch_size, workers, model.device, decoding=decoding)
    pending: dict[int, tuple[list[torch.Tensor], list[np.ndarray], float]] = {}
    done: dict[int, VideoPrediction | VideoFailure] = {}
    title = f"{probe.kind} probe on {model.spec} ({probe.fps:g} fps)"
    for chunk in loader:
        src = sources[chunk.video_index]
        feats, times, started = pending.setdefault(chunk.video_index, ([], [], time.perf_counter()))
        if chunk.error is not None:
            pending.pop(chunk.video_index)
            done[chunk.video_index] = VideoFailure(src.name, src.shown, chunk.error)
        else:
            if len(chunk.images):
                feats.append(model.encode(chunk.images))
                times.append(chunk.frame_times.numpy())
            if not chunk.last:
                continue
            pending.pop(chunk.video_index)
            features = torch.cat(feats).cpu().numpy()
            result = apply_probe(
                probe, model, src, features, np.concatenate(times), time.perf_counter() - started
            )
            write_prediction(result, probe, out, f"{src.name}: {title}")
            done[chunk.video_index] = result
        if on_video is not None:
            on_video(done[chunk.video_index])
    ordered = [done[i] for i in range(len(sources)) if i in done]
    return PredictSummary(
        probe,
        model,
        Path(out),
        [r for r in ordered if isinstance(r, VideoPrediction)],
        [r for r in ordered if isinstance(r, VideoFailure)],
    )


def predict_decoding(
    probe: Probe, model: ProbeEncoder, sources: Sequence[VideoSource], options: PredictOptions
) -> Decoding:
    """The decoding of a predict run: `options.decoder`, else the decoder the probe's features were made
    with (PyAV for probes that record none), resolved as extraction resolves it."""
    requested = options.decoder or recorded_decoder(probe.preprocessing)
    files = [src.source for src in sources if src.source is not None]
    return run_decoding(requested, options.decode_device, model.device, model.plan, files)


# ------------------------------------------------------------------------------------------------- online


@dataclass(frozen=True)
class OnlineUpdate:
    """The prediction once per video second: time, sample number, class, its probability and the latency
    (wall time from the decoder handing the frame over to its prediction).

    No progression here: it is min-max normalised over the whole video (over a prefix the newest frame
    would always look the latest), so only the CSV written when the video ends holds it.
    """

    video: str
    time_s: float
    frame_index: int
    phase: str
    probability: float
    latency_s: float

    def line(self, with_video: bool = False) -> str:
        """`   12.0 s  Phase  p=0.83  latency=3.2 ms` (the video's name first when asked)."""
        video = f"{self.video}  " if with_video else ""
        return (
            f"{video}{self.time_s:7.1f} s  {self.phase}  p={self.probability:.2f}  "
            f"latency={self.latency_s * 1000:.1f} ms"
        )


def read_stream(file: IO[bytes], fps: float, size: int | None = None, name: str = STDIN_NAME):
    """Frames of a video container read from a file object (a pipe), sampled at `fps` by the same rule and
    clock as `read_frames`, as they are decoded (no packet pre-pass: a pipe is read once).

    Decoding is single-threaded: FFmpeg's frame threads would hold frames back (latency).
    """
    label = Path(f"<{name}>")
    try:
        container = av.open(file)
    except av.FFmpegError as exc:
        raise DecodeError(f"{name}: cannot open the stream ({exc}); {PIPE_HINT}.") from exc
    with container:
        stream = _video_stream(container, label)
        stream.thread_count = 1
        origin = stream.start_time
        rate = float(stream.average_rate or stream.guessed_rate or DEFAULT_VIDEO_FPS)
        clock = _TargetClock(fps)
        n_out = n_decoded = 0
        last_time: float | None = None
        try:
            for frame in container.decode(stream):
                if frame.pts is None or stream.time_base is None:
                    time_s = (last_time + 1.0 / rate) if last_time is not None else 0.0
                else:
                    origin = frame.pts if origin is None else origin
                    time_s = float((frame.pts - origin) * stream.time_base)
                last_time = time_s
                n_decoded += 1
                if clock.take(time_s):
                    yield DecodedFrame(n_out, time_s, _frame_to_rgb(frame, size, label))
                    n_out += 1
        except av.FFmpegError as exc:
            hint = PIPE_HINT if n_decoded == 0 else "the stream is corrupt or was cut"
            raise DecodeError(f"{name}: decoding failed after {n_decoded} frames ({exc}); {hint}.") from exc
        if n_decoded == 0:
            raise DecodeError(f"{name}: no frame could be decoded; {PIPE_HINT}.")


def stdin_binary() -> IO[bytes]:
    """Standard input as unbuffered bytes, so frames are decoded as soon as they arrive."""
    import sys

    buffer = getattr(sys.stdin, "buffer", sys.stdin)
    return getattr(buffer, "raw", buffer)


class _OnlineState:
    """Features and outputs of the frames decoded so far; the probe's output for the newest frame."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.framewise = probe.kind in FRAMEWISE_KINDS
        self.features: list[np.ndarray] = []
        self.probabilities: list[np.ndarray] = []
        self.predicted: list[int] = []

    def push(self, feature: np.ndarray) -> None:
        """Add frame t's feature and compute the probe's output at t (the new frame alone for a framewise
        probe; else the whole prefix, whose last row a causal probe gives exactly as offline)."""
        self.features.append(feature)
        window = feature[None] if self.framewise else np.stack(self.features)
        logits = self.probe.logits(window)
        self.probabilities.append(self.probe.probabilities(window)[-1])
        self.predicted.append(int(logits[-1].argmax()))


def online_plan(plan: FramePlan, source: VideoSource, decoding: Decoding = PYAV) -> FramePlan:
    """The frame plan of one video followed online: with the probe's black-margin crop, the video's own box,
    found on its first 64 s before the first frame is encoded (a pipe cannot be read ahead: refused)."""
    if not plan.crop_black_margin:
        return plan
    if source.source is None:
        raise ConfigError(
            "the probe's features were made with --crop-black-margin, whose box is found on a video's first "
            "64 s before its first frame: a pipe cannot be read ahead; save the stream to a file first."
        )
    box = detect_video_margin(source.source, folder_fps=source.folder_fps, threads=1, decoding=decoding)
    return replace(plan, margin=box)


def predict_online(
    probe: Probe,
    model: ProbeEncoder,
    source: VideoSource,
    emit: Callable[[OnlineUpdate], None],
    stream: IO[bytes] | None = None,
    decoding: Decoding = PYAV,
) -> VideoPrediction:
    """Follow one video as it decodes: encode each sampled frame at once, run the causal probe, `emit` an
    update at the first frame of every video second (every frame when they are further apart). A file is
    decoded on the CPU by `decoding`'s decoder; a pipe by PyAV."""
    if not probe.causal:
        raise ConfigError(
            f"probe {probe.folder} ({probe.kind}) is not causal: its output at a frame uses later frames, "
            "so it cannot run --online; drop --online to predict whole videos."
        )
    if model.plan.clip is not None:
        raise ConfigError(
            f"{model.spec} is a clip encoder: its window around a frame reaches into later frames, so it "
            "cannot run --online; drop --online."
        )
    plan = online_plan(model.plan, source, decoding)
    size = plan.resize if plan.resize_on_decode else None
    if source.source is None:
        frames = read_stream(stream if stream is not None else stdin_binary(), probe.fps, size)
    else:
        frames = read_frames(
            source.source,
            probe.fps,
            size,
            folder_fps=source.folder_fps,
            threads=1,
            decoding=decoding.on_cpu(),
        )
    state = _OnlineState(probe)
    times: list[float] = []
    started = time.perf_counter()
    last_second: int | None = None
    pin = model.device.type == "cuda"
    for frame in frames:
        decoded_at = time.perf_counter()
        crop = prepare_frame(frame.image, plan)[None]
        feature = model.encode(crop.pin_memory() if pin else crop)[0].cpu().numpy()
        state.push(feature)
        times.append(frame.time)
        second = int(np.floor(frame.time + 1e-6))
        if last_second is not None and second <= last_second:
            continue
        last_second = second
        probs = state.probabilities[-1]
        emit(
            OnlineUpdate(
                video=source.name,
                time_s=frame.time,
                frame_index=frame.index,
                phase=probe.class_names[state.predicted[-1]],
                probability=float(probs[state.predicted[-1]]),
                latency_s=time.perf_counter() - decoded_at,
            )
        )
    features = np.stack(state.features) if state.features else np.zeros((0, 0), np.float32)
    frame_times = np.asarray(times, dtype=np.float64)
    return VideoPrediction(
        video=source.name,
        source=source.shown,
        frame_times=frame_times,
        probabilities=np.stack(state.probabilities) if state.probabilities else np.zeros((0, 0)),
        predicted=np.asarray(state.predicted, dtype=np.int64),
        progression=model.progression(features),
        labels=source.ground_truth(frame_times),
        wall_seconds=time.perf_counter() - started,
    )


def run_online(
    probe: Probe,
    model: ProbeEncoder,
    sources: Sequence[VideoSource],
    out: str | Path | None,
    emit: Callable[[OnlineUpdate], None],
    stream: IO[bytes] | None = None,
    overwrite: bool = False,
    decoding: Decoding = PYAV,
) -> PredictSummary:
    """`predict_online` on each source in turn; with `out`, each video's CSV and figure when it ends."""
    if out is not None:
        check_outputs(out, [src.name for src in sources], overwrite)
    predictions, failed = [], []
    title = f"{probe.kind} probe on {model.spec} ({probe.fps:g} fps, online)"
    for src in sources:
        try:
            prediction = predict_online(probe, model, src, emit, stream, decoding)
        except DecodeError as exc:
            failed.append(VideoFailure(src.name, src.shown, str(exc)))
            continue
        if out is not None and prediction.frames:
            write_prediction(prediction, probe, out, f"{src.name}: {title}")
        predictions.append(prediction)
    return PredictSummary(probe, model, None if out is None else Path(out), predictions, failed, online=True)


__all__ = [
    "OnlineUpdate",
    "PredictOptions",
    "PredictSummary",
    "ProbeEncoder",
    "VideoPrediction",
    "VideoSource",
    "check_outputs",
    "csv_text",
    "encode_crops",
    "load_probe_encoder",
    "online_plan",
    "plot_prediction",
    "predict_decoding",
    "predict_online",
    "predict_videos",
    "read_labels",
    "read_stream",
    "run_online",
    "sources_from_dataset",
    "sources_from_paths",
    "videos_in_folder",
]

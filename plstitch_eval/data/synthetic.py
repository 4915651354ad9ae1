"""A deterministic synthetic procedural dataset in the Cholec80 layout (real MP4s, no download).

Each video runs through the 7 Cholec80 phases in order with random durations. Temporal order matters by
design: phases 1/2 (CalotTriangleDissection / ClippingCutting) and 5/6 (CleaningCoagulation /
GallbladderRetraction) are drawn from the *same* appearance distribution, so a single frame cannot tell them
apart by the tool; only a slowly evolving global state - an organ that shrinks and a tissue colour that drifts
with the procedure's progress - reveals where in the procedure a frame lies. Camera jitter, pixel noise,
flicker and per-video colours/positions keep frame-wise shortcuts out. Frames are synthesised with vectorised
numpy, encoded with libx264 (mpeg4 if unavailable) at 25 fps, and cached in ``$PLSTITCH_CACHE`` (else
``$XDG_CACHE_HOME/plstitch``, else ``~/.cache/plstitch``) under ``synthetic-v2-<hash of parameters>``, written
to a temporary folder then renamed.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import av
import numpy as np

from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES
from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import temp_dir_beside

VERSION = "v2"
PHASES = CHOLEC80_PHASES  # the synthetic videos are annotated with Cholec80's seven phases, in its layout
# mean share of the procedure per phase (Cholec80-like); each is scaled by a log-normal factor per video
PHASE_SHARES = np.array([0.06, 0.30, 0.14, 0.22, 0.08, 0.12, 0.08])
TOOL_OF_PHASE = [None, "grasper", "grasper", "hook", "grasper", "irrigator", "irrigator"]
PARAMS_FILE = "params.json"
PARALLEL_FROM_FRAMES = 10_000  # below this, starting worker processes costs more than it saves
CHUNK = 64  # frames rendered at once
JITTER = 3  # max camera shake in pixels
NOISE_BANK = 61  # pre-drawn noise frames, picked at random per frame
BAG_COLOUR = np.array([230, 220, 180], np.float32)
SPARK_COLOUR = np.array([255, 255, 240], np.float32)
TOOL_LOOKS = {  # colour, width in px; the grasper serves phases 1, 2 and 4, the irrigator phases 5 and 6
    "grasper": (np.array([190, 190, 205], np.float32), 2.2),
    "hook": (np.array([120, 125, 140], np.float32), 1.6),
    "irrigator": (np.array([60, 60, 70], np.float32), 2.8),
}


@dataclass(frozen=True)
class SyntheticConfig:
    """Everything that determines the generated files (hashed into the cache folder name)."""

    n_videos: int = 24
    size: int = 64
    seed: int = 0
    fps: int = 25
    min_seconds: float = 40.0
    max_seconds: float = 90.0

    def digest(self) -> str:
        """Short sha256 of the parameters and generator version."""
        text = json.dumps({"version": VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_root() -> Path:
    """The plstitch cache folder: $PLSTITCH_CACHE, else $XDG_CACHE_HOME/plstitch, else ~/.cache/plstitch."""
    if os.environ.get("PLSTITCH_CACHE"):
        return Path(os.environ["PLSTITCH_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "plstitch"


def generate_synthetic(
    root: str | os.PathLike | None = None,
    n_videos: int = 24,
    size: int = 64,
    seed: int = 0,
    fps: int = 25,
    min_seconds: float = 40.0,
    max_seconds: float = 90.0,
    workers: int | None = None,
) -> Path:
    """Write (or reuse) the synthetic dataset and return its folder.

    `workers` processes render videos in parallel (default: one per CPU, at most 4, for large sets);
    the output does not depend on it.

    `root=None` caches it under `cache_root()/synthetic-v2-<hash>`; an existing complete folder with the same
    parameters is reused. Layout: `videos/videoNN.mp4`, `phase_annotations/videoNN-phase.txt`, `params.json`.
    """
    config = SyntheticConfig(n_videos, size, seed, fps, float(min_seconds), float(max_seconds))
    _validate(config)
    target = (
        Path(root).expanduser()
        if root is not None
        else cache_root() / f"synthetic-{VERSION}-{config.digest()}"
    )
    params = {"version": VERSION, **asdict(config)}
    if (target / PARAMS_FILE).is_file():
        if json.loads((target / PARAMS_FILE).read_text()) != params:
            raise ConfigError(
                f"{target}: holds a synthetic dataset with other parameters; choose another --root"
            )
        return target
    if target.exists() and any(target.iterdir()):
        raise ConfigError(f"{target}: exists and is not a synthetic dataset; choose an empty or new folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    logger.info("generating synthetic dataset (%d videos, %d px) in %s", n_videos, size, target)
    tmp = temp_dir_beside(target)
    try:
        _write_dataset(tmp, config, workers)
        (tmp / PARAMS_FILE).write_text(json.dumps(params, indent=2) + "\n")
        try:
            if target.is_dir() and not any(target.iterdir()):
                target.rmdir()  # empty folder left by a caller
            os.rename(tmp, target)
        except OSError:
            if not (target / PARAMS_FILE).is_file():  # else a concurrent writer finished first: keep its copy
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _validate(config: SyntheticConfig) -> None:
    if config.n_videos < 1 or config.size < 16 or config.size % 2 or config.fps < 1:
        raise ConfigError("synthetic dataset needs n_videos >= 1, an even size >= 16 and fps >= 1")
    if not 0 < config.min_seconds <= config.max_seconds:
        raise ConfigError("synthetic dataset needs 0 < min_seconds <= max_seconds")


def _write_dataset(folder: Path, config: SyntheticConfig, workers: int | None) -> None:
    """Render, encode and annotate every video into `folder`, in worker processes when there are several."""
    (folder / "videos").mkdir()
    (folder / "phase_annotations").mkdir()
    n_frames = config.n_videos * config.fps * (config.min_seconds + config.max_seconds) / 2
    default = min(4, os.cpu_count() or 1) if n_frames > PARALLEL_FROM_FRAMES else 1
    n_workers = min(workers or default, config.n_videos)
    jobs = [(folder, config, v) for v in range(config.n_videos)]
    if n_workers <= 1:
        for job in jobs:
            _write_video(*job)
        return
    # spawn, not fork: the caller may hold threads (torch, FFmpeg) that a forked child would inherit locked
    with ProcessPoolExecutor(n_workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_write_video, *zip(*jobs, strict=True)))


def _write_video(folder: Path, config: SyntheticConfig, v: int) -> None:
    """Video number `v` (0-based): MP4 + Cholec80-format phase annotation, from its own seeded generator."""
    name = f"video{v + 1:02d}"
    rng = np.random.default_rng([config.seed, v])
    phases = phase_timeline(rng, config)
    with _Encoder(folder / "videos" / f"{name}.mp4", config.size, config.fps) as encoder:
        scene = _Scene(rng, config.size, phases)
        for start in range(0, len(phases), CHUNK):
            encoder.write(scene.render(np.arange(start, min(start + CHUNK, len(phases)))))
    rows = "".join(f"{i}\t{PHASES[p]}\n" for i, p in enumerate(phases))
    (folder / "phase_annotations" / f"{name}-phase.txt").write_text("Frame\tPhase\n" + rows)


def phase_timeline(rng: np.random.Generator, config: SyntheticConfig) -> np.ndarray:
    """Per-frame phase ids 0..6 in order, with random video length and log-normally varied phase shares."""
    n_frames = int(round(rng.uniform(config.min_seconds, config.max_seconds) * config.fps))
    shares = PHASE_SHARES * rng.lognormal(0.0, 0.25, size=len(PHASE_SHARES))
    bounds = np.round(np.cumsum(shares / shares.sum()) * n_frames).astype(np.int64)
    counts = np.maximum(np.diff(np.concatenate([[0], bounds])), 1)
    return np.repeat(np.arange(len(PHASES)), counts)


class _Scene:
    """Per-video random appearance; `render(frame_ids)` draws those frames as uint8 [B, H, W, 3].

    Static layers (tissue texture, distance to the organ centre) are drawn once on a canvas padded by the
    jitter range; each frame is an integer-shifted crop of it (camera shake), so rendering stays vectorised.
    """

    def __init__(self, rng: np.random.Generator, size: int, phases: np.ndarray) -> None:
        self.size, self.phases, n = size, phases, len(phases)
        self.progress = np.linspace(0.0, 1.0, n, dtype=np.float32)
        self.drift = rng.uniform([-60, 10, -10], [-40, 40, 20]).astype(np.float32)  # tissue colour change
        steps = rng.integers(-1, 2, size=(n, 2)) * (rng.random((n, 2)) < 0.15)
        self.jitter = np.clip(np.cumsum(steps, axis=0), -JITTER, JITTER)  # camera shake, integer px
        pad = size + 2 * JITTER
        yy, xx = np.mgrid[0:pad, 0:pad].astype(np.float32) - JITTER
        tissue = rng.uniform([150, 70, 60], [200, 110, 100]).astype(np.float32)
        texture = np.zeros((pad, pad), np.float32)
        for _ in range(3):
            fx, fy = rng.uniform(1, 4, 2) * 2 * np.pi / size
            texture += 8.0 * np.sin(fx * xx + fy * yy + rng.uniform(0, 2 * np.pi))
        self.background = tissue + texture[..., None]
        self.organ_centre = rng.uniform(0.35, 0.65, 2) * size
        self.organ_distance = np.hypot(xx - self.organ_centre[0], yy - self.organ_centre[1])
        self.organ_radius = rng.uniform(0.22, 0.3) * size
        low, high = self.organ_centre.min() - self.organ_radius, self.organ_centre.max() + self.organ_radius
        self.organ_box = slice(max(0, int(low) - JITTER - 2), min(size, int(high) + JITTER + 3))  # y and x
        self.organ_colour = rng.uniform([60, 120, 50], [110, 170, 90]).astype(np.float32)
        bag_centre = self.organ_centre + np.array([0.15 * size, -0.1 * size])
        self.bag = np.clip(0.5 - (np.hypot(xx - bag_centre[0], yy - bag_centre[1]) - 0.16 * size), 0, 1)
        self.tool_tip = self.organ_centre + np.clip(np.cumsum(rng.normal(0, 0.4, (n, 2)), axis=0), -8, 8)
        self.tool_base = {
            "grasper": rng.uniform([-0.1, 0.9], [0.2, 1.1]) * size,
            "hook": rng.uniform([0.9, 0.3], [1.1, 0.7]) * size,
            "irrigator": rng.uniform([0.3, -0.1], [0.7, 0.1]) * size,
        }
        self.flicker = rng.normal(1.0, 0.04, n).astype(np.float32)
        self.noise_bank = rng.normal(0.0, 6.0, (NOISE_BANK, size, size, 3)).astype(np.float32)
        self.noise_pick = rng.integers(0, NOISE_BANK, n)

    def render(self, ids: np.ndarray) -> np.ndarray:
        """Composite background, organ, bag and tool for frames `ids`, add noise; uint8 RGB."""
        size = self.size
        offsets = np.arange(size)
        image = np.empty((len(ids), size, size, 3), np.float32)
        distance = np.empty((len(ids), size, size), np.float32)
        bag = np.empty((len(ids), size, size), np.float32)
        for b, (dx, dy) in enumerate(self.jitter[ids] + JITTER):  # camera shake = shifted crop
            image[b] = self.background[dy : dy + size, dx : dx + size]
            distance[b] = self.organ_distance[dy : dy + size, dx : dx + size]
            bag[b] = self.bag[dy : dy + size, dx : dx + size]
        image += self.progress[ids, None, None, None] * self.drift
        radius = self.organ_radius * (1.0 - 0.55 * self.progress[ids])
        box = self.organ_box
        organ = np.clip(0.5 - (distance[:, box, box] - radius[:, None, None]), 0.0, 1.0)
        image[:, box, box] = _blend(image[:, box, box], organ, self.organ_colour)
        phases = self.phases[ids]
        packaging = np.flatnonzero(phases == 4)
        if len(packaging):
            image[packaging] = _blend(image[packaging], bag[packaging], BAG_COLOUR)
        tools = np.array([TOOL_OF_PHASE[p] or "" for p in phases])
        for tool, (colour, width) in TOOL_LOOKS.items():
            sel = np.flatnonzero(tools == tool)
            if not len(sel):
                continue
            tips = self.tool_tip[ids[sel]]
            ys, xs = _box(self.tool_base[tool], tips, width + JITTER + 3, size)
            x = (offsets[None, None, xs] + self.jitter[ids[sel], 0, None, None]).astype(np.float32)
            y = (offsets[None, ys, None] + self.jitter[ids[sel], 1, None, None]).astype(np.float32)
            part = image[sel, ys, xs]
            part = _blend(part, _segment(x, y, self.tool_base[tool], tips, width), colour)
            if tool == "hook":  # bright cautery tip
                spark = np.clip(2.5 - np.hypot(x - tips[:, 0, None, None], y - tips[:, 1, None, None]), 0, 1)
                part = _blend(part, spark, SPARK_COLOUR)
            image[sel, ys, xs] = part
        image *= self.flicker[ids, None, None, None]
        image += self.noise_bank[self.noise_pick[ids]]
        return np.clip(image, 0, 255).astype(np.uint8)


def _box(start: np.ndarray, ends: np.ndarray, margin: float, size: int) -> tuple[slice, slice]:
    """(rows, cols) slices of the image covering segments from `start` to every end, plus `margin`."""
    points = np.vstack([start[None], ends])
    low = np.clip(np.floor(points.min(axis=0) - margin), 0, size).astype(int)
    high = np.clip(np.ceil(points.max(axis=0) + margin) + 1, 0, size).astype(int)
    return slice(low[1], high[1]), slice(low[0], high[0])


def _segment(x: np.ndarray, y: np.ndarray, start: np.ndarray, ends: np.ndarray, width: float) -> np.ndarray:
    """Anti-aliased coverage of a thick segment from a fixed `start` to per-frame `ends` [B, 2]."""
    ex, ey = ends[:, 0, None, None] - start[0], ends[:, 1, None, None] - start[1]
    px, py = x - start[0], y - start[1]
    t = np.clip((px * ex + py * ey) / np.maximum(ex * ex + ey * ey, 1e-6), 0.0, 1.0)
    dist = np.sqrt((px - t * ex) ** 2 + (py - t * ey) ** 2) - width / 2
    return np.clip(0.5 - dist, 0.0, 1.0).astype(np.float32)


def _blend(image: np.ndarray, alpha: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Alpha-composite a flat colour over `image` [B, H, W, 3] in place with coverage `alpha` [B, H, W]."""
    image -= alpha[..., None] * (image - colour)
    return image


class _Encoder:
    """Write uint8 RGB frames to an MP4 at a constant rate (single-threaded x264: reproducible bytes)."""

    def __init__(self, path: Path, size: int, fps: int) -> None:
        self.container = av.open(str(path), mode="w")
        codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
        self.stream = self.container.add_stream(codec, rate=fps)
        self.stream.width = self.stream.height = size
        self.stream.pix_fmt = "yuv420p"
        if codec == "libx264":
            self.stream.options = {"preset": "ultrafast", "crf": "20", "threads": "1"}
        else:
            self.stream.options = {"qscale": "3", "threads": "1"}

    def write(self, frames: np.ndarray) -> None:
        for image in frames:
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            self.container.mux(self.stream.encode(frame))

    def __enter__(self) -> _Encoder:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.container.mux(self.stream.encode(None))
        finally:
            self.container.close()

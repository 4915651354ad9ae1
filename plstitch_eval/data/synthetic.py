"""A deterministic synthetic procedure in the Cholec80 layout (real MP4s, no download): synthetic v3.

Each video runs through the 7 Cholec80 phases in order with random durations, seen through a laparoscope:
a circular field of view with black corners; instruments entering from phase-typical sides; anatomy that
changes slowly and irreversibly (fat cleared, clips placed, duct cut, burn marks accumulating, gallbladder
freed, bagged and pulled out), so the order of frames is learnable; phases 1 and 3 use the same instruments
from the same sides and tools come and go, so single frames can look alike across phases; the camera pans by
at most ~3 px per 64, so frames 1.5-2.5 s apart show the same scene. docs/synthetic.md lists every cue and
the objective it exercises. Rendering is `synthetic_scene.Scene` (vectorised numpy); frames are encoded
with libx264 (mpeg4 if unavailable) at 25 fps, annotated with phases (every frame) and with the instruments
each frame shows (`tool_annotations/`, Cholec80's seven tools at 1 fps: the truth, as they are drawn), and
cached in ``$PLSTITCH_CACHE`` (else ``$XDG_CACHE_HOME/plstitch``, else ``~/.cache/plstitch``) under
``synthetic-v3-<hash of parameters>``, written to a temporary folder then renamed.
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

from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES, TOOL_DIR, TOOL_SUFFIX
from plstitch_eval.data.synthetic_scene import TOOL_COLUMNS, Scene
from plstitch_eval.errors import ConfigError, DataError
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import temp_dir_beside

VERSION = "v3"
PHASES = CHOLEC80_PHASES  # the synthetic videos are annotated with Cholec80's seven phases, in its layout
# mean share of the procedure per phase (Cholec80-like); each is scaled by a log-normal factor per video
PHASE_SHARES = np.array([0.06, 0.30, 0.14, 0.22, 0.08, 0.12, 0.08])
PARAMS_FILE = "params.json"
PARALLEL_FROM_FRAMES = 10_000  # below this, starting worker processes costs more than it saves
CHUNK = 100  # frames rendered at once
SKILL_DIR, SKILL_SUFFIX = "skill_annotations", "-skill.txt"
# JIGSAWS' six modified-OSATS parts, each rated 1-5; their sum is the global rating score (GRS, 6-30)
SKILL_PARTS = (
    "Respect for tissue",
    "Suture/needle handling",
    "Time and motion",
    "Flow of operation",
    "Overall performance",
    "Quality of final product",
)


@dataclass(frozen=True)
class CaseSkill:
    """A synthetic surgeon: `level` in [0, 1] (steadiness of the instruments) and six rating parts (1-5)."""

    level: float
    parts: tuple[int, ...]

    @property
    def grs(self) -> int:
        """The global rating score: the sum of the parts."""
        return int(sum(self.parts))


@dataclass(frozen=True)
class SyntheticConfig:
    """Everything that determines the generated files (hashed into the cache folder name)."""

    n_videos: int = 24
    size: int = 64
    seed: int = 0
    fps: int = 25
    min_seconds: float = 40.0
    max_seconds: float = 90.0
    paced: bool = False  # each case's pace (its length) shows in its anatomy, in every frame
    skilled: bool = False  # each case has a surgeon's skill score, which shows in how the instruments move

    def params(self) -> dict:
        """What params.json holds: the version and the fields; `paced` and `skilled` only when set, so a
        plain set's folder name and params.json are those of synthetic v3 before the options existed."""
        fields = asdict(self)
        for option in ("paced", "skilled"):
            if not fields[option]:
                del fields[option]
        return {"version": VERSION, **fields}

    def digest(self) -> str:
        """Short sha256 of the parameters and generator version."""
        text = json.dumps(self.params(), sort_keys=True)
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
    paced: bool = False,
    skilled: bool = False,
) -> Path:
    """Write (or reuse) the synthetic dataset and return its folder.

    `workers` processes render videos in parallel (default: one per CPU, at most 4, for large sets);
    the output does not depend on it. `paced=True` shows each case's pace - its length relative to
    `min_seconds`..`max_seconds` - in its anatomy (a longer case: a larger liver and gallbladder), so
    remaining time and anticipation are learnable from frames; all else is drawn as in the unpaced set.
    `skilled=True` gives each case a surgeon's skill (`case_skill`: a global rating score and its six parts,
    in `skill_annotations/`) that sets how steadily the instruments move; all else is drawn as without it.

    `root=None` caches it under `cache_root()/synthetic-v3-<hash>`; an existing complete folder with the same
    parameters is reused (a copy made before tool labels existed gets its `tool_annotations/` added). Layout:
    `videos/videoNN.mp4`, `phase_annotations/videoNN-phase.txt`, `tool_annotations/videoNN-tool.txt`,
    `params.json`.
    """
    config = SyntheticConfig(
        n_videos, size, seed, fps, float(min_seconds), float(max_seconds), bool(paced), bool(skilled)
    )
    _validate(config)
    target = (
        Path(root).expanduser()
        if root is not None
        else cache_root() / f"synthetic-{VERSION}-{config.digest()}"
    )
    params = config.params()
    if (target / PARAMS_FILE).is_file():
        stored = json.loads((target / PARAMS_FILE).read_text())
        for option in ("paced", "skilled"):
            if stored.get(option) is False:  # written by a caller with every field: the same set
                del stored[option]
        if stored != params:
            raise ConfigError(
                f"{target}: holds a synthetic dataset with other parameters; choose another --root"
            )
        if not (target / TOOL_DIR).is_dir():
            _add_tool_annotations(target, config)
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
    (folder / TOOL_DIR).mkdir()
    if config.skilled:
        (folder / SKILL_DIR).mkdir()
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
        scene = _scene(rng, config, phases, v)
        for start in range(0, len(phases), CHUNK):
            encoder.write(scene.render(np.arange(start, min(start + CHUNK, len(phases)))))
    rows = "".join(f"{i}\t{PHASES[p]}\n" for i, p in enumerate(phases))
    (folder / "phase_annotations" / f"{name}-phase.txt").write_text("Frame\tPhase\n" + rows)
    _write_tool_file(folder / TOOL_DIR / f"{name}{TOOL_SUFFIX}", scene, len(phases), config.fps)
    if config.skilled:
        _write_skill_file(folder / SKILL_DIR / f"{name}{SKILL_SUFFIX}", case_skill(config, v))


def _write_tool_file(path: Path, scene: Scene, n_frames: int, fps: int) -> None:
    """One video's Cholec80 tool file: `Frame` and the seven tools, a row per second (every `fps` frames)."""
    frames = np.arange(0, n_frames, fps)
    presence = scene.tool_presence(frames)
    rows = "".join(
        f"{f}\t" + "\t".join(str(int(v)) for v in row) + "\n" for f, row in zip(frames, presence, strict=True)
    )
    path.write_text("Frame\t" + "\t".join(TOOL_COLUMNS) + "\n" + rows)


def _add_tool_annotations(target: Path, config: SyntheticConfig) -> None:
    """Write the tool files of a dataset generated before they existed: each video's scene is rebuilt from its
    seed (no rendering; the videos are unchanged), into a temporary folder renamed into place."""
    tmp = temp_dir_beside(target / TOOL_DIR)
    try:
        for v in range(config.n_videos):
            rng = np.random.default_rng([config.seed, v])
            phases = phase_timeline(rng, config)
            scene = _scene(rng, config, phases, v)
            _write_tool_file(tmp / f"video{v + 1:02d}{TOOL_SUFFIX}", scene, len(phases), config.fps)
        try:
            os.rename(tmp, target / TOOL_DIR)
        except OSError:
            if not (target / TOOL_DIR).is_dir():  # else a concurrent run added them first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def phase_timeline(rng: np.random.Generator, config: SyntheticConfig) -> np.ndarray:
    """Per-frame phase ids 0..6 in order, with random video length and log-normally varied phase shares."""
    n_frames = int(round(rng.uniform(config.min_seconds, config.max_seconds) * config.fps))
    shares = PHASE_SHARES * rng.lognormal(0.0, 0.25, size=len(PHASE_SHARES))
    bounds = np.round(np.cumsum(shares / shares.sum()) * n_frames).astype(np.int64)
    counts = np.maximum(np.diff(np.concatenate([[0], bounds])), 1)
    return np.repeat(np.arange(len(PHASES)), counts)


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


def case_pace(config: SyntheticConfig, n_frames: int) -> float:
    """A case's pace in [0, 1]: where its length lies between `min_seconds` (0) and `max_seconds` (1)."""
    span = config.max_seconds - config.min_seconds
    if span <= 0:
        return 0.5
    return float(np.clip((n_frames / config.fps - config.min_seconds) / span, 0.0, 1.0))


def case_skill(config: SyntheticConfig, v: int) -> CaseSkill:
    """Video `v`'s surgeon: a skill in [0, 1] and the six rating parts (1-5) it earns, drawn from a stream
    of its own (seed, v, 1) so the video's other draws are those of the set without skill."""
    rng = np.random.default_rng([config.seed, v, 1])
    level = float(rng.uniform(0.0, 1.0))
    parts = np.clip(np.rint(1.0 + 4.0 * level + rng.normal(0.0, 0.5, len(SKILL_PARTS))), 1, 5)
    return CaseSkill(level, tuple(int(p) for p in parts))


def _write_skill_file(path: Path, skill: CaseSkill) -> None:
    """One video's skill file: the global rating score (sum of the parts, 6-30) and its six parts."""
    header = "\t".join(("GRS", *SKILL_PARTS))
    path.write_text(f"{header}\n" + "\t".join(str(x) for x in (skill.grs, *skill.parts)) + "\n")


def skill_key(part: str) -> str:
    """A rating part's key in a video's skill scores: `Suture/needle handling` -> `suture_needle_handling`."""
    return "_".join(part.lower().replace("/", " ").split())


def read_skill_file(path: Path) -> dict[str, float]:
    """A video's skill scores by key (`grs` and the six parts' `skill_key`s) from its skill file."""
    try:
        header, values = path.read_text().splitlines()[:2]
        scores = dict(zip(header.split("\t"), (float(x) for x in values.split("\t")), strict=True))
    except (OSError, ValueError) as exc:
        raise DataError(
            f"{path}: not a skill file (a header GRS<TAB>parts and one row of numbers): {exc}; "
            "delete the dataset folder to generate it again"
        ) from None
    return {"grs" if name == "GRS" else skill_key(name): value for name, value in scores.items()}


def _scene(rng: np.random.Generator, config: SyntheticConfig, phases: np.ndarray, v: int) -> Scene:
    """Video `v`'s scene; in a paced set its anatomy shows the case's pace, in a skilled set its instruments
    the surgeon's skill."""
    pace = case_pace(config, len(phases)) if config.paced else None
    skill = case_skill(config, v).level if config.skilled else None
    return Scene(rng, config.size, phases, float(config.fps), pace=pace, skill=skill)

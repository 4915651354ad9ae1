"""The `frames` section of a TrainConfig: which videos a run trains on, how their frames are decoded and kept.

(The data section; named `frames` on `TrainConfig` because `data` is one of its settings, the `--data` path.)
"""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_eval.errors import ConfigError
from plstitch_train.config.section import Section, require

DECODER_CHOICES = ("pyav", "torchcodec", "auto")  # as plstitch_eval.data.decoders (not imported: torch-free)
FRAME_STORES = ("lmdb", "raw")


@dataclass
class FramesConfig(Section):
    """Data source (`dataset` + `root` + `split`, or `data`), frame cache and decoding; checked on
    construction except the data source, which only `check_source` (a run about to start) requires."""

    NAME = "frames"

    dataset: str | None = None  # dataset adapter name (with `root`, `split`)
    root: str | None = None
    split: str | None = "train"
    data: str | None = None  # a folder of videos / frame folders, or a frames LMDB (authors' layout)
    cache_dir: str | None = None  # decoded-frame cache; default <out>/frame_cache
    frame_store: str = "lmdb"  # decoded frames kept as: "lmdb" (JPEG, authors' layout) or "raw" (uint8 .npy)
    jpeg_quality: int = 90  # JPEG quality of the "lmdb" frame store
    fps: float = 1.0  # frames per second decoded for training
    frame_size: int = 256  # shorter side of cached frames (pixels)
    decoder: str = "pyav"  # video decoder of the frame caches: pyav | torchcodec | auto (on the CPU)
    reverse_time: bool = False

    def __post_init__(self) -> None:
        require(
            self.frame_store in FRAME_STORES,
            f"frame_store must be one of {', '.join(FRAME_STORES)} (got {self.frame_store!r}).",
        )
        require(1 <= self.jpeg_quality <= 100, f"jpeg_quality must be in 1..100 (got {self.jpeg_quality}).")
        require(
            self.decoder in DECODER_CHOICES,
            f"decoder must be one of {', '.join(DECODER_CHOICES)} (got {self.decoder!r}).",
        )
        require(self.fps > 0, f"fps must be > 0 (got {self.fps}).")

    def check_source(self) -> None:
        """Exactly one data source: `data`, or `dataset` (with `root`, `split`)."""
        if (self.dataset is None) == (self.data is None):
            raise ConfigError("Give exactly one data source: --data DIR, or --dataset NAME with --root.")

"""What an extraction run is asked to do: its settings (`ExtractOptions`, checked when made) and the videos of
a dataset they select (`select_videos`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord
from plstitch_eval.data.decoders import check_decoder_options
from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.device import PRECISIONS


@dataclass
class ExtractOptions:
    """Settings of one extraction run (what `plstitch extract` exposes), checked when made."""

    fps: float | None = None  # None: the dataset's evaluation fps
    batch_size: int = 64
    num_workers: int | None = None  # None: a worker per core on CUDA, min(4, cores) on CPU
    device: str = "auto"  # auto | cpu | cuda | cuda:N (a torch.device is turned into its name)
    precision: str = "auto"  # auto = bf16 on CUDA, fp32 on CPU
    overwrite: bool = False
    fail_fast: bool = False
    videos: Sequence[str] | None = None  # None: every video of `split`
    split: str | None = None  # None: every video of the dataset
    split_scheme: str | None = None
    resize_on_decode: bool = False
    crop_black_margin: bool = False  # cut each video's black border first (plstitch_eval.data.margin)
    progress: bool = True
    decoder: str = "pyav"  # pyav | torchcodec | auto (plstitch_eval.data.decoders)
    decode_device: str = "auto"  # auto = the model's device for torchcodec, the CPU for pyav | cpu | cuda[:N]

    def __post_init__(self) -> None:
        self.device = str(self.device)
        check_decoder_options(self.decoder, self.decode_device)
        if self.fps is not None and not self.fps > 0:
            raise ConfigError(f"Extraction fps (--fps) must be > 0, got {self.fps}.")
        if self.batch_size < 1:
            raise ConfigError(f"Extraction batch_size (--batch-size) must be >= 1, got {self.batch_size}.")
        if self.num_workers is not None and self.num_workers < 0:
            raise ConfigError(f"Extraction num_workers (--num-workers) must be >= 0, got {self.num_workers}.")
        if self.precision != "auto" and self.precision not in PRECISIONS:
            known = " | ".join(["auto", *PRECISIONS])
            raise ConfigError(f"Extraction precision (--precision) must be {known}, got {self.precision!r}.")
        if isinstance(self.videos, str):
            raise ConfigError(f"Extraction videos must be a list of names, not the string {self.videos!r}.")


def select_videos(
    adapter: DatasetAdapter, split: str | None, videos: Sequence[str] | None, scheme: str | None = None
) -> list[VideoRecord]:
    """Records of `split` (all when None), narrowed to `videos` when given; unknown names are an error."""
    records = list(adapter.videos(split=split, scheme=scheme) if split else adapter.videos())
    if videos:
        by_name = {r.name: r for r in records}
        unknown = [v for v in videos if v not in by_name]
        if unknown:
            where = f" split {split!r}" if split else ""
            raise ConfigError(
                f"Unknown video(s) {unknown} in dataset {adapter.name!r}{where}; known: "
                f"{', '.join(sorted(by_name)[:20])}{' ...' if len(by_name) > 20 else ''}."
            )
        records = [by_name[v] for v in videos]
    return records

"""What an extraction run is asked to do: its settings (`ExtractOptions`, checked when made), the videos of
a dataset they select (`select_videos`) and, for a run over several encoders, each one's store
(`ExtractTarget`, named by `store_name`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord
from plstitch_eval.encode_options import EncodeOptions
from plstitch_eval.errors import ConfigError


@dataclass
class ExtractOptions(EncodeOptions):
    """Settings of one extraction run (what `plstitch extract` exposes), checked when made.

    The decoding and encoding settings (batch_size, num_workers, device, precision, decoder, decode_device)
    and their checks are `EncodeOptions`', shared with `plstitch predict`.
    """

    fps: float | None = None  # None: the dataset's evaluation fps
    overwrite: bool = False
    fail_fast: bool = False
    videos: Sequence[str] | None = None  # None: every video of `split`
    split: str | None = None  # None: every video of the dataset
    split_scheme: str | None = None
    resize_on_decode: bool = False
    crop_black_margin: bool = False  # cut each video's black border first (plstitch_eval.data.margin)
    progress: bool = True
    decoder: str = "pyav"  # pyav | torchcodec | auto (plstitch_eval.data.decoders)
    frames: str | Path | None = None  # a frame cache (`write-lmdb --eval-frames`) read instead of the videos
    redo: Sequence[str] | None = None  # videos extracted again even when their stored files check out

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.frames is not None:
            for flag, on in (
                ("--crop-black-margin", self.crop_black_margin),
                ("--resize-on-decode", self.resize_on_decode),
            ):
                if on:
                    raise ConfigError(
                        f"{flag} works on decoded video, not on a frame cache (--frames {self.frames}); "
                        "drop one of the two."
                    )
        if self.fps is not None and not self.fps > 0:
            raise ConfigError(f"Extraction fps (--fps) must be > 0, got {self.fps}.")
        for field, names in (("videos", self.videos), ("redo", self.redo)):
            if isinstance(names, str):
                raise ConfigError(f"Extraction {field} must be a list of names, not the string {names!r}.")

    def _named(self, field: str, flag: str) -> str:
        return f"Extraction {field} ({flag})"


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


def check_redo(records: Sequence[VideoRecord], redo: Sequence[str] | None) -> None:
    """Refuse `--redo` names that are not among the videos the run extracts (`records`)."""
    names = {r.name for r in records}
    unknown = [v for v in redo or () if v not in names]
    if unknown:
        raise ConfigError(
            f"--redo {', '.join(unknown)}: not among the videos this run extracts; known: "
            f"{', '.join(sorted(names)[:20])}{' ...' if len(names) > 20 else ''}."
        )


@dataclass(frozen=True)
class ExtractTarget:
    """One encoder of an extraction run (an Encoder or a model spec) and the store folder it writes; `name`
    labels it in logs and summaries."""

    encoder: Any
    out: Path
    name: str | None = None


def store_name(spec: str) -> str:
    """The folder name of a model's store in a run over several models: a registry name as it is, any other
    spec (hf-hub:ORG/NAME, a path) made filesystem-safe (`hf-hub_ORG_NAME`)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", str(spec)).strip("._")
    return name or "model"


def store_targets(specs: Sequence[str], out: Path) -> list[ExtractTarget]:
    """`out/<store_name(spec)>` for each spec; two specs with one folder name are refused."""
    targets: dict[str, ExtractTarget] = {}
    for spec in specs:
        name = store_name(spec)
        if name in targets:
            raise ConfigError(
                f"--model {targets[name].name!r} and --model {spec!r} would both write {out / name}; "
                "pass each model once (or extract them into separate --out folders)."
            )
        targets[name] = ExtractTarget(spec, out / name, spec)
    return list(targets.values())

"""Four short videos of plain colours (`clips/<video>.mp4`, `labels.json` {video: [split, [colour of each
second]]}), written on first use into the plstitch cache unless --root names a copy.

`toy-colours` is a plstitch dataset adapter from another package (`@register_dataset`). Every second of a
video shows one colour (its class) with a little noise, at 10 fps, 32x24 px; two videos train, two test.
Without `--root` the videos are written under the plstitch cache (`$PLSTITCH_CACHE/toy-colours`, as the
shipped `synthetic` dataset is); `write_toy_colours(DIR)` writes them anywhere. So `plstitch extract --dataset
toy-colours` works with nothing downloaded; `plstitch datasets` lists it (this docstring's first paragraph is
its layout line there).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord, register_dataset
from plstitch_eval.data.datasets.base import find_source

NAME = "toy-colours"
COLOURS = {"red": (200, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 200)}
# video -> (split, one colour per second); every colour is in train and in test
VIDEOS = {
    "toy1": ("train", ["red", "red", "green", "blue"]),
    "toy2": ("train", ["blue", "green", "green", "red"]),
    "toy3": ("test", ["green", "red", "blue", "blue"]),
    "toy4": ("test", ["red", "blue", "green"]),
}
VIDEO_FPS = 10
LABELS_FILE = "labels.json"


def write_toy_colours(root: str | os.PathLike) -> Path:
    """Write the four videos (H.264 MP4 through PyAV) and `labels.json` into `root`; returns `root`."""
    import av

    root = Path(root)
    (root / "clips").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for video, (_, colours) in VIDEOS.items():
        with av.open(str(root / "clips" / f"{video}.mp4"), mode="w") as container:
            stream = container.add_stream("libx264", rate=VIDEO_FPS)
            stream.width, stream.height, stream.pix_fmt = 32, 24, "yuv420p"
            for colour in colours:
                for _ in range(VIDEO_FPS):
                    noise = rng.integers(-20, 20, (24, 32, 3))
                    image = np.clip(np.array(COLOURS[colour]) + noise, 0, 255).astype(np.uint8)
                    container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
            container.mux(stream.encode(None))
    (root / LABELS_FILE).write_text(json.dumps(VIDEOS), encoding="utf-8")  # written last: marks it complete
    return root


def default_root() -> Path:
    """The generated copy: `toy-colours/` in the plstitch cache ($PLSTITCH_CACHE, else ~/.cache/plstitch)."""
    from plstitch_eval.data.synthetic import cache_root

    return cache_root() / NAME


@register_dataset(NAME)
class ToyColours(DatasetAdapter):
    """Toy videos of plain colours (plstitch-toy-plugin): 4 videos, 3 classes, 1 label a second."""

    name = NAME
    display_name = "Toy colours"
    class_names = list(COLOURS)
    native_fps = float(VIDEO_FPS)
    default_eval_fps = 1.0
    split_schemes = ("default",)

    def __init__(self, root: str | os.PathLike | None = None, fps: float | None = None) -> None:
        if root is None:
            root = default_root()  # $PLSTITCH_CACHE/toy-colours
            if not (root / LABELS_FILE).is_file():
                write_toy_colours(root)
        super().__init__(root, fps)
        self.table = json.loads((self.root / LABELS_FILE).read_text(encoding="utf-8"))

    def _load(self) -> list[VideoRecord]:
        index = self.class_index()
        return [
            VideoRecord(
                video, find_source(video, [self.root / "clips"]), np.array([index[c] for c in colours]), 1.0
            )
            for video, (_, colours) in self.table.items()
        ]

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        return {split: [n for n in names if self.table[n][0] == split] for split in ("train", "test")}

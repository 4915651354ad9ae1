"""A CholecT50 stand-in in the released layout whose frames show their triplets, extracted by `plstitch
extract` with the raw-pixels encoder: the store the triplet tests read (videos/VIDxx/000000.png at 1 fps,
labels/VIDxx.json with CAMMA's 15-number rows; the challenge split's video numbers)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_MAP
from tests.eval.data.media import index_image

# what a frame shows: (phase, triplet ids); each scene has its own grey level, noise blurs them
SCENES = [(0, [17]), (0, [17, 60]), (1, [77, 1]), (2, []), (3, [94]), (1, [60, 13])]
VIDEOS = {"train": (1, 15, 26, 40), "val": (5, 18), "test": (92, 96)}  # challenge-split numbers
FRAMES = 14
NULL_ROW = [-1] * 14  # a frame with no triplet: 14 numbers before the phase


def _row(triplet: int, phase: int) -> list[float]:
    """One instance: triplet, instrument + score + box, verb, target + score + box, phase."""
    _, i, v, t, _, _ = TRIPLET_MAP[triplet]
    return [triplet, i, 1.0, -1, -1, -1, -1, v, t, 1.0, -1, -1, -1, -1, phase]


def write_t50(root: Path, seed: int = 0) -> Path:
    """The stand-in's frames and label files; each frame a noisy picture of its scene."""
    rng = np.random.default_rng(seed)
    for number in (n for numbers in VIDEOS.values() for n in numbers):
        name = f"VID{number:02d}"
        folder = root / "videos" / name
        folder.mkdir(parents=True)
        scenes = rng.integers(0, len(SCENES), size=FRAMES)
        annotations = {}
        for f, scene in enumerate(scenes):
            noise = rng.normal(0, 50, size=(32, 32, 3))
            image = (index_image(int(scene) * 3).astype(np.float64) + noise).clip(0, 255).astype(np.uint8)
            Image.fromarray(image).save(folder / f"{f:06d}.png")
            phase, triplets = SCENES[scene]
            annotations[str(f)] = [_row(t, phase) for t in triplets] or [[*NULL_ROW, phase]]
        label = {"video": number, "fps": 1, "num_frames": FRAMES, "annotations": annotations}
        (root / "labels").mkdir(exist_ok=True)
        (root / "labels" / f"{name}.json").write_text(json.dumps(label))
    return root


def extract_t50(root: Path, out: Path, dataset: str = "cholect50") -> Path:
    """`plstitch extract` of the stand-in with the raw-pixels encoder (8x8x3 pixels per frame)."""
    args = ["extract", "--dataset", dataset, "--root", str(root), "--out", str(out),
            "--model", "raw-pixels", "--num-workers", "0", "--device", "cpu"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out

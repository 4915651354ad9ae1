"""The synthetic procedural dataset, read through the Cholec80 adapter; generated on first use."""

from __future__ import annotations

import os

from plstitch_eval.data.datasets.base import DatasetAdapter
from plstitch_eval.data.datasets.cholec80 import Cholec80
from plstitch_eval.data.datasets.registry import register_dataset


@register_dataset("synthetic")
class Synthetic(Cholec80):
    """Cholec80-format synthetic videos (see `plstitch_eval.data.synthetic`); 1 fps evaluation.

    Splits: "train-test" (default) puts the first two thirds of the videos in train (16/8 of 24);
    "train-val-test" moves the last quarter of those to val (12/4/8).
    """

    name = "synthetic"
    display_name = "Synthetic (plstitch procedural test data)"
    split_schemes = ("train-test", "train-val-test")

    def __init__(
        self,
        root: str | os.PathLike | None = None,
        fps: float | None = None,
        n_videos: int = 24,
        size: int = 64,
        seed: int = 0,
        min_seconds: float = 40.0,
        max_seconds: float = 90.0,
        workers: int | None = None,
    ) -> None:
        # imported here: the generator imports Cholec80's phase list from this package (no import cycle)
        from plstitch_eval.data.synthetic import generate_synthetic

        folder = generate_synthetic(
            root, n_videos, size, seed, min_seconds=min_seconds, max_seconds=max_seconds, workers=workers
        )
        Cholec80.__init__(self, folder, fps)

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        n_test = len(names) // 3
        n_train = len(names) - n_test
        n_val = n_train // 4 if scheme == "train-val-test" else 0
        return {
            "train": names[: n_train - n_val],
            "val": names[n_train - n_val : n_train],
            "test": names[n_train:],
        }


__all__ = ["DatasetAdapter", "Synthetic"]

"""The `sampling` section of a TrainConfig: the clips, context frames and augmentation each training item
is drawn with (`plstitch_train.sampling`, `plstitch_train.transforms`)."""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_train.config.section import Section, require


@dataclass
class SamplingConfig(Section):
    """Clip length and frame steps, clips per video by video length, the jigsaw context offsets."""

    NAME = "sampling"
    TUPLE_FIELDS = ("clip_length_bounds", "clips_per_video", "context_seconds", "local_crops_scale")

    clip_len: int = 8
    min_step: int = 1
    max_step: int = 20
    clip_length_bounds: tuple[int, int] = (240, 960)  # video lengths (frames) where the clip count steps up
    clips_per_video: tuple[int, int, int] = (60, 200, 300)  # < low, low..<high, >= high frames
    context_seconds: tuple[float, float] = (1.5, 2.5)
    jigsaw_neighbour_colour: bool = (
        False  # True: jitter p=0.3 + grayscale p=0.2 on past/future (authors' code)
    )
    # iBOT/DINO multi-crop: small crops whose CLS the student matches to the teacher's global CLS. The
    # authors' `--local_crops_number` defaults to 0 (PL-Stitch uses none); ImageNet iBOT, its start, used 10.
    local_crops: int = 0
    local_crops_scale: tuple[float, float] = (0.05, 0.4)
    local_crop_size: int = 0  # pixels; 0: 96/224 of img_size, rounded to whole patches

    def __post_init__(self) -> None:
        self._tuples()
        require(self.clip_len >= 2, f"clip_len must be >= 2 (got {self.clip_len}).")
        require(
            1 <= self.min_step <= self.max_step,
            f"need 1 <= min_step <= max_step (got {self.min_step}, {self.max_step}).",
        )
        require(self.local_crops >= 0, f"local_crops must be >= 0 (got {self.local_crops}).")
        require(self.local_crop_size >= 0, f"local_crop_size must be >= 0 (got {self.local_crop_size}).")
        low, high = self.local_crops_scale
        require(0 < low <= high <= 1, f"local_crops_scale must be 0 < MIN <= MAX <= 1 (got {low}, {high}).")
        low, high = self.context_seconds
        require(0 < low <= high, f"context_seconds must be 0 < MIN <= MAX (got {low}, {high}).")
        require(
            list(self.clip_length_bounds) == sorted(self.clip_length_bounds),
            f"clip_length_bounds must be ascending (got {self.clip_length_bounds}).",
        )
        require(min(self.clips_per_video) >= 1, f"clips_per_video must be >= 1 (got {self.clips_per_video}).")

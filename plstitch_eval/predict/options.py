"""The settings of one `plstitch predict` run (`PredictOptions`), checked when made."""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_eval.encode_options import EncodeOptions


@dataclass
class PredictOptions(EncodeOptions):
    """Settings of one `plstitch predict` run, checked when made.

    Frames are decoded and encoded as `plstitch extract` does: the `EncodeOptions` fields and checks are
    extraction's (same batches: same features); fps and preprocessing come from the probe.
    """

    overwrite: bool = False
    progression: bool | None = None  # None: a progression column when the encoder has a temporal head
    which: str = "teacher"
    trust_pickle: bool = False
    decoder: str | None = None  # pyav | torchcodec | auto; None: the decoder of the probe's features

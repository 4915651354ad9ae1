"""The settings of one `plstitch predict` run (`PredictOptions`), checked when made."""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_eval.encode_options import EncodeOptions
from plstitch_eval.errors import ConfigError

FOLLOW_TIMEOUT_S = 10.0  # --follow-timeout: a recording quiet for this long has ended
RUNTIMES = ("torch", "onnx")  # --runtime: the probe and encoder run by PyTorch, or by onnxruntime


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
    # --online: a file still being written is followed until no byte came for this long (0: never followed)
    follow_timeout: float = FOLLOW_TIMEOUT_S
    runtime: str = "torch"  # torch | onnx (an export folder of plstitch export-onnx)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.runtime not in RUNTIMES:
            raise ConfigError(f"--runtime must be one of {', '.join(RUNTIMES)}, got {self.runtime!r}.")
        if not self.follow_timeout >= 0:
            raise ConfigError(
                f"--follow-timeout must be >= 0 seconds (0: do not follow), got {self.follow_timeout}."
            )

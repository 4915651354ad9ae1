"""The settings of one `plstitch predict` run (`PredictOptions`), checked when made."""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_eval.data.decoders import check_decoder_options
from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.device import PRECISIONS


@dataclass
class PredictOptions:
    """Settings of one `plstitch predict` run, checked when made."""

    batch_size: int = 64  # frames per forward, as `plstitch extract` (same batches: same features)
    num_workers: int | None = None  # decoding workers (offline); None: as extraction chooses
    device: str = "auto"
    precision: str = "auto"  # auto = bf16 on CUDA, fp32 on CPU (extraction's default)
    overwrite: bool = False
    progression: bool | None = None  # None: a progression column when the encoder has a temporal head
    which: str = "teacher"
    trust_pickle: bool = False
    decoder: str | None = None  # pyav | torchcodec | auto; None: the decoder of the probe's features
    decode_device: str = "auto"  # as `plstitch extract --decode-device`

    def __post_init__(self) -> None:
        self.device = str(self.device)
        check_decoder_options(self.decoder or "auto", self.decode_device)
        if self.batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {self.batch_size}.")
        if self.num_workers is not None and self.num_workers < 0:
            raise ConfigError(f"--num-workers must be >= 0, got {self.num_workers}.")
        if self.precision != "auto" and self.precision not in PRECISIONS:
            known = " | ".join(["auto", *PRECISIONS])
            raise ConfigError(f"--precision must be {known}, got {self.precision!r}.")

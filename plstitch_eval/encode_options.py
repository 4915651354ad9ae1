"""`EncodeOptions`: how frames are decoded and encoded, shared by `extract`, `predict` and `benchmark`.

Why here and light: `ExtractOptions` and `PredictOptions` inherit these fields and their checks (one
`__post_init__`), and the CLI reads their defaults for its help texts at start-up, so this module imports
nothing heavy (see `_check_decoding`).
"""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.device import PRECISIONS


@dataclass
class EncodeOptions:
    """Decoding and encoding settings, checked when made (same batches: same features)."""

    batch_size: int = 64  # frames per forward
    num_workers: int | None = None  # decoding workers; None: a worker per core on CUDA, min(4, cores) on CPU
    device: str = "auto"  # auto | cpu | cuda | cuda:N (a torch.device is turned into its name)
    precision: str = "auto"  # auto = bf16 on CUDA, fp32 on CPU
    decoder: str | None = "pyav"  # pyav | torchcodec | auto (plstitch_eval.data.decoders)
    # auto = the model's device for torchcodec, and for pyav when its NVDEC decodes the first video; else
    # the CPU | cpu | cuda[:N]
    decode_device: str = "auto"

    def __post_init__(self) -> None:
        self.device = str(self.device)
        _check_decoding("auto" if self.decoder is None else self.decoder, self.decode_device)
        if self.batch_size < 1:
            raise ConfigError(
                f"{self._named('batch_size', '--batch-size')} must be >= 1, got {self.batch_size}."
            )
        if self.num_workers is not None and self.num_workers < 0:
            what = self._named("num_workers", "--num-workers")
            raise ConfigError(f"{what} must be >= 0, got {self.num_workers}.")
        if self.precision != "auto" and self.precision not in PRECISIONS:
            known = " | ".join(["auto", *PRECISIONS])
            raise ConfigError(
                f"{self._named('precision', '--precision')} must be {known}, got {self.precision!r}."
            )

    def _named(self, field: str, flag: str) -> str:
        """How an error names a setting: its flag (a subclass may say more, e.g. `Extraction fps (--fps)`)."""
        return flag

    def encoding(self) -> EncodeOptions:
        """These settings alone, without a subclass's others: what two runs must share to encode alike."""
        return EncodeOptions(
            batch_size=self.batch_size,
            num_workers=self.num_workers,
            device=self.device,
            precision=self.precision,
            decoder=self.decoder,
            decode_device=self.decode_device,
        )


def _check_decoding(decoder: str, decode_device: str) -> None:
    """`check_decoder_options` of plstitch_eval.data.decoders, imported when first needed."""
    # imported here: plstitch_eval.data.decoders pulls in torchvision and torchcodec, measured +6 to 8 s on a
    # 6 to 7 s start-up of `plstitch --help` (2 busy cores), and the CLI imports this module for its help
    from plstitch_eval.data.decoders import check_decoder_options

    check_decoder_options(decoder, decode_device)

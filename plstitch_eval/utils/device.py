"""Device and precision settings: fp32 on CPU (no native bf16 there), autocast on CUDA."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from plstitch_eval.errors import ConfigError

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Map "auto" to cuda when available else cpu; validate anything else."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:
        raise ConfigError(f"Unknown device {device!r}; use cpu, cuda, cuda:N or auto.") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"Device {device!r} asked for but CUDA is not available; use --device cpu.")
    return resolved


def resolve_precision(precision: str, device: torch.device) -> str:
    """Map "auto" to bf16 on CUDA and fp32 elsewhere; validate explicit choices."""
    if precision == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    if precision not in PRECISIONS:
        raise ConfigError(f"Unknown precision {precision!r}; choose one of auto, {', '.join(PRECISIONS)}.")
    return precision


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """Autocast context for `precision` on `device`; a no-op for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=PRECISIONS[precision])


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Temporarily set torch's intra-op thread count (`None`: leave it); restored afterwards.

    Why: small CPU ops run slower on several threads, and a thread count changes float rounding.
    """
    old = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)

"""plstitch_eval: load encoders, extract frozen features and evaluate them (PL-Stitch, CVPR 2026)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("plstitch")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

from plstitch_eval.errors import PlstitchError

__all__ = ["PlstitchError", "__version__"]

"""plstitch_train: PL-Stitch pretraining (losses, heads, masking, sampling, trainer) and publishing."""

from plstitch_eval import __version__

__all__ = ["__version__"]

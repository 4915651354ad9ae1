"""How many classes permutation classification may have, checked without torch (config and CLI time).

Why here: `TrainConfig` checks the clip length of the `permutation` objective when it is built, and the config
stays free of torch; `plstitch_train.permutations` (the torch side) re-exports these.
"""

from __future__ import annotations

import math

from plstitch_eval.errors import ConfigError

__all__ = ["MAX_PERMUTATION_CLASSES", "MAX_PERMUTATION_CLIP_LEN", "check_clip_len"]

MAX_PERMUTATION_CLIP_LEN = 8  # 8! = 40320 classes; 9! = 362880 is too many for a classifier
# the most classes of a sampled set: as many as every permutation of the longest clip
MAX_PERMUTATION_CLASSES = math.factorial(MAX_PERMUTATION_CLIP_LEN)


def check_clip_len(k: int, n_classes: int = 0) -> None:
    """Raise `ConfigError` unless a k-frame clip has the classes asked for.

    `n_classes` 0 (every permutation): 1 <= k <= MAX_PERMUTATION_CLIP_LEN (k! classes must stay
    classifiable). N > 0 (a sampled set): 2 <= N <= min(k!, MAX_PERMUTATION_CLASSES), any clip length.
    """
    if n_classes == 0:
        if not 1 <= k <= MAX_PERMUTATION_CLIP_LEN:
            raise ConfigError(
                f"permutation classification needs 1 <= clip_len <= {MAX_PERMUTATION_CLIP_LEN} "
                f"(got {k}: {math.factorial(k) if k > 0 else 0} classes); "
                "use --objective pl or pairwise for longer clips, or set permutation_classes to classify "
                "a sampled set of permutations"
            )
        return
    if not 2 <= n_classes <= MAX_PERMUTATION_CLASSES:
        raise ConfigError(
            f"permutation_classes must be 0 (every permutation) or 2..{MAX_PERMUTATION_CLASSES} "
            f"(got {n_classes})"
        )
    if k < 1 or n_classes > math.factorial(k):
        total = math.factorial(k) if k > 0 else 0
        raise ConfigError(
            f"permutation_classes {n_classes} exceeds the {total} permutations of clip_len {k}; "
            f"set permutation_classes <= {total} (or 0 for all of them) or a longer clip_len"
        )

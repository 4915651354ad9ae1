"""Per-video label arrays checked and made comparable, before any frame or segment metric reads them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from plstitch_eval.errors import EvaluationError


def as_label_lists(
    preds: Sequence[np.ndarray] | np.ndarray,
    gts: Sequence[np.ndarray] | np.ndarray,
    videos: Sequence[str] | None = None,
    bg_classes: Iterable = (),
) -> tuple[list[np.ndarray], list[np.ndarray], list[str], list[int]]:
    """Validate per-video label arrays (one flat array = one video); return int64 lists and background ids.

    String labels (MS-TCN ground-truth files) are mapped to ids by sorted name, background names likewise.
    """
    if isinstance(preds, np.ndarray) and preds.ndim == 1:
        preds, gts = [preds], [np.asarray(gts)]
    if len(preds) and np.ndim(preds[0]) == 0:  # one video given as a plain list of labels
        preds, gts = [np.asarray(preds)], [np.asarray(gts)]
    preds, gts = [np.asarray(x) for x in preds], [np.asarray(x) for x in gts]
    bg = list(bg_classes)
    if any(x.dtype.kind not in "iub" for x in preds + gts if x.size):
        vocab = np.unique(np.concatenate([x.astype(str) for x in preds + gts]))
        preds = [np.searchsorted(vocab, x.astype(str)) for x in preds]
        gts = [np.searchsorted(vocab, x.astype(str)) for x in gts]
        bg = [int(np.searchsorted(vocab, str(b))) for b in bg if str(b) in set(vocab.tolist())]
    names = list(videos) if videos is not None else [f"#{i}" for i in range(len(gts))]
    if len(preds) != len(gts) or len(names) != len(gts):
        raise EvaluationError(
            f"{len(preds)} prediction sequences, {len(gts)} ground-truth sequences and {len(names)} video "
            "names; pass one of each per video."
        )
    out_p, out_g = [], []
    for name, p, g in zip(names, preds, gts, strict=True):
        p, g = np.asarray(p).reshape(-1), np.asarray(g).reshape(-1)
        if len(p) != len(g):
            raise EvaluationError(
                f"Video {name!r}: {len(p)} predicted labels but {len(g)} ground-truth labels; "
                "predictions must have one label per ground-truth frame."
            )
        out_p.append(p.astype(np.int64, copy=False))
        out_g.append(g.astype(np.int64, copy=False))
    return out_p, out_g, names, [int(b) for b in bg]

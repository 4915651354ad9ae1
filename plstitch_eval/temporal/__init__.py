"""The temporal model: an MS-TCN (optionally causal, TeCNO-style) trained on frozen per-frame features.

``mstcn.py`` the network and its loss, ``fit.py`` training with epoch selection on validation videos; both
sit below ``protocols/`` (its CV folds use them) and ``probes/``. The protocol on a feature store
(splits -> fit -> test metrics -> results JSON) is ``plstitch_eval/protocols/temporal.py``, above both.
"""

from plstitch_eval.temporal.fit import (
    TemporalConfig,
    TemporalProbeResult,
    fit_temporal,
    predict_video,
    video_logits,
)
from plstitch_eval.temporal.mstcn import MultiStageTCN, mstcn_loss

__all__ = [
    "MultiStageTCN",
    "TemporalConfig",
    "TemporalProbeResult",
    "fit_temporal",
    "mstcn_loss",
    "predict_video",
    "video_logits",
]

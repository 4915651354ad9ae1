"""plstitch_eval: load encoders, extract frozen features and evaluate them (PL-Stitch, CVPR 2026)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("plstitch")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

from plstitch_eval.errors import PlstitchError
from plstitch_eval.utils.moved import alias_modules

# old module paths (README, docs, saved code) -> their homes; each old name gives the new module itself
MOVED_MODULES = {
    "plstitch_eval.hub.clip_models": "plstitch_eval.hub.architectures.clip_models",
    "plstitch_eval.hub.dinov3": "plstitch_eval.hub.architectures.dinov3",
    "plstitch_eval.hub.models_general": "plstitch_eval.hub.families.general",
    "plstitch_eval.hub.models_plstitch": "plstitch_eval.hub.families.plstitch",
    "plstitch_eval.hub.models_surgical": "plstitch_eval.hub.families.surgical",
    "plstitch_eval.hub.models_video": "plstitch_eval.hub.families.video",
    "plstitch_eval.hub.pixels": "plstitch_eval.hub.architectures.pixels",
    "plstitch_eval.hub.timesformer": "plstitch_eval.hub.architectures.timesformer",
    "plstitch_eval.hub.video_blocks": "plstitch_eval.hub.architectures.video_blocks",
    "plstitch_eval.hub.videomae_vit": "plstitch_eval.hub.architectures.videomae_vit",
    "plstitch_eval.hub.vjepa2": "plstitch_eval.hub.architectures.vjepa2",
    "plstitch_eval.hub.temporal_head": "plstitch_eval.hub.ranking_head",
    "plstitch_eval.temporal_protocol": "plstitch_eval.protocols.temporal",
    "plstitch_eval.tool_presence": "plstitch_eval.protocols.tools",
    "plstitch_eval.features": "plstitch_eval.store.features",
    "plstitch_eval.store_repair": "plstitch_eval.store.repair",
    "plstitch_eval.store_locks": "plstitch_eval.store.locks",
    "plstitch_eval.knn": "plstitch_eval.knn_vote",
    "plstitch_eval.linear": "plstitch_eval.linear_grid",
}
alias_modules(MOVED_MODULES)

__all__ = ["MOVED_MODULES", "PlstitchError", "__version__"]

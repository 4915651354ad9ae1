"""The feature store: one safetensors file per video and a manifest (`features`), the locks of its concurrent
writers (`locks`), and how damage is noticed and mended (`repair`). docs/extract.md.

`FeatureStore` and `VideoFeatures` are importable from here; the old paths `plstitch_eval.features`,
`plstitch_eval.store_locks` and `plstitch_eval.store_repair` still import, with a DeprecationWarning.
"""

from plstitch_eval.store.features import FeatureStore, VideoFeatures

__all__ = ["FeatureStore", "VideoFeatures"]

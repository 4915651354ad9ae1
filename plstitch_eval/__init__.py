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
    "plstitch_eval.hub.temporal_head": "plstitch_eval.hub.ranking_head",
    "plstitch_eval.temporal_protocol": "plstitch_eval.protocols.temporal",
    "plstitch_eval.tool_presence": "plstitch_eval.protocols.tools",
}
alias_modules(MOVED_MODULES)

__all__ = ["MOVED_MODULES", "PlstitchError", "__version__"]

"""plstitch_train: PL-Stitch pretraining (losses, heads, masking, sampling, trainer) and publishing."""

from plstitch_eval import __version__
from plstitch_eval.utils.moved import alias_modules

# old module paths (README, docs, saved code) -> their homes; each old name gives the new module itself
MOVED_MODULES = {
    "plstitch_train.checkpoint": "plstitch_train.run.checkpoint",
    "plstitch_train.run_dir": "plstitch_train.run.plan",
    "plstitch_train.run_log": "plstitch_train.run.log",
    "plstitch_train.run_progress": "plstitch_train.run.status",
    "plstitch_train.rng": "plstitch_train.run.rng",
    "plstitch_train.signals": "plstitch_train.run.signals",
    "plstitch_train.progress": "plstitch_train.run.progress",
    "plstitch_train.collapse_monitor": "plstitch_train.monitors.collapse",
    "plstitch_train.knn_monitor": "plstitch_train.monitors.knn",
    "plstitch_train.collapse_probe": "plstitch_train.monitors.collapse_probe",
    "plstitch_train.export": "plstitch_train.publishing.export",
    "plstitch_train.cards": "plstitch_train.publishing.cards",
    "plstitch_train.publish": "plstitch_train.publishing.publish",
}
alias_modules(MOVED_MODULES)

__all__ = ["MOVED_MODULES", "__version__"]

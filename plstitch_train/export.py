"""Export a run or checkpoint as a timm folder: old import path; the code is in plstitch_train/publishing/
(`plstitch_train.publishing.export`). Kept because README.md documented `plstitch_train.export`.
"""

# the new module's own `__all__`: this old path never lists the names a second time
from plstitch_train.publishing.export import *  # noqa: F403
from plstitch_train.publishing.export import __all__  # noqa: F401

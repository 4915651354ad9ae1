"""Push an exported folder to the Hub: old import path; the code is in plstitch_train/publishing/
(`plstitch_train.publishing.publish`). Kept because README.md documented `plstitch_train.publish`.
"""

# the new module's own `__all__`: this old path never lists the names a second time
from plstitch_train.publishing.publish import *  # noqa: F403
from plstitch_train.publishing.publish import __all__  # noqa: F401

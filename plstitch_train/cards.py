"""Model cards: old import path; the code is in plstitch_train/publishing/ (`publishing.cards`).
Kept because docs/baselines.md and model_cards/README.md named `plstitch_train.cards`.
"""

# the new module's own `__all__`: this old path never lists the names a second time
from plstitch_train.publishing.cards import *  # noqa: F403
from plstitch_train.publishing.cards import __all__  # noqa: F401

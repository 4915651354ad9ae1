"""`python -m plstitch_train` was the torchrun entry of `train`; it now only says where that moved.

Why: one entry point for every command (`python -m plstitch_eval`); this shim imports nothing of the CLI.
"""

import sys

MESSAGE = (
    "`python -m plstitch_train` was replaced by `python -m plstitch_eval train` "
    "(torchrun: `torchrun ... -m plstitch_eval train ...`)"
)

if __name__ == "__main__":
    print(MESSAGE, file=sys.stderr)
    sys.exit(2)

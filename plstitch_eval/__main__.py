"""`python -m plstitch_eval COMMAND ...` is `plstitch COMMAND ...`: the entry point for torchrun.

Why: `torchrun ... -m plstitch_eval extract|train ...` runs every rank through the same app, so options,
`--debug`/`--quiet` and the one-line errors behave exactly as in `plstitch`.
"""

from plstitch_eval.cli import main

if __name__ == "__main__":
    main(prog_name="python -m plstitch_eval")

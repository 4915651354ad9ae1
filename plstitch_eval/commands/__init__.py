"""CLI command groups; each module exposes `register(app)` and holds only argument parsing.

Library imports sit inside the command functions, on purpose: `plstitch --help` (and every command) imports
all these modules, and the library behind them (torch, timm, decoders, scikit-learn, the trainer) costs
seconds, measured 13 s against 0.5 s for `import plstitch_eval.cli` on a loaded 2-core box. What a module
needs for its signatures (options, light config dataclasses) is imported at its top.
"""

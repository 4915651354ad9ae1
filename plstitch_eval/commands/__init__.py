"""CLI command groups; each module exposes `register(app)` and holds only argument parsing."""

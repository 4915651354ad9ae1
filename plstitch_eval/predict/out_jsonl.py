"""Output: `--jsonl PATH|-`, one JSON object per predicted frame (`online.frame_row`), flushed as it is
written so a reader sees each prediction as it is made."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any

from plstitch_eval.errors import ConfigError
from plstitch_eval.predict.pipeline import PredictedFrame, Sink
from plstitch_eval.utils.outputs import FILE, check_output_path


class JsonLines:
    """`--jsonl PATH|-`: one JSON object per line, flushed as it is written (a reader sees each prediction
    as it is made). A file is created new (an existing one only with `overwrite`)."""

    def __init__(self, target: str | Path, overwrite: bool = False) -> None:
        self.target = str(target)
        self._handle: IO[str] | None = None
        if self.target != "-":
            check_jsonl_target(self.target, overwrite)

    def __enter__(self) -> JsonLines:
        if self.target == "-":
            self._handle = sys.stdout
        else:
            Path(self.target).parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(self.target, "w", encoding="utf-8")  # noqa: SIM115 - closed in __exit__
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None and self._handle is not sys.stdout:
            self._handle.close()
        self._handle = None

    def write(self, row: dict[str, Any]) -> None:
        """Write one line and flush it."""
        assert self._handle is not None, "JsonLines is written inside its `with` block"
        self._handle.write(json.dumps(row, allow_nan=False) + "\n")
        self._handle.flush()


def check_jsonl_target(target: str | Path, overwrite: bool) -> None:
    """Refuse a `--jsonl` file that exists (without `overwrite`) or whose folder is a file."""
    path = Path(target)
    if path.is_dir():
        raise ConfigError(f"--jsonl {path} is a folder; give a file name (or - for stdout).")
    if path.exists() and not overwrite:
        raise ConfigError(f"--jsonl {path} exists; pass --overwrite to replace it, or choose another file.")
    check_output_path(path, "--jsonl", FILE)


class JsonLinesOut(Sink):
    """The `--jsonl` output: the target checked when made (before any model loads), opened with the run,
    each frame's row written as it comes."""

    def __init__(self, target: str | Path, overwrite: bool = False) -> None:
        self.lines = JsonLines(target, overwrite)

    def open(self) -> None:
        self.lines.__enter__()

    def frame(self, frame: PredictedFrame) -> None:
        self.lines.write(frame.row)

    def close(self, summary: object) -> None:
        self.lines.__exit__(None, None, None)

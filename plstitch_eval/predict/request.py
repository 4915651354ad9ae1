"""What a `plstitch predict` command line asks for (`PredictRequest`): which inputs, offline or online, where
the per-frame lines go; checked before any model loads, so a bad combination is one line and no work."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from plstitch_eval.errors import ConfigError
from plstitch_eval.predict.live import LiveSource, is_live, parse_input_options
from plstitch_eval.predict.record import check_record_path
from plstitch_eval.predict.serve import ServeSettings, check_serve_extra
from plstitch_eval.predict.sources import (
    STDIN,
    VideoSource,
    sources_from_dataset,
    sources_from_paths,
    videos_in_folder,
)


@dataclass
class PredictRequest:
    """The inputs of one predict run and how they are read: VIDEO arguments (`-`: stdin; URLs and
    /dev/videoN: live sources), a `--root` folder or a `--dataset`; `--online`, `--jsonl`; the live
    sources' input format, options and timeouts (`live`)."""

    videos: list[str] = field(default_factory=list)
    root: Path | None = None
    dataset: str | None = None
    split: str | None = None
    split_scheme: str | None = None
    only: str | None = None  # --videos: with --dataset, these videos (comma-separated)
    labels: list[Path] = field(default_factory=list)
    labels_fps: float | None = None
    out: Path | None = None
    online: bool = False
    follow_timeout: float | None = None
    jsonl: str | None = None
    live: LiveSource | None = None  # the settings of live sources (their address filled per VIDEO)
    live_flags: tuple[str, ...] = ()  # live-only flags given on the command line, for the refusal
    summary_json: Path | None = None  # --json: where the summary goes (- = stdout)
    serve: ServeSettings | None = None  # --serve HOST:PORT: the live page (serve.py)
    show_frames: bool = False  # --show-frames: the page shows the newest video frame (needs --serve)

    def check(self) -> None:
        """One way to name the inputs; --out unless online; stdin, live sources, --follow-timeout,
        --jsonl and the live flags only online."""
        videos, root, dataset = self.videos, self.root, self.dataset
        if dataset is None and videos and root is not None:
            raise ConfigError("Give VIDEO arguments or --root DIR, not both.")
        if dataset is None and not videos and root is None:
            raise ConfigError(
                "Nothing to predict: give VIDEO arguments, --root DIR, or --dataset NAME --root DIR."
            )
        if dataset is not None and videos:
            raise ConfigError(
                "--dataset takes its videos from the dataset; name them with --videos, not arguments."
            )
        if self.labels and not videos:
            raise ConfigError(
                "--labels go with VIDEO arguments (one per video); --dataset brings its own labels."
            )
        if not self.online:
            self._check_offline()
        elif self.live is not None and self.live.recording is not None:
            self._check_recording(self.live)
        if self.serve is not None:
            check_serve_extra()
        elif self.show_frames:
            raise ConfigError(
                "--show-frames goes with --serve HOST:PORT (it shows the frame on the live page)."
            )
        if self.jsonl == "-" and self.summary_json is not None and str(self.summary_json) == "-":
            raise ConfigError("--jsonl - and --json - would share stdout; write one of them to a file.")
        if self.out is None and not self.online:
            raise ConfigError(
                "--out is required (the folder for <video>.csv and <video>.png); --online may omit it."
            )

    def _check_offline(self) -> None:
        input_format = None if self.live is None else self.live.input_format
        if STDIN in self.videos:
            raise ConfigError("Reading stdin (-) needs --online; or save the stream to a file first.")
        live = next((v for v in self.videos if v != STDIN and is_live(v, input_format)), None)
        if live is not None:
            raise ConfigError(
                f"{live} is a live source (a stream or capture device): it needs --online, or record it "
                "to a file first."
            )
        if self.follow_timeout is not None:
            raise ConfigError(
                "--follow-timeout goes with --online (it follows a recording as it is written)."
            )
        online_only = (["--jsonl"] if self.jsonl is not None else []) + list(self.live_flags)
        online_only += ["--serve"] if self.serve is not None else []
        if online_only:
            raise ConfigError(f"{online_only[0]} goes with --online (predictions made as the video arrives).")

    def _check_recording(self, live: LiveSource) -> None:
        """--record: one live source, and a file it may write (before connecting)."""
        live_videos = [v for v in self.videos if v != STDIN and is_live(v, live.input_format)]
        if self.dataset is not None or len(self.videos) != 1 or len(live_videos) != 1:
            raise ConfigError(
                "--record FILE records one live source (a stream or capture device): give exactly one; "
                "files and pipes are recordings already."
            )
        check_record_path(live.recording, live.overwrite_recording)

    def sources(self, class_names: list[str]) -> list[VideoSource]:
        """The inputs, each with its labels (a dataset's classes must be the probe's)."""
        if self.dataset is not None:
            names = [v.strip() for v in self.only.split(",") if v.strip()] if self.only else None
            return sources_from_dataset(
                self.dataset, self.root, class_names, self.split, names, self.split_scheme
            )
        paths = list(self.videos) or [str(p) for p in videos_in_folder(self.root)]
        return sources_from_paths(paths, class_names, self.labels, self.labels_fps, self.live)

    @property
    def stdout_lines(self) -> bool:
        """Whether stdout carries the per-frame JSON lines (`--jsonl -`): the per-second lines then go to
        stderr."""
        return self.jsonl == "-"


def live_settings(
    input_format: str | None,
    input_options: list[str] | None,
    connect_timeout: float | None,
    reconnect_timeout: float | None,
    record: Path | None = None,
    overwrite: bool = False,
) -> tuple[LiveSource | None, tuple[str, ...]]:
    """How live sources are opened and recorded (their address filled per VIDEO; None when no live flag was
    given), and the live flags that were given (refused without --online)."""
    given = {
        "--input-format": input_format,
        "--input-option": input_options or None,
        "--connect-timeout": connect_timeout,
        "--reconnect-timeout": reconnect_timeout,
        "--record": record,
    }
    flags = tuple(flag for flag, value in given.items() if value is not None)
    if not flags:
        return None, ()
    timeouts = {
        key: value
        for key, value in (("connect_timeout", connect_timeout), ("reconnect_timeout", reconnect_timeout))
        if value is not None
    }
    recording = {"recording": str(record), "overwrite_recording": overwrite} if record is not None else {}
    live = LiveSource("", input_format, parse_input_options(input_options or []), **timeouts, **recording)
    return live, flags


def stopped_verb(signum: int | None) -> str:
    """How a stop signal is named on stderr: `terminated` (SIGTERM) or `interrupted` (Ctrl-C)."""
    return "terminated" if signum == signal.SIGTERM else "interrupted"


def stopped_twice_line(signum: int, out: Path | None) -> str:
    """The line a second Ctrl-C or SIGTERM leaves: stopped at once, the video in hand not written."""
    where = "" if out is None else f"; {out} holds the videos that had ended"
    return f"{stopped_verb(signum)} twice: stopped at once, the video in hand is not written{where}"

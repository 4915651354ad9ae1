"""What an extraction run did: one `VideoResult` per video, the run's `ExtractSummary`, and its end-of-run
table on stderr (`print_summary`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from plstitch_eval.utils.console import console

SUMMARY_ROWS = 30  # per-video rows shown in the end-of-run table; failures are always shown
ELSEWHERE = "another run extracted it"  # note of a video skipped because a concurrent run wrote it


@dataclass
class VideoResult:
    """Outcome of one video: `done`, `skipped` (already in the store; `note` says when another run wrote it
    meanwhile) or `failed` (with the error)."""

    video: str
    status: str
    frames: int = 0
    seconds: float = 0.0
    error: str | None = None
    note: str | None = None

    @property
    def frames_per_second(self) -> float:
        """Frames encoded per wall-clock second for this video (0 when skipped)."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0


@dataclass
class ExtractSummary:
    """What an extraction run did: one `VideoResult` per selected video, in dataset order."""

    store: Path
    results: list[VideoResult]
    seconds: float
    world_size: int = 1
    rank: int = 0

    @property
    def failed(self) -> list[VideoResult]:
        """Videos that could not be extracted."""
        return [r for r in self.results if r.status == "failed"]

    @property
    def ok(self) -> bool:
        """True when no video failed."""
        return not self.failed

    @property
    def frames(self) -> int:
        """Frames encoded in this run (skipped videos excluded)."""
        return sum(r.frames for r in self.results if r.status == "done")

    @property
    def frames_per_second(self) -> float:
        """End-to-end throughput of this run."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    def headline(self) -> str:
        """What the run did in one line: `extracted 1621 frames of 24 videos in STORE`, `all 24 videos already
        extracted in STORE` (a rerun: none encoded), or `extracted 45 frames of 1 video (23 already extracted,
        1 failed) in STORE`."""
        counts = {s: sum(r.status == s for r in self.results) for s in ("done", "skipped", "failed")}
        done, skipped, failed = counts["done"], counts["skipped"], counts["failed"]
        if skipped and not done and not failed:
            return f"all {_videos(skipped)} already extracted in {self.store}"
        notes = [f"{skipped} already extracted"] if skipped else []
        notes += [f"{failed} failed"] if failed else []
        told = f" ({', '.join(notes)})" if notes else ""
        return f"extracted {self.frames} frames of {_videos(done)}{told} in {self.store}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for `--json` on stdout)."""
        return {
            "store": str(self.store),
            "seconds": self.seconds,
            "frames": self.frames,
            "frames_per_second": self.frames_per_second,
            "world_size": self.world_size,
            "ok": self.ok,
            "videos": [{**asdict(r), "frames_per_second": r.frames_per_second} for r in self.results],
        }


def _videos(count: int) -> str:
    return f"{count} video{'' if count == 1 else 's'}"


@dataclass
class MultiExtractSummary:
    """What a run over several encoders did: one `ExtractSummary` per store, in the order the models were
    given (`names` label them)."""

    stores: list[ExtractSummary]
    names: list[str]
    seconds: float
    world_size: int = 1
    rank: int = 0

    @property
    def failed(self) -> list[tuple[str, VideoResult]]:
        """(model, video result) of every video that could not be extracted."""
        return [(name, r) for name, s in zip(self.names, self.stores, strict=True) for r in s.failed]

    @property
    def ok(self) -> bool:
        """True when no video of any model failed."""
        return all(s.ok for s in self.stores)

    @property
    def frames(self) -> int:
        """Frames encoded in this run, summed over the models."""
        return sum(s.frames for s in self.stores)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for `--json`): the run's totals and each store's own summary."""
        return {
            "seconds": self.seconds,
            "frames": self.frames,
            "frames_per_second": self.frames / self.seconds if self.seconds > 0 else 0.0,
            "world_size": self.world_size,
            "ok": self.ok,
            "stores": [
                {"model": name, **s.to_dict()} for name, s in zip(self.names, self.stores, strict=True)
            ],
        }


def summary_table(summary: ExtractSummary, max_rows: int = SUMMARY_ROWS) -> Table:
    """Rich table: one row per video (failures always; others up to `max_rows`) plus a total row."""
    table = Table(
        title=Text(f"Feature extraction -> {summary.store}", style="table.title"), show_footer=False
    )
    for name, justify in (
        ("video", "left"),
        ("frames", "right"),
        ("seconds", "right"),
        ("frames/s", "right"),
    ):
        table.add_column(name, justify=justify)
    table.add_column("status")
    shown = 0
    hidden = 0
    for r in summary.results:
        if r.status != "failed" and shown >= max_rows:
            hidden += 1
            continue
        shown += r.status != "failed"
        label, style = {
            "done": ("done", "green"),
            "skipped": (f"skipped ({r.note or 'in store'})", "dim"),
            "failed": ("failed", "red"),
        }[r.status]
        status = Text(label, style=style)
        if r.error:
            status.append(f": {r.error}", style=style)  # verbatim: errors hold paths
        table.add_row(Text(r.video), str(r.frames), f"{r.seconds:.1f}", f"{r.frames_per_second:.1f}", status)
    if hidden:
        table.add_row(f"... {hidden} more", "", "", "", "")
    counts = {s: sum(r.status == s for r in summary.results) for s in ("done", "skipped", "failed")}
    table.add_row(
        Text("total", style="bold"),
        str(summary.frames),
        f"{summary.seconds:.1f}",
        f"{summary.frames_per_second:.1f}",
        ", ".join(f"{n} {s}" for s, n in counts.items()),
    )
    return table


def print_summary(summary: ExtractSummary) -> None:
    """Print the summary table to stderr (silenced by `--quiet`)."""
    console.print(summary_table(summary))

"""`plstitch_eval.extract.summary`: a run's totals count only what it encoded; the table always shows the
failures and folds the other rows past `max_rows`."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from plstitch_eval.extract.summary import ELSEWHERE, ExtractSummary, VideoResult, summary_table


def _text(table) -> str:
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def _summary() -> ExtractSummary:
    results = [
        VideoResult("a", "done", frames=10, seconds=2.0),
        VideoResult("b", "skipped"),
        VideoResult("c", "skipped", note=ELSEWHERE),
        VideoResult("d", "failed", error="/data/d.mp4: no frames could be decoded."),
        VideoResult("e", "done", frames=30, seconds=1.0),
    ]
    return ExtractSummary(Path("/tmp/store"), results, seconds=4.0)


def test_totals_count_the_encoded_frames_and_any_failure_fails_the_run():
    summary = _summary()
    assert summary.frames == 40 and summary.frames_per_second == 10.0
    assert [r.video for r in summary.failed] == ["d"] and not summary.ok
    assert summary.results[0].frames_per_second == 5.0 and summary.results[1].frames_per_second == 0.0
    record = summary.to_dict()
    assert record["ok"] is False and record["store"] == "/tmp/store" and record["frames"] == 40
    assert record["videos"][4] == {
        "video": "e", "status": "done", "frames": 30, "seconds": 1.0, "error": None, "note": None,
        "frames_per_second": 30.0,
    }  # fmt: skip


def test_the_table_names_each_status_and_the_totals():
    text = _text(summary_table(_summary()))
    assert f"skipped ({ELSEWHERE})" in text and "skipped (in store)" in text
    assert "failed: /data/d.mp4: no frames could be decoded." in text
    assert "2 done, 2 skipped, 1 failed" in text


def test_rows_past_max_rows_are_folded_but_failures_always_shown():
    text = _text(summary_table(_summary(), max_rows=1))
    assert "... 3 more" in text and "/data/d.mp4" in text
    assert " e " not in text and " a " in text


def test_the_headline_says_already_extracted_for_a_rerun_not_zero_frames():
    """Issue 64: a store the one-pass extraction filled logs "already extracted", not "0 frames of 24"."""
    rerun = ExtractSummary(Path("/tmp/store"), [VideoResult(f"v{i}", "skipped") for i in range(24)], 0.5)
    assert rerun.headline() == "all 24 videos already extracted in /tmp/store"
    fresh = ExtractSummary(Path("/tmp/store"), [VideoResult("v1", "done", frames=45, seconds=1.0)], 1.0)
    assert fresh.headline() == "extracted 45 frames of 1 video in /tmp/store"
    assert (
        _summary().headline()
        == "extracted 40 frames of 2 videos (2 already extracted, 1 failed) in /tmp/store"
    )

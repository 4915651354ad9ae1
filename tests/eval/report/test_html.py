"""The page (`report.html`): self-contained (no external asset, no script), a section per video, the
remaining-time curve only for an rsd probe, anticipation and tools curves where their columns are, a live
case's latency p50/p99 and drops from its `--jsonl` lines, and one sentence when a case has no labels."""

from __future__ import annotations

import csv
import json
import re
import shutil

import numpy as np
import pytest

from plstitch_eval.report.html import NO_LABELS
from tests.eval.report.conftest import OTHER, VIDEO, part_of, read_rows, report, table_rows, video_sections


def assert_self_contained(page: str) -> None:
    assert not re.search(r"https?://", page)
    assert "<script" not in page and "<link" not in page and "url(" not in page and "@import" not in page
    sources = re.findall(r'\bsrc="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert all(h.startswith("#") for h in re.findall(r'\bhref="([^"]*)"', page))


def test_page_is_self_contained_and_says_no_labels(phases_dir, tmp_path):
    out = tmp_path / "case.html"
    done = report(phases_dir, "--out", out)
    written = json.loads(done.stdout)
    assert written["report"] == str(out) and written["png"] == str(out.with_suffix(".png"))
    page = out.read_text(encoding="utf-8")
    assert_self_contained(page)
    sections = video_sections(page)
    assert all(section.count(NO_LABELS) == 1 for section in sections.values()) and len(sections) == 2
    assert NO_LABELS.count(". ") == 0 and NO_LABELS.endswith(".")  # one sentence
    assert all(part_of(s, kind) is None for s in sections.values() for kind in ("remaining", "next", "live"))
    assert "wrote" in done.stderr and out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")


def test_remaining_time_only_for_an_rsd_probe(phases_dir, rsd_dir, tmp_path):
    out = tmp_path / "both.html"
    report(phases_dir, rsd_dir, "--out", out)  # two probes' folders, merged by video
    sections = video_sections(out.read_text(encoding="utf-8"))
    assert part_of(sections[VIDEO], "remaining") is not None and part_of(sections[VIDEO], "durations")
    assert part_of(sections[OTHER], "remaining") is None  # the rsd probe did not see it
    alone = tmp_path / "rsd.html"
    report(rsd_dir, "--out", alone)
    section = video_sections(alone.read_text(encoding="utf-8"))[VIDEO]
    assert part_of(section, "remaining").count("<img") == 1
    assert part_of(section, "durations") is None and part_of(section, "phases") is None


def test_anticipation_curves(ant_dir, tmp_path):
    out = tmp_path / "ant.html"
    report(ant_dir, "--out", out)
    section = video_sections(out.read_text(encoding="utf-8"))[VIDEO]
    assert part_of(section, "next").count("<img") == 1 and part_of(section, "remaining") is None


def test_tools_over_time_from_a_tools_probes_columns(phases_dir, tmp_path):
    """No tools probe can be saved for predict yet: its columns (`tool_<name>`) are added to a real CSV."""
    folder = tmp_path / "tools"
    folder.mkdir()
    rows = read_rows(phases_dir / f"{VIDEO}.csv")
    with (folder / f"{VIDEO}.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["time_s", "frame_index", "tool_Grasper", "tool_Hook"])
        writer.writeheader()
        for i, row in enumerate(rows):
            writer.writerow({"time_s": row["time_s"], "frame_index": i, "tool_Grasper": 0.9, "tool_Hook": 0})
    out = tmp_path / "tools.html"
    report(folder, "--out", out)
    section = video_sections(out.read_text(encoding="utf-8"))[VIDEO]
    assert part_of(section, "tools").count("<img") == 1 and part_of(section, "durations") is None


def test_live_case_latency_and_drops(online_dir, tmp_path):
    out = tmp_path / "live.html"
    report(online_dir, "--out", out)
    page = out.read_text(encoding="utf-8")
    assert_self_contained(page)
    section = video_sections(page)["stdin"]
    lines = [json.loads(line) for line in (online_dir / "frames.jsonl").read_text().splitlines()]
    latency_ms = np.array([line["latency_s"] for line in lines]) * 1000
    shown = dict(table_rows(part_of(section, "live")))
    assert shown["latency p50"] == f"{np.quantile(latency_ms, 0.5):.1f} ms"
    assert shown["latency p99"] == f"{np.quantile(latency_ms, 0.99):.1f} ms"
    assert shown["dropped frames"] == str(max(line["dropped"] for line in lines)) == "0"  # a pipe drops none
    assert part_of(section, "live").count("<img") == 1 and "end of recording" in section


def test_a_live_case_cut_by_a_kill_still_reports(online_dir, tmp_path):
    """The last `--jsonl` line cut short (predict killed while writing it) is left out, not an error."""
    folder = tmp_path / "cut"
    shutil.copytree(online_dir, folder)
    text = (folder / "frames.jsonl").read_text()
    (folder / "frames.jsonl").write_text(text + '{"video": "stdin", "time_s": 9')
    report(folder, "--out", tmp_path / "cut.html")
    shown = dict(table_rows(part_of(video_sections((tmp_path / "cut.html").read_text())["stdin"], "live")))
    assert shown["latency p50"].endswith(" ms")


@pytest.mark.parametrize("labelled", [False, True])
def test_no_labels_sentence_only_without_labels(data, rsd_dir, tmp_path, labelled):
    """An rsd case with labels: the true remaining time is known (the case is complete), no sentence."""
    args = ["--labels", data["root"] / "phase_annotations" / f"{VIDEO}-phase.txt"] if labelled else []
    out = tmp_path / "r.html"
    report(rsd_dir, *args, "--out", out)
    page = out.read_text(encoding="utf-8")
    assert (NO_LABELS in page) is not labelled

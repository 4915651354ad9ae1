"""The report's numbers (`report.phases`): time per phase and the transitions in the page equal the ones
computed here from predict's CSV, and with labels the truth's times and predict's own accuracy."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from plstitch_eval.report.case import PhaseTrack
from plstitch_eval.report.phases import accuracy, phase_times, transitions
from tests.eval.predict.conftest import CPU, invoke, video_file
from tests.eval.report.conftest import (
    OTHER,
    VIDEO,
    frame_seconds,
    part_of,
    read_rows,
    report,
    table_rows,
    video_sections,
)


def test_time_per_phase_and_transitions_are_the_csvs(phases_dir, tmp_path):
    out = tmp_path / "case.html"
    report(phases_dir, "--out", out)
    sections = video_sections(out.read_text(encoding="utf-8"))
    assert sorted(sections) == sorted([VIDEO, OTHER])  # a section per video
    for video, section in sections.items():
        rows = read_rows(phases_dir / f"{video}.csv")
        times = [float(r["time_s"]) for r in rows]
        expected: dict[str, float] = defaultdict(float)
        for row, seconds in zip(rows, frame_seconds(times), strict=True):
            expected[row["predicted"]] += seconds
        got = {phase: float(s) for phase, s, _share in table_rows(part_of(section, "durations"))}
        assert got == pytest.approx(dict(expected), abs=1e-6)

        changes = [
            [a["predicted"], b["predicted"], pytest.approx(float(b["time_s"]), abs=1e-6)]
            for a, b in zip(rows, rows[1:], strict=False)
            if a["predicted"] != b["predicted"]
        ]
        shown = [[a, b, float(t)] for a, b, t in table_rows(part_of(section, "transitions"))]
        assert changes and shown == changes


def test_labels_give_the_truth_and_predicts_accuracy(data, phases_dir, tmp_path):
    """`--labels` are read as predict reads them: the page's accuracy is predict's own with the same file."""
    labels = data["root"] / "phase_annotations" / f"{VIDEO}-phase.txt"
    other = data["root"] / "phase_annotations" / f"{OTHER}-phase.txt"
    predicted = report(phases_dir, "--labels", other, "--labels", labels, "--out", tmp_path / "r.html")
    assert json.loads(predicted.stdout)["videos"][0]["labelled"] is True
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    section = video_sections(page)[VIDEO]
    scored = invoke(
        "predict", "--probe", data["probe"], video_file(data), "--labels", labels, "--out", tmp_path / "p",
        *CPU,
    )  # fmt: skip
    accuracy = json.loads(scored.stdout)["videos"][0]["accuracy"]
    assert f"Accuracy against the truth: {accuracy:.1f} %." in section
    rows = read_rows(phases_dir / f"{VIDEO}.csv")
    truth_rows = {r[0]: float(r[3]) for r in table_rows(part_of(section, "durations"))}
    assert sum(truth_rows.values()) == pytest.approx(sum(frame_seconds([float(r["time_s"]) for r in rows])))
    assert "No labels were given" not in page


def test_dataset_annotations_are_the_labels(data, phases_dir, tmp_path):
    by_files = tmp_path / "files.html"
    labels = [data["root"] / "phase_annotations" / f"{v}-phase.txt" for v in (OTHER, VIDEO)]
    report(phases_dir, "--labels", labels[0], "--labels", labels[1], "--out", by_files)
    by_dataset = tmp_path / "dataset.html"
    report(phases_dir, "--dataset", "cholec80", "--root", data["root"], "--out", by_dataset)
    durations = [
        table_rows(part_of(video_sections(p.read_text(encoding="utf-8"))[VIDEO], "durations"))
        for p in (by_files, by_dataset)
    ]
    assert durations[0] == durations[1] and len(durations[0][0]) == 4  # with the truth's column


def test_phase_times_and_transitions_on_uneven_frames():
    """A gap (a live source silent for 4 s) counts to the phase before it; unlabelled truth is named so."""
    times = np.array([0.0, 1.0, 2.0, 6.0, 7.0])
    track = PhaseTrack(None, times, np.array([0, 0, 1, 1, 0]), ["A", "B"], truth=np.array([0, 1, 1, -1, -1]))
    assert [(t.phase, t.seconds, t.truth_seconds) for t in phase_times(track)] == [
        ("A", 2.0 + 1.0, 1.0),
        ("B", 4.0 + 1.0, 5.0),
    ]
    assert [(m.from_phase, m.to_phase, m.at_s) for m in transitions(track.predicted, times, ["A", "B"])] == [
        ("A", "B", 2.0),
        ("B", "A", 7.0),
    ]
    assert [m.to_phase for m in transitions(track.truth, times, ["A", "B"])] == ["B", "unlabelled"]
    assert accuracy(track) == 2 / 3 * 100

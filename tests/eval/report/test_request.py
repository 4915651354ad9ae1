"""Bad input to `plstitch report` is one line naming the file and the fix, before anything is written; an
earlier report is replaced only with `--overwrite`; the files follow the umask."""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from tests.eval.predict.conftest import one_error_line
from tests.eval.report.conftest import VIDEO, invoke, report


def refused(*args) -> str:
    return one_error_line(invoke("report", *args))


def test_a_folder_that_is_no_predict_output(tmp_path):
    empty = tmp_path / "notes"
    empty.mkdir()
    (empty / "notes.txt").write_text("mine\n")
    line = refused(empty, "--out", tmp_path / "r.html")
    assert str(empty) in line and "plstitch predict --out" in line
    line = refused(tmp_path / "missing", "--out", tmp_path / "r.html")
    assert "no such folder" in line
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "r.png").exists()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("frame_index,predicted\n0,A\n", "has no time_s column"),
        ("time_s,frame_index,progression\n0.0,0,0.5\n", "has no predicted, remaining_min"),
        ("time_s,frame_index,predicted,A\n0.0,0,A,1.0\nsoon,1,A,1.0\n", "line 3: time_s is not a number"),
        ("time_s,frame_index,predicted,A\n0.0,0,B,1.0\n", "line 2: predicted class 'B'"),
    ],
)
def test_a_bad_csv_is_one_line_naming_it(tmp_path, text, said):
    folder = tmp_path / "pred"
    folder.mkdir()
    (folder / "case.csv").write_text(text)
    line = refused(folder, "--out", tmp_path / "r.html")
    assert str(folder / "case.csv") in line and said in line


def test_an_earlier_report_is_kept_without_overwrite(phases_dir, tmp_path):
    out = tmp_path / "case.html"
    for existing in (out, out.with_suffix(".png")):
        existing.write_text("the user's own")
        line = refused(phases_dir, "--out", out)
        assert f"{existing} exists; pass --overwrite" in line
        assert existing.read_text() == "the user's own"
        existing.unlink()
    report(phases_dir, "--out", out)
    first = out.read_bytes()
    assert "exists; pass --overwrite" in refused(phases_dir, "--out", out)
    out.write_text("old")
    report(phases_dir, "--out", out, "--overwrite")
    assert out.read_bytes() == first  # the same inputs give the same page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.html", "case.png"]  # no temporary left


def test_default_out_is_in_the_folder_and_never_a_videos_figure(phases_dir, tmp_path):
    folder = tmp_path / "pred"
    shutil.copytree(phases_dir, folder)
    report(folder)
    assert (folder / "report.html").is_file() and (folder / "report.png").is_file()
    report(folder, "--out", folder / "again.html")  # the report's own files are not read as inputs
    line = refused(folder, "--out", folder / f"{VIDEO}.html", "--overwrite")
    assert f"would replace predict's figure of {VIDEO}" in line
    assert "give an .html file name" in refused(folder, "--out", tmp_path / "report.txt")


def test_labels_refusals(data, phases_dir, tmp_path):
    labels = data["root"] / "phase_annotations" / f"{VIDEO}-phase.txt"
    out = ["--out", tmp_path / "r.html"]
    assert "--labels was given 1 time(s) for 2 video(s)" in refused(phases_dir, "--labels", labels, *out)
    both = refused(phases_dir, "--labels", labels, "--dataset", "cholec80", *out)
    assert "not both" in both
    bare = tmp_path / "bare"  # no summary JSON: the label rows' rate is unknown
    bare.mkdir()
    shutil.copy(phases_dir / f"{VIDEO}.csv", bare)
    assert "pass --labels-fps" in refused(bare, "--labels", labels, *out)
    assert report(bare, "--labels", labels, "--labels-fps", 25, *out).stdout.count('"labelled": true') == 1
    missing = refused(bare, "--labels", tmp_path / "none.txt", "--labels-fps", 25, *out, "--overwrite")
    assert f"--labels {tmp_path / 'none.txt'}: no such file" in missing


def test_files_follow_the_umask(phases_dir, tmp_path):
    old = os.umask(0o027)
    try:
        report(phases_dir, "--out", tmp_path / "r.html")
    finally:
        os.umask(old)
    for name in ("r.html", "r.png"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640

"""`plstitch report` on real predict output folders: the real `plstitch predict` (CliRunner) on the tiny
synthetic videos, with the predict tests' own data and probes (a linear phase probe, rsd and anticipation
probes) - offline, online with `--jsonl`, one and two videos. Each folder is made once for the package.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from tests.eval.predict.conftest import CPU, VIDEO, data, invoke, regression_probes, video_file  # noqa: F401
from tests.media import remux

OTHER = "video04"  # a second video of the synthetic set


def predict_into(out: Path, *args) -> Path:
    """Run the real `plstitch predict ... --out OUT --json OUT/summary.json`; returns OUT."""
    done = invoke("predict", *args, "--out", out, "--json", out / "summary.json", *CPU)
    assert done.exit_code == 0, done.output
    return out


@pytest.fixture(scope="package")
def phases_dir(data, tmp_path_factory) -> Path:  # noqa: F811
    """A phase probe's folder of two videos, offline, no labels."""
    out = tmp_path_factory.mktemp("report") / "phases"
    return predict_into(out, "--probe", data["probe"], video_file(data), video_file(data, OTHER))


@pytest.fixture(scope="package")
def online_dir(data, tmp_path_factory) -> Path:  # noqa: F811
    """A phase probe followed online on a stream piped into stdin, with its per-frame lines (`--jsonl`)."""
    tmp = tmp_path_factory.mktemp("report-online")
    mkv = remux(video_file(data), tmp / f"{VIDEO}.mkv")
    out = tmp / "online"
    done = invoke(
        "predict", "--probe", data["probe"], "-", "--online", "--out", out, "--jsonl", out / "frames.jsonl",
        "--json", out / "summary.json", *CPU, input=mkv.read_bytes(),
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return out


@pytest.fixture(scope="package")
def rsd_dir(data, regression_probes, tmp_path_factory) -> Path:  # noqa: F811
    out = tmp_path_factory.mktemp("report") / "rsd"
    return predict_into(out, "--probe", regression_probes["rsd"], video_file(data))


@pytest.fixture(scope="package")
def ant_dir(data, regression_probes, tmp_path_factory) -> Path:  # noqa: F811
    out = tmp_path_factory.mktemp("report") / "ant"
    return predict_into(out, "--probe", regression_probes["ant"], video_file(data))


def report(*args, expect: int = 0):
    """Run `plstitch report ARGS`; checks the exit code."""
    done = invoke("report", *args)
    assert done.exit_code == expect, done.output
    return done


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def video_sections(page: str) -> dict[str, str]:
    """Each video's section of the page, by video name (sections of videos are siblings)."""
    parts = page.split('<section class="video" id="video-')[1:]
    return {part.split('"', 1)[0]: part for part in parts}


def part_of(section: str, kind: str) -> str | None:
    """The inner HTML of a video section's part (`durations`, `transitions`, `remaining`, ...), if any."""
    found = re.search(rf'<section class="{kind}">(.*?)</section>', section, re.S)
    return None if found is None else found.group(1)


def table_rows(part: str) -> list[list[str]]:
    """The body rows of the part's table: each cell's `data-s` (seconds) where it has one, else its text."""
    body = part.split("<tbody>", 1)[1]
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = re.findall(r'<td(?: class="num")?(?: data-s="([^"]*)")?>(.*?)</td>', row, re.S)
        rows.append([seconds or text for seconds, text in cells])
    return rows


def frame_seconds(times: list[float]) -> list[float]:
    """Seconds each sampled frame covers: up to the next frame, the last one the median step."""
    steps = [b - a for a, b in zip(times, times[1:], strict=False)]
    last = float(np.median(steps)) if steps else 1.0
    return [*steps, last]

"""The report opened in a real headless browser (Debian's `chromium`; `.ci/run` installs it): the page
renders its figures (the screenshot holds the ribbon's class colours, which only the embedded PNGs draw) and
its DOM holds every figure as an embedded image. Skipped, with the reason, where no browser is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from plstitch_eval.analysis.style import OKABE_ITO
from tests.eval.report.conftest import VIDEO, report, video_sections

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium on PATH (apt-get install chromium)")
PAGE_COLOURS = ("#0072B2", "#E69F00", "#000000")  # the page's own styles use these: not proof of a figure
FIGURE_COLOURS = [c for c in OKABE_ITO if c not in PAGE_COLOURS]


def browse(tmp_path: Path, *flags: str, url: str) -> subprocess.CompletedProcess:
    command = [
        BROWSER, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1600", *flags, url,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def test_the_report_opens_with_its_figures(phases_dir, tmp_path):
    out = tmp_path / "case.html"
    report(phases_dir, "--out", out)
    shot = tmp_path / "screenshot.png"
    done = browse(tmp_path, f"--screenshot={shot}", url=out.as_uri())
    assert shot.is_file(), done.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert pixels.shape[0] > 500 and pixels.std() > 10  # not blank
    colours = [tuple(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in FIGURE_COLOURS]
    drawn = sum(int((np.abs(pixels - np.array(rgb)).max(axis=-1) <= 8).sum()) for rgb in colours)
    assert drawn > 500, "no ribbon colour on screen: the embedded figures did not render"

    dom = browse(tmp_path, "--dump-dom", url=out.as_uri()).stdout
    images = re.findall(r'<img alt="([^"]*)" src="data:image/png;base64,[A-Za-z0-9+/=]+"', dom)
    assert f"{VIDEO}: phase ribbon" in images and len(images) == 2  # one ribbon per video
    assert len(video_sections(dom)) == 2 and "No labels were given" in dom

"""`predict` reports per video the black-margin box it cut (a probe of `--crop-black-margin` features),
offline and online alike; a probe without the crop reports none."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plstitch_eval.data.margin import detection_record
from tests.eval.predict.conftest import CPU, edited_probe, invoke
from tests.media import write_video

HEIGHT, WIDTH = 96, 128
PICTURE = (16, 80, 16, 112)  # y0, y1, x0, x1: the picture inside a black border


def bordered(i: int) -> np.ndarray:
    """A changing picture (every pixel well above black) inside a black border."""
    y0, y1, x0, x1 = PICTURE
    image = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    ramp = (np.arange(x1 - x0)[None, :] * 2 + np.arange(y1 - y0)[:, None] + 5 * i) % 160
    image[y0:y1, x0:x1] = (ramp[..., None] + 60).astype(np.uint8)
    return image


def test_the_box_cut_from_each_video_is_in_the_summary(data, tmp_path):
    video = write_video(tmp_path / "bordered.mp4", bordered, 50)  # 2 s at 25 fps
    crop = detection_record()
    probe = edited_probe(data, tmp_path, lambda r: r["preprocessing"].update(crop_black_margin=crop))
    y0, y1, x0, x1 = PICTURE
    expected = {"top": y0 / HEIGHT, "bottom": y1 / HEIGHT, "left": x0 / WIDTH, "right": x1 / WIDTH}
    boxes = {}
    runs = {"offline": ["--out", tmp_path / "offline"], "online": ["--online", "--json", "-"]}
    for mode, extra in runs.items():
        result = invoke("predict", "--probe", probe, video, *extra, *CPU)
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout[result.stdout.index("{") :])
        boxes[mode] = summary["videos"][0]["black_margin"]
        assert boxes[mode] == pytest.approx(expected, abs=2 / HEIGHT), mode
    assert boxes["online"] == boxes["offline"]  # the same detection on the same frames

    plain = invoke("predict", "--probe", data["probe"], video, "--out", tmp_path / "plain", *CPU)
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout)["videos"][0]["black_margin"] is None

"""`plstitch predict` end to end: real synthetic MP4s, the shipped tiny model, a linear probe saved by
`plstitch linear --save`; predictions equal the evaluation path's, refusals are one line.

The data (videos, their feature store, the probe) is made once for the whole package (`data`).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.synthetic import generate_synthetic
from plstitch_eval.extract import ExtractOptions, extract_features

MODEL = "plstitch-tiny-synthetic"
FPS = 2.0  # the probe's store: 8-12 frames per video
SYNTHETIC = {"n_videos": 6, "size": 64, "seed": 0, "min_seconds": 4.0, "max_seconds": 6.0}
VIDEO = "video05"  # in the synthetic test split (the last third), so the results JSON predicts it
CPU = ["--device", "cpu", "--num-workers", "0"]

runner = CliRunner()


def invoke(*args: str, input: bytes | None = None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1, result.stderr
    assert "Traceback" not in result.output
    return errors[0]


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


@pytest.fixture(scope="package")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Six synthetic videos, their feature store at 2 fps (shipped tiny model) and a linear probe saved by
    `plstitch linear --save`, with the results JSON of that run."""
    tmp = tmp_path_factory.mktemp("predict")
    root = generate_synthetic(tmp / "synthetic", workers=1, **SYNTHETIC)
    adapter = get_dataset("synthetic", root=root, **SYNTHETIC)
    options = ExtractOptions(fps=FPS, num_workers=0, device="cpu", progress=False)
    assert extract_features(adapter, MODEL, tmp / "store", options).ok
    result = invoke(
        "linear", "--features", tmp / "store", "--epochs", 5, "--device", "cpu",
        "--save", tmp / "probe", "--json", tmp / "results.json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return {"root": root, "store": tmp / "store", "probe": tmp / "probe", "results": tmp / "results.json"}


@pytest.fixture(scope="package")
def regression_probes(data, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An rsd linear probe (with the elapsed input), a causal rsd MS-TCN and an anticipation linear probe."""
    tmp = tmp_path_factory.mktemp("regression-probes")
    store = ["--features", data["store"], "--device", "cpu"]
    runs = {
        "rsd": ("linear", "--task", "rsd", "--elapsed", "--epochs", 3),
        "tcn": ("temporal", "--task", "rsd", "--causal", "--epochs", 2, "--stages", 2, "--layers", 3),
        "ant": ("linear", "--task", "anticipation", "--horizon", 0.05, "--epochs", 3),
    }
    for name, (command, *args) in runs.items():
        done = invoke(command, *store, *args, "--save", tmp / name)
        assert done.exit_code == 0, done.output
    return {name: tmp / name for name in runs}


def video_file(data: dict[str, Path], name: str = VIDEO) -> Path:
    return data["root"] / "videos" / f"{name}.mp4"


def edited_probe(data, tmp_path: Path, edit) -> Path:
    folder = tmp_path / "probe"
    shutil.copytree(data["probe"], folder)
    record = json.loads((folder / "probe.json").read_text())
    edit(record)
    (folder / "probe.json").write_text(json.dumps(record))
    return folder


def whole_seconds(times: list[float]) -> list[int]:
    """Index of the first frame of each whole video second."""
    firsts, seen = [], set()
    for i, t in enumerate(times):
        if int(np.floor(t + 1e-6)) not in seen:
            seen.add(int(np.floor(t + 1e-6)))
            firsts.append(i)
    return firsts

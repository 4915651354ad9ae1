"""`plstitch analyze run`: the curves of a real (tiny, resumed) training run, its JSON equal to the log, the
k-NN panel, outputs that never replace a user's file unasked, and one-line errors for bad logs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.analysis import run_curves
from plstitch_eval.analysis.run_curves import log_series, read_run_log
from plstitch_eval.cli import app
from plstitch_eval.errors import RunFolderError
from plstitch_eval.hub.run_folder import LOG_NAME
from plstitch_train.config import LOSS_KEYS
from plstitch_train.monitors.collapse import ENTROPY_RATIO_MIN, MIM_LOSS_RATIO_MIN
from plstitch_train.trainer import train
from tests.eval.analysis.conftest import check_png
from tests.train.conftest import VIDEO_FRAMES, tiny_config, write_mp4

runner = CliRunner()
STEPS, STOPPED_AT = 6, 3


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiny run stopped after step 3 (its checkpoint) and resumed to step 6, collapse measured every 2."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("curves")
    for i, n in enumerate(VIDEO_FRAMES):
        write_mp4(root / "videos" / f"clip{i}.mp4", n, seed=i)
    config = tiny_config(root / "videos", root / "cache", max_steps=STEPS, collapse_every=2)
    run_dir = root / "run"
    train(config, run_dir, stop_after=STOPPED_AT)
    train(config, run_dir)  # the rerun resumes it
    torch.set_num_threads(threads)
    yield run_dir


def _log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / LOG_NAME).read_text().splitlines()]


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    target.mkdir()
    shutil.copy(run_dir / LOG_NAME, target / LOG_NAME)
    return target


def test_the_curves_of_a_resumed_run_hold_its_log(trained_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(trained_run, tmp_path)
    result = runner.invoke(app, ["analyze", "run", str(run_dir)])
    assert result.exit_code == 0, result.output
    summary, *wrote = result.stdout.strip().splitlines()
    assert summary == f"{STEPS} records, steps 1-{STEPS}; panels: loss, schedule, collapse"
    assert wrote == [f"wrote {run_dir / 'curves.png'}", f"wrote {run_dir / 'curves.json'}"]
    data = json.loads((run_dir / "curves.json").read_text())
    check_png(run_dir / "curves.png", 9.0, 2.3 * 3 + 0.5 + 0.2)  # three rows, one note

    records = _log(trained_run)
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))  # resumed: no step twice
    keys = {k for r in records for k in r if k != "step"}
    assert set(data["series"]) == keys
    for key, series in data["series"].items():
        assert series["step"] == [r["step"] for r in records if key in r], key
        assert series["value"] == [r[key] for r in records if key in r], key
    assert data["series"]["collapse_entropy_ratio"]["step"] == [2, 4, 6]
    assert data["panels"] == {
        "loss": list(LOSS_KEYS),
        "schedule": ["lr", "weight_decay", "momentum"],
        "collapse": ["collapse_entropy_ratio", "collapse_mim_loss_ratio"],
    }
    assert data["notes"] == ["no k-NN: train with --eval-every N"] and data["best_knn"] is None
    assert data["records"] == STEPS and (data["first_step"], data["last_step"]) == (1, STEPS)


def test_the_knn_panel_marks_the_best_step(trained_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(trained_run, tmp_path)
    knn = {2: 40.0, 4: 55.5, 6: 52.0}
    with open(run_dir / LOG_NAME, "a") as handle:  # as `--eval-every 2` logs them: records of their own
        for step, acc in knn.items():
            record = {"step": step, "knn_acc": acc, "knn_f1": acc / 2, "knn_seconds": 0.1}
            handle.write(json.dumps(record) + "\n")
    result = runner.invoke(app, ["analyze", "run", str(run_dir), "--out", str(tmp_path / "figs" / "a.png")])
    assert result.exit_code == 0, result.output
    assert "panels: loss, schedule, collapse, knn; best k-NN 55.5 at step 4" in result.stdout
    data = json.loads((tmp_path / "figs" / "a.json").read_text())
    assert data["figure"] == "a.png" and data["best_knn"] == {"step": 4, "knn_acc": 55.5}
    assert data["series"]["knn_acc"] == {"step": [2, 4, 6], "value": [40.0, 55.5, 52.0]}
    assert data["panels"]["knn"] == ["knn_acc", "knn_f1"] and data["notes"] == []
    assert data["series"]["loss"]["step"] == list(range(1, STEPS + 1))  # the k-NN records add no loss points
    check_png(tmp_path / "figs" / "a.png", 9.0, 2.3 * 4 + 0.5)


def test_a_step_logged_twice_shows_once_with_its_last_value() -> None:
    records = [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.5}, {"step": 2, "loss": 2.0}, {"step": 3}]
    assert log_series(records) == {"loss": {"step": [1, 2], "value": [3.0, 2.0]}}


def test_a_log_without_collapse_measures_notes_them(tmp_path: Path) -> None:
    (tmp_path / LOG_NAME).write_text(json.dumps({"step": 5, "epoch": 0, "loss": 1.0, "vid": 1.0}) + "\n")
    result = runner.invoke(app, ["analyze", "run", str(tmp_path)])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "curves.json").read_text())
    assert data["panels"] == {"loss": ["loss", "vid"]}
    assert data["notes"][1].startswith("no collapse measures: train with --collapse-every")


def test_outputs_elsewhere_are_not_replaced_unasked(trained_run: Path, tmp_path: Path) -> None:
    run_dir = _copy(trained_run, tmp_path)
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"a user's picture")
    args = ["analyze", "run", str(run_dir), "--out", str(mine)]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1 and "--overwrite" in refused.output and str(mine) in refused.output
    assert mine.read_bytes() == b"a user's picture" and not (tmp_path / "mine.json").exists()
    assert runner.invoke(app, [*args, "--overwrite"]).exit_code == 0
    assert runner.invoke(app, args).exit_code == 0  # our own outputs: a rerun replaces them
    bad = runner.invoke(app, ["analyze", "run", str(run_dir), "--out", str(tmp_path / "fig.pdf")])
    assert bad.exit_code == 1 and "give a .png file" in bad.output


def test_the_library_constants_are_the_trainers() -> None:
    assert run_curves.LOSS_KEYS == LOSS_KEYS
    assert run_curves.COLLAPSE_RATIO_MIN == ENTROPY_RATIO_MIN == MIM_LOSS_RATIO_MIN


GOOD = json.dumps({"step": 1, "loss": 2.0})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "log.jsonl not found"),
        ("", "log.jsonl is empty"),
        (f"{GOOD}\n\n{GOOD}\n", "log.jsonl line 2 is empty"),
        (f'{GOOD}\n{{"step": 2, "loss": 1.\n', "log.jsonl line 2: invalid JSON"),
        (f"{GOOD}\n[1, 2]\n", "log.jsonl line 2 holds a JSON list"),
        (f'{GOOD}\n{GOOD}\n{{"loss": 1.0}}\n', "log.jsonl line 3 has no integer 'step'"),
    ],
    ids=["missing", "empty", "blank-line", "torn-line", "not-an-object", "no-step"],
)
def test_a_bad_log_is_one_line_naming_file_and_line(tmp_path: Path, text: str | None, expected: str) -> None:
    if text is not None:
        (tmp_path / LOG_NAME).write_text(text)
    result = runner.invoke(app, ["analyze", "run", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and str(tmp_path) in lines[0] and expected in lines[0], result.output
    assert not (tmp_path / "curves.png").exists()
    if text is not None:
        with pytest.raises(RunFolderError, match=expected):
            read_run_log(tmp_path)


def test_no_such_folder_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", "run", str(tmp_path / "nope")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{tmp_path / 'nope'} does not exist" in result.output

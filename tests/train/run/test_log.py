"""The run log: log.jsonl byte for byte as before, and with `tensorboard` installed the same records as
grouped scalars in event files inside the run folder; a resumed run shows each step once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plstitch_eval.hub.run_folder import CHECKPOINT_NAME, LOG_NAME, TENSORBOARD_EVENTS
from plstitch_train.run import log as run_log_module
from plstitch_train.run.log import RunLog, scalar_tag
from plstitch_train.run.plan import append_log, remove_run_files
from plstitch_train.trainer import train
from tests.train.conftest import tiny_config

NO_TENSORBOARD = "tensorboard is not installed (pip install -e '.[tensorboard]')"


def _scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of the run folder's event files as TensorBoard shows it (`(step, value)` points)."""
    pytest.importorskip("tensorboard", reason=NO_TENSORBOARD)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_log_key_has_its_group() -> None:
    assert [scalar_tag(k) for k in ("loss", "vid", "mim", "jigsaw")] == [
        "loss/total",
        "loss/vid",
        "loss/mim",
        "loss/jigsaw",
    ]
    assert [scalar_tag(k) for k in ("lr", "weight_decay", "momentum")] == [
        "schedule/lr",
        "schedule/weight_decay",
        "schedule/momentum",
    ]
    assert scalar_tag("collapse_entropy_ratio") == "collapse/entropy_ratio"
    assert scalar_tag("knn_acc") == "knn/acc" and scalar_tag("knn_seconds") == "knn/seconds"
    assert scalar_tag("samples_per_s") == "progress/samples_per_s" and scalar_tag("epoch") == "progress/epoch"
    assert scalar_tag("grad_norm") == "other/grad_norm" and scalar_tag("step") is None


def test_the_jsonl_lines_are_append_logs(tmp_path: Path) -> None:
    records = [{"step": 1, "loss": 1.5, "lr": 1e-4}, {"step": 2, "loss": float("nan"), "flag": True}]
    with RunLog(tmp_path / "a") as log:
        (tmp_path / "a").mkdir()
        for record in records:
            log.append(record)
    for record in records:
        append_log(tmp_path / "b.jsonl", record)
    assert (tmp_path / "a" / LOG_NAME).read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_without_tensorboard_only_the_jsonl_is_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(run_log_module, "tensorboard_available", lambda: False)
    with RunLog(tmp_path) as log:
        log.append({"step": 1, "loss": 1.0})
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOG_NAME]


def test_the_scalars_mirror_the_records(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason=NO_TENSORBOARD)
    records = [
        {"step": 5, "epoch": 0, "loss": 2.0, "vid": 0.5, "lr": 1e-3, "collapse_entropy_ratio": 0.5},
        {"step": 10, "epoch": 1, "loss": 1.5, "vid": 0.25, "lr": 5e-4},
        {"step": 10, "knn_acc": 61.5, "knn_f1": 40.0},
    ]
    with RunLog(tmp_path) as log:
        for record in records:
            log.append(record)
    scalars = _scalars(tmp_path)
    assert set(scalars) == {
        "progress/epoch",
        "loss/total",
        "loss/vid",
        "schedule/lr",
        "collapse/entropy_ratio",
        "knn/acc",
        "knn/f1",
    }
    assert scalars["loss/total"] == [(5, 2.0), (10, 1.5)]
    assert scalars["schedule/lr"] == [(5, pytest.approx(1e-3)), (10, pytest.approx(5e-4))]
    assert scalars["knn/acc"] == [(10, 61.5)] and scalars["collapse/entropy_ratio"] == [(5, 0.5)]


def test_a_restart_purges_the_points_after_its_checkpoint(tmp_path: Path) -> None:
    """A run killed at step 5 after its checkpoint at 3 restarts at 3: steps 4-5 are logged again."""
    pytest.importorskip("tensorboard", reason=NO_TENSORBOARD)
    with RunLog(tmp_path) as log:
        for step in range(1, 6):
            log.append({"step": step, "loss": float(step)})
    with RunLog(tmp_path, start_step=3) as log:
        for step in range(4, 8):
            log.append({"step": step, "loss": 10.0 * step})
    assert _scalars(tmp_path)["loss/total"] == [(1, 1), (2, 2), (3, 3), (4, 40), (5, 50), (6, 60), (7, 70)]


def test_a_restart_in_the_same_second_is_read_after_the_first_start(tmp_path: Path) -> None:
    """TensorBoard reads event files in name order: the second they were opened in, then a per-process
    counter that sorts 10 before 9. With the counter at 9, a restart within the same second would be read
    first and the first start's steps taken for out of order; the restart waits for the next second."""
    pytest.importorskip("tensorboard", reason=NO_TENSORBOARD)
    from tensorboard.summary.writer import event_file_writer

    while set(str(event_file_writer._global_uid.get() + 1)) != {"9"}:  # the next writer's uid: 9, 99, ...
        pass
    with RunLog(tmp_path) as log:
        for step in (1, 2):
            log.append({"step": step, "loss": float(step)})
    with RunLog(tmp_path, start_step=2) as log:
        for step in (3, 4):
            log.append({"step": step, "loss": 10.0 * step})
    first, second = sorted(p.name for p in tmp_path.glob(TENSORBOARD_EVENTS))
    assert first.split(".")[-1].strip("9") == "" and int(second.split(".")[3]) > int(first.split(".")[3])
    assert _scalars(tmp_path)["loss/total"] == [(1, 1), (2, 2), (3, 30), (4, 40)]


def test_a_resumed_run_shows_each_step_once(video_dir: Path, frame_cache: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason=NO_TENSORBOARD)
    config = tiny_config(video_dir, frame_cache, max_steps=5, collapse_every=2)
    run_dir = tmp_path / "run"
    train(config, run_dir, stop_after=2)
    assert len(list(run_dir.glob(TENSORBOARD_EVENTS))) == 1
    train(resume=run_dir / CHECKPOINT_NAME)
    assert len(list(run_dir.glob(TENSORBOARD_EVENTS))) == 2  # one event file per start
    records = _records(run_dir / LOG_NAME)
    scalars = _scalars(run_dir)
    for key in ("loss", "vid", "mim", "jigsaw", "lr", "weight_decay", "momentum", "samples_per_s"):
        points = scalars[scalar_tag(key)]
        assert [step for step, _ in points] == [r["step"] for r in records] == [1, 2, 3, 4, 5], key
        assert [value for _, value in points] == pytest.approx([r[key] for r in records], rel=1e-6), key
    assert [step for step, _ in scalars["collapse/entropy_ratio"]] == [2, 4]


def test_overwrite_removes_the_event_files(tmp_path: Path) -> None:
    for name in ("events.out.tfevents.1.host.1.0", LOG_NAME, "notes.txt"):
        (tmp_path / name).write_text("x")
    remove_run_files(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]

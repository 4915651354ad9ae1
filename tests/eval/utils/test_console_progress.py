"""`progress_bar` off a terminal: plain lines while the work runs (not only at the end), on a fake clock;
the linear probe's steps through it."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from rich.console import Console
from rich.progress import TextColumn

import plstitch_eval.utils.console as console_module
from plstitch_eval.linear_grid import LinearConfig, train_linear_grid
from plstitch_eval.utils.console import LineProgress, progress_bar


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def log(monkeypatch):
    """The informational console writing to a StringIO: not a terminal, as when stderr is a file."""
    sink = io.StringIO()
    monkeypatch.setattr(console_module, "console", Console(file=sink, markup=False, width=200))
    return sink


def lines(sink: io.StringIO) -> list[str]:
    return [line for line in sink.getvalue().splitlines() if line.strip()]


def expected_counts(step_s: float, total: int, every_s: float) -> list[int]:
    """Written out: a line after the first step, then when `every_s` passed since the last line, and at
    the last step."""
    printed, last = [], None
    for done in range(1, total + 1):
        now = done * step_s
        if last is None or now - last >= every_s or done == total:
            printed.append(done)
            last = now
    return printed


def test_lines_appear_while_the_work_runs(log):
    clock = Clock()
    seen_during = []
    with progress_bar(TextColumn("{task.fields[frames]} frames"), get_time=clock) as bar:
        assert isinstance(bar, LineProgress)
        task = bar.add_task("extract", total=10, frames=0)
        for done in range(1, 11):
            clock.now += 2.1
            bar.update(task, advance=1, frames=done * 100)
            seen_during.append(len(lines(log)))
    assert seen_during[0] == 1  # the first step is logged at once: the run has started
    assert seen_during[3] == 2 and seen_during[8] == 3  # more lines before the end, not all at stop
    got = lines(log)
    counts = [int(line.split(": ")[1].split("/")[0]) for line in got]
    assert counts == expected_counts(2.1, 10, 5.0) == [1, 4, 7, 10]
    assert got[0] == "extract: 1/10 (10%)  100 frames  elapsed 0:00:02, 2.1 s each, ETA 0:00:19"
    assert got[-1] == "extract: 10/10 (100%)  1000 frames  elapsed 0:00:21, 2.1 s each"  # once, at the end


def test_stop_prints_the_unfinished_state_and_rates_exclude_resumed_work(log):
    clock = Clock()
    with progress_bar(get_time=clock) as bar:
        task = bar.add_task("benchmark", total=10, completed=3)  # resumed: 3 done earlier
        for _ in range(2):
            clock.now += 0.25
            bar.advance(task)
    got = lines(log)
    # after 0.5 s, 2 new steps: 4/s, ETA (10 - 5) / 4 = 1.25 s
    assert got == [
        "benchmark: 4/10 (40%)  elapsed 0:00:00, 4/s, ETA 0:00:02",
        "benchmark: 5/10 (50%)  elapsed 0:00:00, 4/s, ETA 0:00:01",
    ]


def test_a_log_file_receives_lines_before_the_end(monkeypatch, tmp_path):
    path = tmp_path / "run.log"
    clock = Clock()
    with path.open("w") as handle:
        monkeypatch.setattr(console_module, "console", Console(file=handle, markup=False, width=200))
        with progress_bar(TextColumn("{task.fields[status]}"), get_time=clock) as bar:
            task = bar.add_task("MS-TCN (accuracy)", total=50, status="")
            clock.now += 7.0
            bar.update(task, advance=1, status="val 41.0, best 41.0 @1")
            assert path.read_text() == (
                "MS-TCN (accuracy): 1/50 (2%)  val 41.0, best 41.0 @1  elapsed 0:00:07, 7 s each, "
                "ETA 0:05:43\n"
            )


def test_nothing_when_quiet_or_disabled(log):
    console_module.console.quiet = True
    for disable in (False, True):
        with progress_bar(disable=disable) as bar:
            task = bar.add_task("quiet", total=2)
            bar.advance(task, 2)
    console_module.console.quiet = False
    with progress_bar(disable=True) as bar:
        task = bar.add_task("disabled", total=2)
        bar.advance(task, 2)
    assert log.getvalue() == ""


def test_a_terminal_keeps_the_live_bar(monkeypatch):
    sink = io.StringIO()
    monkeypatch.setattr(
        console_module, "console", Console(file=sink, markup=False, force_terminal=True, width=100)
    )
    with progress_bar() as bar:
        assert not isinstance(bar, LineProgress)
        task = bar.add_task("extract", total=2)
        bar.advance(task, 2)
    assert "extract: 2/2" not in sink.getvalue() and "extract" in sink.getvalue()


def test_linear_probe_training_reports_its_steps_off_a_terminal(log):
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(300, 8)).astype(np.float32), rng.integers(0, 3, 300)
    config = LinearConfig(lrs=(0.1, 0.01), weight_decays=(0.0,), epochs=3, batch_size=100, device="cpu")
    quiet_grid = train_linear_grid(features, labels, 3, config)
    assert log.getvalue() == ""  # progress is opt-in for the library call
    grid = train_linear_grid(features, labels, 3, config, progress=True)
    got = lines(log)
    assert got[0].startswith("linear probe (2 heads): 1/9 (11%)  epoch 1/3  elapsed ")
    assert got[-1].startswith("linear probe (2 heads): 9/9 (100%)  epoch 3/3  elapsed ")
    assert torch.equal(grid.weight, quiet_grid.weight)  # showing progress changes nothing trained

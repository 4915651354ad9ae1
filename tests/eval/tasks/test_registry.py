"""The task registry: the shipped tasks in order, one-line refusals (unknown names, a protocol that cannot fit
a task's head, a bad horizon, labels a store lacks), and a task registered by a test that runs through the
k-NN and linear regression heads and `plstitch linear --task` with no other change."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.metrics.remaining import video_end_s
from plstitch_eval.protocols.regression import run_knn_regression, run_linear_regression
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.tasks import (
    MULTI_CLASS,
    MULTI_LABEL,
    REGRESSION,
    TASKS,
    Regression,
    Scored,
    StoreInfo,
    Task,
    TaskSettings,
    get_task,
    register_task,
    registered_tasks,
    task_for,
)
from tests.eval.protocols.regression_stores import write_store_without_tools
from tests.eval.protocols.stores import CLASSES, write_store

SHIPPED = [
    ("phases", MULTI_CLASS),
    ("tools", MULTI_LABEL),
    ("anticipation", REGRESSION),
    ("rsd", REGRESSION),
]
SMALL_LINEAR = LinearConfig(lrs=(0.01, 0.1), weight_decays=(0.0,), epochs=3, batch_size=64, device="cpu")
runner = CliRunner()


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    return message


# ---------------------------------------------------------------------------------------- shipped tasks
def test_the_four_shipped_tasks_come_first_in_order_with_their_heads() -> None:
    tasks = registered_tasks()
    assert [(t.name, t.head) for t in tasks[:4]] == SHIPPED
    assert [TASKS.package(name) for name, _ in SHIPPED] == ["plstitch"] * 4
    for task in tasks[:4]:
        assert get_task(task.name) is task
        assert (task.regression is not None) == (task.head == REGRESSION)
    assert get_task("anticipation").uses_horizon and not get_task("rsd").uses_horizon
    assert get_task("phases").results_task("linear") == "linear"  # the results it always wrote
    assert get_task("tools").results_task("linear") == "linear-tools"
    assert get_task("rsd").results_task("knn") == "knn-rsd"


def test_an_unknown_task_is_one_line_with_a_close_match() -> None:
    with pytest.raises(ConfigError) as exc:
        get_task("anticipaton")
    message = one_line(exc)
    assert "Did you mean 'anticipation'?" in message
    assert "Known: phases, tools, anticipation, rsd" in message
    with pytest.raises(ConfigError, match="Unknown --task 'zzz'") as far:
        get_task("zzz")
    assert "Did you mean" not in one_line(far)


def test_a_protocol_that_cannot_fit_the_head_is_refused_naming_what_it_takes() -> None:
    with pytest.raises(ConfigError) as exc:
        task_for("tools", "knn")
    message = one_line(exc)
    assert message.startswith("--task tools is not fitted by knn")
    assert "multi-label" in message
    takes = message.split("knn takes --task ", 1)[1].rstrip(".").split(", ")
    assert takes[:3] == ["phases", "anticipation", "rsd"] and "tools" not in takes
    assert task_for("rsd", "knn") is get_task("rsd")


@pytest.mark.parametrize("horizon", [0, 0.0, -1.5, math.nan, math.inf, "3"])
def test_a_horizon_that_is_not_a_positive_number_of_minutes_is_refused_in_one_line(horizon) -> None:
    with pytest.raises(ConfigError) as exc:
        TaskSettings(horizon_min=horizon)
    assert one_line(exc).startswith("--horizon must be")


@pytest.mark.parametrize("anticipate", ["", "instruments", "phases,steps", ","])
def test_anticipate_names_phases_or_tools(anticipate: str) -> None:
    with pytest.raises(ConfigError) as exc:
        TaskSettings(anticipate=anticipate)
    assert one_line(exc).startswith("--anticipate must be auto, phases, tools or phases,tools")
    assert TaskSettings(0.25, "tools,phases").record() == {
        "horizon_min": 0.25,
        "anticipate": "tools,phases",
        "elapsed": False,
    }


def test_a_task_is_checked_when_made_and_a_shipped_name_is_not_taken_again() -> None:
    with pytest.raises(ConfigError, match="head must be one of multi-class, multi-label, regression"):
        Task("x", "s", "ordinal", "l", ("m",), "m", ("knn",))
    with pytest.raises(ConfigError, match="a regression head needs a Regression"):
        Task("x", "s", REGRESSION, "l", ("m",), "m", ("knn",))
    shipped = get_task("rsd")
    try:
        with pytest.raises(ConfigError) as exc:
            register_task(Task("rsd", "another", MULTI_CLASS, "l", ("m",), "m", ("knn",)))
        assert "already registered, by package 'plstitch'" in one_line(exc)
        assert get_task("rsd") is shipped  # the shipped one stays
    finally:
        if TASKS["rsd"] is not shipped:  # the later tests get the shipped task back, whatever happened here
            TASKS["rsd"] = shipped


# ------------------------------------------------------------------------------ a store without tool labels
@pytest.fixture(scope="module")
def no_tools(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    store = write_store_without_tools(tmp_path_factory.mktemp("no-tools") / "store")
    assert "tool_names" not in store.manifest and store.read("test0").tools is None
    return store


def test_anticipating_tools_on_a_store_without_tool_labels_names_the_labels_it_holds(no_tools) -> None:
    for run in (run_knn_regression, run_linear_regression):
        with pytest.raises(ConfigError) as exc:
            run(no_tools.root, "anticipation", TaskSettings(anticipate="tools"))
        message = one_line(exc)
        assert message.startswith(f"--anticipate tools: {no_tools.root} has no tool labels")
        assert "it holds phases (4 classes)" in message
    # auto anticipates the phases alone there; asking for both is refused the same way
    results = run_knn_regression(no_tools.root, "anticipation", TaskSettings(0.5), KnnConfig(k=5))
    assert results["protocol"]["outputs"] == CLASSES
    assert all(len(row) == len(CLASSES) for row in results["predictions"]["test0"])
    assert not any(key.startswith("tool_") for key in results["metrics"])
    with pytest.raises(ConfigError, match="has no tool labels"):
        run_knn_regression(no_tools.root, "anticipation", TaskSettings(anticipate="phases,tools"))


def test_the_cli_refuses_anticipating_tools_there_in_one_line(no_tools) -> None:
    result = runner.invoke(
        app, ["linear", "--features", str(no_tools.root), "--task", "anticipation", "--anticipate", "tools"]
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and lines[0].startswith("error: --anticipate tools:"), lines
    assert "phases (4 classes)" in lines[0]


# ------------------------------------------------------------------------------ a task registered in a test
PROGRESS = "toy-progress"


def progress_targets(item: VideoFeatures, _info: StoreInfo, _settings: TaskSettings) -> np.ndarray:
    """The fraction of the video elapsed at each frame: frame time / the video's end (frames x 1)."""
    times = np.asarray(item.frame_times, np.float64)
    return (times / video_end_s(times))[:, None]


def progress_score(
    predictions: Mapping[str, np.ndarray], truth: Mapping[str, np.ndarray], _info, _settings
) -> Scored:
    errors = {v: np.abs(np.asarray(predictions[v])[:, 0] - np.asarray(truth[v])[:, 0]) for v in truth}
    pooled = float(np.concatenate(list(errors.values())).mean())
    return Scored({"MAE": pooled}, {v: {"MAE": float(e.mean())} for v, e in errors.items()}, {}, pooled)


def progress_references(
    train: Sequence[VideoFeatures], test: Sequence[VideoFeatures], info: StoreInfo, settings: TaskSettings
) -> dict[str, tuple[str, dict[str, np.ndarray]]]:
    half = {item.video: np.full((len(item.features), 1), 0.5) for item in test}
    return {"half": ("half the video, always", half)}


PROGRESS_TASK = Task(
    name=PROGRESS,
    summary="the fraction of the video elapsed",
    head=REGRESSION,
    labels="frame times only",
    metrics=("MAE",),
    select_metric="MAE",
    protocols=("knn", "linear"),
    regression=Regression(
        outputs=lambda _info, _settings: ["progress"],
        targets=progress_targets,
        bounds=lambda _info, _settings: (0.0, 1.0),
        score=progress_score,
        references=progress_references,
    ),
)


@pytest.fixture
def progress_task() -> Iterator[Task]:
    with TASKS.registered(PROGRESS, PROGRESS_TASK) as task:
        yield task
    assert PROGRESS not in TASKS


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    return write_store(tmp_path_factory.mktemp("progress") / "store")


def check_progress_results(results: dict, store: FeatureStore, head: str) -> None:
    """The results of the toy task: its name, bounds, and MAEs recomputed here from the predictions."""
    assert results["task"] == results["protocol"]["name"] == f"{head}-{PROGRESS}"
    assert results["protocol"]["task"] == PROGRESS and results["protocol"]["outputs"] == ["progress"]
    assert results["headline_metrics"] == ["MAE"]
    assert sorted(results["predictions"]) == store.splits()["test"]
    errors, half_errors = [], []
    for video, preds in results["predictions"].items():
        times = store.read(video).frame_times
        end = times[-1] + (times[1] - times[0])  # 1 s frames
        assert len(preds) == len(times)
        for pred, time in zip(preds, times, strict=True):
            assert 0.0 <= pred <= 1.0
            errors.append(abs(pred - time / end))
            half_errors.append(abs(0.5 - time / end))
    assert results["metrics"]["MAE"] == pytest.approx(sum(errors) / len(errors), abs=5.01e-5)  # 4 decimals
    half = results["references"]["half"]
    assert half["description"] == "half the video, always"
    assert half["metrics"]["MAE"] == pytest.approx(sum(half_errors) / len(half_errors), abs=1e-12)


def test_a_registered_task_runs_through_both_heads(progress_task, store) -> None:
    assert PROGRESS in [t.name for t in registered_tasks()][4:]  # after the shipped ones
    linear = run_linear_regression(store.root, PROGRESS, TaskSettings(), SMALL_LINEAR)
    check_progress_results(linear, store, "linear")
    assert linear["protocol"]["target_scale_min"] == 1.0  # its upper bound
    assert len(linear["protocol"]["val_scores"]) == 2
    knn = run_knn_regression(store.root, PROGRESS, TaskSettings(), KnnConfig(k=7))
    check_progress_results(knn, store, "knn")
    assert knn["protocol"]["k_used"] == 7


def test_a_registered_task_runs_through_the_cli_and_is_listed(progress_task, store, tmp_path) -> None:
    out = tmp_path / "progress.json"
    args = ["--features", str(store.root), "--task", PROGRESS, "--epochs", "3", "--device", "cpu"]
    result = runner.invoke(app, ["linear", *args, "--lr", "0.1", "--wd", "0", "--json", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text(encoding="utf-8"))
    check_progress_results(results, store, "linear")
    assert results["protocol"]["chosen_lr"] == 0.1
    listed = runner.invoke(app, ["tasks", "--json", "-"])
    rows = {row["name"]: row for row in json.loads(listed.stdout)["tasks"]}
    assert rows[PROGRESS]["head"] == REGRESSION
    assert rows[PROGRESS]["results_tasks"] == {"knn": f"knn-{PROGRESS}", "linear": f"linear-{PROGRESS}"}
    refused = runner.invoke(app, ["linear", *args, "--horizon", "2"])
    assert refused.exit_code == 1 and f"--task {PROGRESS} takes neither" in refused.stderr

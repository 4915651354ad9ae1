"""Registry-wide guards over every registered regression task (anticipation, rsd, a plugin's).

Generated from the task registry, so a task is covered when it registers: every task whose head is
regression, times every protocol of `task.protocols` among knn, linear and temporal, runs on one small store
and on copies of it whose test, or validation, videos have other targets but the same features (phase and
tool labels permuted as `permuted_copy` does, frame times warped non-uniformly, so remaining time and
time to the next phase both change). Test targets must move the test metrics and nothing else (not the
choice, not a validation figure, not a prediction); validation targets must move the validation figures of
the heads that choose (linear, temporal), so the first guard cannot pass vacuously. Then: every task setting
the task takes is recorded and changes the run, a training fraction of 1 is the run without one and a
fraction below 1 trains on subsets of the training videos only, and cross-validation tests every video once.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols import run_knn, run_linear
from plstitch_eval.protocols.fractions import RULE, TrainFraction
from plstitch_eval.protocols.regression import (
    run_knn_regression,
    run_linear_regression,
    run_temporal_regression,
)
from plstitch_eval.protocols.regression_cv import run_regression_cv
from plstitch_eval.protocols.temporal import temporal_run
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.tasks import REGRESSION, Task, TaskSettings, get_task, registered_tasks
from plstitch_eval.temporal.fit import TemporalConfig
from tests.eval.protocols.stores import permuted_copy, write_store

HORIZON = 0.5  # minutes: the 1-fps store's videos last 25-40 s
HEADS = ("knn", "linear", "temporal")  # the regression protocols these guards run
# (0.1, 0.3) over 3 epochs: on this store each task's validation targets, changed, move the chosen lr
LINEAR = LinearConfig(lrs=(0.1, 0.3), weight_decays=(0.0,), epochs=3, batch_size=64, device="cpu")
TEMPORAL = TemporalConfig(stages=2, layers=2, channels=8, epochs=3, device="cpu")
KNN = KnnConfig()
CONFIGS: dict[str, Any] = {"knn": KNN, "linear": LINEAR, "temporal": TEMPORAL}
RUNS: dict[str, Callable[..., dict[str, Any]]] = {
    "knn": run_knn_regression,
    "linear": run_linear_regression,
    "temporal": run_temporal_regression,
}
CHOICES = {"linear": ("chosen_lr", "chosen_weight_decay"), "temporal": ("best_epoch",)}  # the choosers
# (task, protocol) whose choice stays on this tiny store when the validation targets change (its validation
# figures still move, checked): the 3-epoch MS-TCN's last epoch stays the best for anticipation on both.
CHOICE_STAYS = {("anticipation", "temporal")}
FRACTION = TrainFraction(0.5, (0, 1))


def warp(times: np.ndarray) -> np.ndarray:
    """Frame times stretched non-uniformly (1.5 t^1.1 seconds): other durations and other times to a phase."""
    return 1.5 * np.asarray(times, np.float64) ** 1.1


def regression_tasks() -> list[Task]:
    return [task for task in registered_tasks() if task.head == REGRESSION]


CASES = [(task.name, p) for task in regression_tasks() for p in task.protocols if p in HEADS]
CHOOSING = [(name, p) for name, p in CASES if p in CHOICES]


def ids(cases: list[tuple[str, ...]]) -> list[str]:
    return ["-".join(case) for case in cases]


def base_settings(name: str) -> TaskSettings:
    """The settings every guard starts from: a horizon the tiny store's videos fit, no elapsed input."""
    return TaskSettings(horizon_min=HORIZON) if get_task(name).uses_horizon else TaskSettings()


# a value other than `settings`' for each TaskSettings field, valid for the store (phases and tools)
OTHER_SETTING: dict[str, Callable[[TaskSettings], Any]] = {
    "horizon_min": lambda s: s.horizon_min / 2,
    "anticipate": lambda s: next(a for a in ("phases", "tools", "phases,tools") if a != s.anticipate),
    "elapsed": lambda s: not s.elapsed,
}


def takes(name: str, protocol: str, field: str) -> bool:
    """Whether `name` on `protocol` takes the setting: the horizon and what is anticipated where the task
    uses a horizon, the elapsed input column on the heads that have inputs beside the features."""
    if field in ("horizon_min", "anticipate"):
        return get_task(name).uses_horizon
    if field == "elapsed":
        return protocol in CHOICES  # k-NN's cosine neighbours take no minutes column
    raise AssertionError(f"teach `takes` which tasks take {field}")


SETTING_CASES = [
    (name, protocol, f.name)
    for name, protocol in CASES
    for f in dataclasses.fields(TaskSettings)
    if f.name in OTHER_SETTING and takes(name, protocol, f.name)
]


# --------------------------------------------------------------------------------------------- the stores
def retargeted_copy(store: FeatureStore, root: Path, split: str | list[str]) -> FeatureStore:
    """`store` with `split`'s videos (a split's name or the videos) given other targets and the same
    features: phase and tool labels permuted (`permuted_copy`) and frame times warped."""
    copy = permuted_copy(store, root, split)
    videos = store.manifest["splits"][split] if isinstance(split, str) else split
    for video in videos:
        item = copy.read(video)
        copy.write(VideoFeatures(video, item.features, item.labels, warp(item.frame_times), item.tools))
    return copy


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FeatureStore]:
    root = tmp_path_factory.mktemp("every-task")
    store = write_store(root / "store")
    return {
        "store": store,
        "test": retargeted_copy(store, root / "test-retargeted", "test"),
        "val": retargeted_copy(store, root / "val-retargeted", "val"),
    }


_RUN_CACHE: dict[tuple[Any, ...], dict[str, Any]] = {}


def run(
    name: str,
    protocol: str,
    stores: dict[str, FeatureStore],
    which: str = "store",
    settings: TaskSettings | None = None,
    fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """`protocol`'s regression run of task `name` on one of the stores (each run once per module)."""
    settings = settings or base_settings(name)
    key = (name, protocol, which, settings, fraction)
    if key not in _RUN_CACHE:
        _RUN_CACHE[key] = RUNS[protocol](
            stores[which].root, name, settings, CONFIGS[protocol], train_fraction=fraction
        )
    return _RUN_CACHE[key]


@pytest.mark.parametrize(("name", "protocol"), CHOOSING, ids=ids(CHOOSING))
def test_a_chooser_records_the_task_figure_it_chose_on(
    name: str, protocol: str, stores: dict[str, FeatureStore]
) -> None:
    record = run(name, protocol, stores)["protocol"]
    assert record["select_metric"] == get_task(name).select_metric  # not the phase config's "accuracy"


def choice(protocol: str, record: dict[str, Any]) -> dict[str, Any]:
    return {key: record[key] for key in CHOICES[protocol]}


def figures(val_scores: dict[str, float] | list[float]) -> list[float]:
    """The validation figures in grid (or epoch) order."""
    return list(val_scores.values()) if isinstance(val_scores, dict) else list(val_scores)


# --------------------------------------------------------------------------------------- the registry
def test_every_regression_task_is_covered_by_these_guards() -> None:
    """The guards run every protocol a regression task names, and the shipped tasks are among them."""
    for task in regression_tasks():
        assert set(task.protocols) <= set(HEADS), f"{task.name}: teach these guards {task.protocols}"
        assert task.protocols, f"{task.name} names no protocol"
    assert {"anticipation", "rsd"} <= {name for name, _ in CASES}
    assert set(OTHER_SETTING) == {f.name for f in dataclasses.fields(TaskSettings)}, (
        "a new TaskSettings field"
    )


# ----------------------------------------------------------------------------------- selection is blind
@pytest.mark.parametrize(("name", "protocol"), CASES, ids=ids(CASES))
def test_test_targets_move_the_test_metrics_and_nothing_else(
    name: str, protocol: str, stores: dict[str, FeatureStore]
) -> None:
    assert not base_settings(name).elapsed  # the warped frame times would be an input with --elapsed
    before, after = run(name, protocol, stores), run(name, protocol, stores, "test")
    assert after["protocol"] == before["protocol"]  # settings, the choice, every validation figure
    assert after["predictions"] == before["predictions"]
    assert after["metrics"] != before["metrics"]
    assert after["per_video"] != before["per_video"]


@pytest.mark.parametrize(("name", "protocol"), CHOOSING, ids=ids(CHOOSING))
def test_validation_targets_move_the_choice(
    name: str, protocol: str, stores: dict[str, FeatureStore]
) -> None:
    before, after = run(name, protocol, stores), run(name, protocol, stores, "val")
    old, new = before["protocol"]["val_scores"], after["protocol"]["val_scores"]
    assert len(figures(new)) == len(figures(old)) > 1
    assert all(a != pytest.approx(b, abs=1e-9) for a, b in zip(figures(old), figures(new), strict=True))
    if (name, protocol) not in CHOICE_STAYS:
        assert choice(protocol, after["protocol"]) != choice(protocol, before["protocol"])


# ----------------------------------------------------------------------------------- every setting arrives
@pytest.mark.parametrize(("name", "protocol", "field"), SETTING_CASES, ids=ids(SETTING_CASES))
def test_a_task_setting_is_recorded_and_changes_the_run(
    name: str, protocol: str, field: str, stores: dict[str, FeatureStore]
) -> None:
    base = base_settings(name)
    value = OTHER_SETTING[field](base)
    assert value != getattr(base, field)
    results = run(name, protocol, stores, settings=dataclasses.replace(base, **{field: value}))
    assert results["protocol"][field] == value
    assert all(results["protocol"][f] == v for f, v in base.record().items() if f != field)
    before = run(name, protocol, stores)
    assert before["protocol"][field] == getattr(base, field)
    changed = (results["metrics"], results["predictions"]) != (before["metrics"], before["predictions"])
    assert changed, f"{name} {protocol}: {field} = {value!r} changed nothing in the run"


# ----------------------------------------------------------------------------------- training fractions
def _without_time(results: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in results.items() if k != "created"}, sort_keys=True)


@pytest.mark.parametrize(("name", "protocol"), CASES, ids=ids(CASES))
def test_fraction_one_is_the_run_without_a_fraction(
    name: str, protocol: str, stores: dict[str, FeatureStore]
) -> None:
    today = run(name, protocol, stores)
    whole = run(name, protocol, stores, fraction=TrainFraction(1.0, FRACTION.seeds))
    assert _without_time(whole) == _without_time(today)
    assert "train_fraction" not in today


_PHASE_RUNS: dict[str, dict[str, Any]] = {}


def phase_run(protocol: str, store: FeatureStore) -> dict[str, Any]:
    """The phase protocol of the same name at `FRACTION` (each run once per module)."""
    if protocol not in _PHASE_RUNS:
        phase = {
            "knn": lambda: run_knn(store.root, KNN, train_fraction=FRACTION),
            "linear": lambda: run_linear(store.root, LINEAR, train_fraction=FRACTION),
            "temporal": lambda: (
                temporal_run(store.root, TEMPORAL, train_fraction=FRACTION, progress=False).results
            ),
        }
        _PHASE_RUNS[protocol] = phase[protocol]()
    return _PHASE_RUNS[protocol]


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


@pytest.mark.parametrize(("name", "protocol"), CASES, ids=ids(CASES))
def test_a_fraction_trains_on_subsets_of_the_training_videos_and_records_them(
    name: str, protocol: str, stores: dict[str, FeatureStore]
) -> None:
    full = run(name, protocol, stores)
    results = run(name, protocol, stores, fraction=FRACTION)
    block = results["train_fraction"]
    assert block["fraction"] == FRACTION.fraction and block["seeds"] == list(FRACTION.seeds)
    assert block["rule"] == RULE and len(block["subsets"]) == len(FRACTION.seeds)
    splits = full["splits"]
    assert results["splits"] == splits  # validation and test videos as they were
    assert sorted(results["predictions"]) == sorted(splits["test"])
    for seed, subset in zip(FRACTION.seeds, block["subsets"], strict=True):
        drawn = set(subset["videos"])
        assert subset["seed"] == seed and subset["videos_of"] == len(splits["train"])
        assert len(drawn) == math.ceil(FRACTION.fraction * len(splits["train"]))
        assert drawn < set(splits["train"])
        assert not drawn & set(splits["val"]) and not drawn & set(splits["test"])
    # drawn as the phase protocol of the same name draws them, and recorded alike
    phase = phase_run(protocol, stores["store"])["train_fraction"]
    unscored = lambda block: [{k: v for k, v in s.items() if k != "metrics"} for s in block["subsets"]]  # noqa: E731
    assert unscored(block) == unscored(phase)
    assert {k for k in block if k != "metrics_std"} == {k for k in phase if k != "metrics_std"}
    per_seed = np.array([[_number(s["metrics"][m]) for m in results["metrics"]] for s in block["subsets"]])
    np.testing.assert_allclose(list(results["metrics"].values()), per_seed.mean(0))
    np.testing.assert_allclose(list(results["metrics_std"].values()), per_seed.std(0, ddof=1))
    assert block["subsets"][0]["metrics"] != full["metrics"]  # trained on fewer videos


# --------------------------------------------------------------------------------------------------- CV
@pytest.mark.parametrize(("name", "protocol"), CASES, ids=ids(CASES))
def test_cv_tests_every_video_once(name: str, protocol: str, stores: dict[str, FeatureStore]) -> None:
    store = stores["store"]
    results = run_regression_cv(store.root, name, base_settings(name), protocol, CONFIGS[protocol], folds=3)
    videos = sorted(v for split in store.manifest["splits"].values() for v in split)
    tested = [v for fold in results["folds"] for v in fold["test"]]
    assert sorted(tested) == videos and len(tested) == len(set(tested))
    assert sorted(results["predictions"]) == videos and sorted(results["per_video"]) == videos
    assert results["task"] == f"cv-{get_task(name).results_task(protocol)}"
    assert results["protocol"]["task"] == name and len(results["folds"]) == 3
    if protocol in CHOICES:  # the folds choose on the task's validation error, not the phase config's
        assert results["protocol"]["select_metric"] == get_task(name).select_metric
        assert results["protocol"].get("balance_classes", False) is False
    for fold in results["folds"]:
        if protocol in CHOICES:
            assert set(CHOICES[protocol]) <= set(fold) and figures(fold["val_scores"])
        assert fold["metrics"].keys() == results["metrics"].keys()

"""`--train-fraction` through every protocol taking it (k-NN, linear, tool presence, MS-TCN, CV): fraction 1
is today's results bit for bit, a fraction trains on nested subsets of whole training videos (the same for
every encoder), validation and test videos stay, and the results record each subset and the mean ± std."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols import run_cv, run_knn, run_linear, run_tool_linear
from plstitch_eval.protocols.fractions import TrainFraction
from plstitch_eval.protocols.temporal import temporal_run
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.temporal.fit import TemporalConfig
from tests.eval.evaluate.conftest import make_store

from .stores import write_store

LINEAR = LinearConfig(lrs=(0.1,), weight_decays=(0.0,), epochs=3, batch_size=64, device="cpu")
TEMPORAL = TemporalConfig(stages=1, layers=2, channels=8, epochs=2)
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 videos: 12 training (val held out of them by linear), 4 test; every video has every class."""
    return make_store(tmp_path_factory.mktemp("fraction") / "store", n_videos=16, with_val=False, seed=1).root


@pytest.fixture(scope="module")
def tool_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Phases and tools, official train (6) / val (3) / test (3) splits."""
    return write_store(tmp_path_factory.mktemp("tools") / "store").root


def _without_time(results: dict) -> dict:
    return {k: v for k, v in results.items() if k != "created"}


RUNS = {
    "knn": lambda s, f: run_knn(s, KnnConfig(k=5), train_fraction=f),
    "linear": lambda s, f: run_linear(s, LINEAR, train_fraction=f),
    "tools": lambda s, f: run_tool_linear(s, replace(LINEAR, balance_classes=True), train_fraction=f),
    "cv-knn": lambda s, f: run_cv(s, folds=3, knn_config=KnnConfig(k=5), train_fraction=f),
    "temporal": lambda s, f: temporal_run(s, TEMPORAL, train_fraction=f, progress=False).results,
}


@pytest.mark.parametrize("protocol", list(RUNS))
def test_fraction_one_is_todays_result_bit_for_bit(protocol: str, store: Path, tool_store: Path) -> None:
    features = tool_store if protocol == "tools" else store
    today = _without_time(RUNS[protocol](features, None))
    assert _without_time(RUNS[protocol](features, TrainFraction(1.0, (0, 1, 2)))) == today
    assert "train_fraction" not in today


@pytest.mark.parametrize("protocol", list(RUNS))
def test_a_fraction_trains_on_subsets_and_records_them(protocol: str, store: Path, tool_store: Path) -> None:
    features = tool_store if protocol == "tools" else store
    full = RUNS[protocol](features, None)
    results = RUNS[protocol](features, TrainFraction(0.5, (0, 1, 2)))
    block = results["train_fraction"]
    assert block["fraction"] == 0.5 and block["seeds"] == [0, 1, 2] and len(block["subsets"]) == 3
    assert results["splits"] == full["splits"]  # validation and test videos unchanged
    for subset in block["subsets"]:
        for drawn, pool in _drawn_and_pools(subset, full):
            assert set(drawn) < set(pool) and len(drawn) == -(-len(pool) // 2)
    per_seed = np.array([[s["metrics"][m] for m in results["metrics"]] for s in block["subsets"]], float)
    np.testing.assert_allclose(list(results["metrics"].values()), per_seed.mean(0))
    np.testing.assert_allclose(list(results["metrics_std"].values()), per_seed.std(0, ddof=1))
    assert set(results["per_video"]) == set(full["per_video"])


def _drawn_and_pools(subset: dict, full: dict) -> list[tuple[list[str], list[str]]]:
    """Each subset's videos and the training videos it was drawn from (per fold for CV)."""
    if "folds" not in subset:
        return [(subset["videos"], full["splits"]["train"])]
    every = sorted({v for fold in full["splits"]["folds"] for v in fold})
    pairs = []
    for fold, drawn in zip(full["splits"]["folds"], subset["folds"], strict=True):
        rest = [v for v in every if v not in fold]  # k-NN holds no validation videos out
        pairs.append((drawn["videos"], rest))
    return pairs


def test_subsets_nest_through_a_protocol_and_are_the_same_for_every_encoder(
    store: Path, tmp_path: Path
) -> None:
    seeds = (0, 1, 2, 3)
    quarter = run_knn(store, KnnConfig(k=5), train_fraction=TrainFraction(0.25, seeds))
    half = run_knn(store, KnnConfig(k=5), train_fraction=TrainFraction(0.5, seeds))
    for small, large in zip(
        quarter["train_fraction"]["subsets"], half["train_fraction"]["subsets"], strict=True
    ):
        assert set(small["videos"]) < set(large["videos"])
    other = _other_encoder(FeatureStore(store), tmp_path / "other")
    again = run_knn(other.root, KnnConfig(k=5), train_fraction=TrainFraction(0.25, seeds))
    assert [s["videos"] for s in again["train_fraction"]["subsets"]] == [
        s["videos"] for s in quarter["train_fraction"]["subsets"]
    ]
    assert again["metrics"] != quarter["metrics"]


def _other_encoder(store: FeatureStore, root: Path) -> FeatureStore:
    """The same videos and labels with other features (another encoder's store)."""
    other = FeatureStore.create(root, store.manifest)
    rng = np.random.default_rng(7)
    for video in store.videos():
        item = store.read(video)
        noisy = item.features + rng.normal(scale=2.0, size=item.features.shape).astype(np.float32)
        other.write(VideoFeatures(video, noisy, item.labels, item.frame_times))
    return other


def test_a_fraction_that_leaves_out_a_class_is_said_and_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store(tmp_path / "store", n_videos=6, with_val=False)  # 4 training videos
    for video in ("vid00", "vid01", "vid02", "vid03"):  # class 3 ("pour") in vid02 alone
        item = store.read(video)
        labels = np.arange(len(item.labels)) % (4 if video == "vid02" else 3)
        store.write(VideoFeatures(video, item.features, labels.astype(np.int64), item.frame_times))
    with caplog.at_level(logging.WARNING, logger="plstitch"):
        results = run_knn(store.root, KnnConfig(k=3), train_fraction=TrainFraction(0.25, (0, 1, 2, 3)))
    subsets = results["train_fraction"]["subsets"]
    lacking = [s for s in subsets if s["missing_classes"]]
    assert lacking and all("vid02" not in s["videos"] for s in lacking)
    assert all(s["missing_classes"] == ["pour"] for s in lacking)
    lines = [r.getMessage() for r in caplog.records if "--train-fraction" in r.getMessage()]
    assert len(lines) == 1 and "'pour'" in lines[0] and "1 of 4" in lines[0]


def test_cli_fraction_below_one_video_says_it_trains_on_one(store: Path) -> None:
    """Issue 64: `--train-fraction 0.01` of the 14 training videos is not silently one video."""
    result = runner.invoke(app, ["knn", "--features", str(store), "--train-fraction", "0.01", "--json", "-"])
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if "less than one video" in line]
    assert said == [
        "warning: --train-fraction 0.01 of 14 training videos is less than one video; each subset holds 1 "
        "video (1 of 14)."
    ], result.stderr
    subsets = json.loads(result.stdout)["train_fraction"]["subsets"]
    assert [(len(s["videos"]), s["videos_of"]) for s in subsets] == [(1, 14)] * 3


def test_cli_fraction_one_writes_todays_json_and_bad_values_are_one_line(store: Path, tmp_path: Path) -> None:
    for name, extra in (("today", []), ("one", ["--train-fraction", "1", "--fraction-seeds", "3"])):
        result = runner.invoke(
            app, ["knn", "--features", str(store), "--json", str(tmp_path / f"{name}.json"), *extra]
        )
        assert result.exit_code == 0, result.output
    today, one = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("today", "one"))
    assert _without_time(one) == _without_time(today)
    linear = ["linear", "--features", str(store), "--epochs", "2", "--device", "cpu"]
    half_json = tmp_path / "half.json"
    flags = ["--train-fraction", "0.5", "--fraction-seeds", "0,5", "--json", str(half_json)]
    half = runner.invoke(app, [*linear, *flags])
    assert half.exit_code == 0, half.output
    title = " ".join(half.stdout.split())  # `1/2 of train (N of M videos), ...` once given the results
    assert "1/2 of train" in title and "mean ± std over 2 subsets" in title
    assert json.loads(half_json.read_text())["train_fraction"]["seeds"] == [0, 5]
    for flags, named in (
        (["--train-fraction", "0"], "--train-fraction"),
        (["--train-fraction", "1.5"], "--train-fraction"),
        (["--train-fraction", "0.5", "--fraction-seeds", "a,b"], "--fraction-seeds"),
        (["--fraction-seeds", "3"], "--fraction-seeds"),
    ):
        result = runner.invoke(app, ["knn", "--features", str(store), *flags])
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code == 1 and len(lines) == 1 and named in lines[0], result.output
        assert "Traceback" not in result.output
    saved = runner.invoke(
        app, ["linear", "--features", str(store), "--train-fraction", "0.5", "--save", str(tmp_path / "p")]
    )
    assert saved.exit_code == 1 and "--save" in saved.stderr and not (tmp_path / "p").exists()


def test_the_temporal_title_says_how_many_videos_a_subset_holds(store: Path) -> None:
    """Issue 64: `0.01 of train` rounded up to one video says `1 of N videos` in the title."""
    run = temporal_run(store, TEMPORAL, train_fraction=TrainFraction(0.01, (0,)), progress=False)
    [subset] = run.results["train_fraction"]["subsets"]
    assert len(subset["videos"]) == 1
    assert f", 0.01 of train (1 of {subset['videos_of']} videos), mean ± std over 1 subset, " in run.title

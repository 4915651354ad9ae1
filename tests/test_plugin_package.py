"""The worked example `examples/plstitch-toy-plugin/` installs with pip and extends every registry through
entry points alone: `plstitch` in a fresh process lists its protocol, objective, encoder, dataset and task
with its package, cross-validates, trains, makes the encoder's weights and extracts features with them, and
fits a linear head on the task. A second
package whose plugins are broken (one raises on import, one registers the shipped name `knn`) costs one
warning line each, naming the plugin and both packages, and the rest works.

Nothing is mocked: each package is built by pip (`--no-deps --no-build-isolation`, offline) from a copy of its
folder into a temporary `--target`, and every command is a subprocess with that folder on PYTHONPATH.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.neighbors import NearestCentroid

from plstitch_eval.protocols import stack_labelled
from plstitch_eval.store.features import FeatureStore
from tests.eval.protocols.stores import write_store

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "plstitch-toy-plugin"
PACKAGE = "plstitch-toy-plugin"
BAD_PACKAGE = "plstitch-bad-plugin"
TIMEOUT = 180

BAD_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "plstitch-bad-plugin"
version = "0.1.0"

[project.entry-points."plstitch.protocols"]
broken = "plstitch_bad_plugin.broken"
knn = "plstitch_bad_plugin.knn"

[tool.setuptools]
packages = ["plstitch_bad_plugin"]
"""
BROKEN = 'raise RuntimeError("this toy plugin is broken on purpose")\n'
SHIPPED_NAME = """\
from plstitch_eval.protocols import Protocol, register_protocol

register_protocol(Protocol(name="knn", label="another k-NN", title="Another k-NN"))
"""


def _pip_install(source: Path, target: Path) -> Path:
    """`pip install --no-deps --no-build-isolation --target TARGET` of a copy of `source` (the build writes
    build/ and *.egg-info beside the sources: the checkout stays clean); returns `target`."""
    copy = target.with_name(target.name + "-src")
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    args = ["--no-deps", "--no-build-isolation", "--no-index", "--disable-pip-version-check", "--quiet"]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", *args, "--target", str(target), str(copy)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return target


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this module's runs; its `cache/` is their PLSTITCH_CACHE (where toy-colours is written)."""
    return tmp_path_factory.mktemp("plugin")


@pytest.fixture(scope="module")
def site(work: Path) -> Path:
    """The example package installed with pip into a folder of its own."""
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is missing: pip cannot build the example without build isolation (offline)")
    return _pip_install(EXAMPLE, work / "site")


def _run(
    work: Path, sites: list[Path], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in `work` with `sites` (then the repository) on PYTHONPATH; wide lines, no wrapping."""
    path = [*map(str, sites), str(REPO), os.environ.get("PYTHONPATH", "")]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(p for p in path if p),
        PLSTITCH_CACHE=str(work / "cache"),
        COLUMNS="400",
        **(env or {}),
    )
    env.pop("PLSTITCH_DEBUG", None)
    return subprocess.run(
        [sys.executable, *args], cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )


def _plstitch(
    work: Path, sites: list[Path], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = _run(work, sites, "-m", "plstitch_eval", *args, env=env)
    assert done.returncode == 0, f"plstitch {' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done


def test_every_listing_names_the_plugin_and_its_package(site: Path, work: Path) -> None:
    listed = _plstitch(work, [site], "protocols", "--json", "-")
    protocols = json.loads(listed.stdout)["protocols"]
    rows = {row["name"]: row for row in protocols}
    assert rows["toy-centroid"]["package"] == PACKAGE and rows["knn"]["package"] == "plstitch"
    assert rows["toy-centroid"]["cv"] and rows["toy-centroid"]["benchmark"]
    assert rows["toy-centroid"]["settings"] == [{"name": "normalize", "default": False, "runtime": False}]
    assert [row["name"] for row in protocols][-1] == "toy-centroid"  # after the shipped ones

    objectives = json.loads(_plstitch(work, [site], "objectives", "--json", "-").stdout)["objectives"]
    assert {"name": "toy-margin", "package": PACKAGE} in [
        {k: row[k] for k in ("name", "package")} for row in objectives
    ]

    # $PLSTITCH_TOY_VIT, when set, wins over the entry's own folder (here: the shipped tiny model's folder)
    elsewhere = {"PLSTITCH_TOY_VIT": str(REPO / "model_cards" / "plstitch-tiny-synthetic")}
    models = _plstitch(work, [site], "models", "--json", "-", env=elsewhere)
    toy = next(row for row in json.loads(models.stdout) if row["name"] == "toy-vit")
    assert toy["package"] == PACKAGE and toy["feature_dim"] == 32 and toy["cached"]
    assert toy["source"] == "weights/toy-vit (or $PLSTITCH_TOY_VIT)"

    datasets = _plstitch(work, [site], "datasets")
    assert f"toy-colours (from {PACKAGE})" in datasets.stdout
    tasks = _plstitch(work, [site], "tasks")
    assert f"toy-progress (from {PACKAGE}): the fraction of the video elapsed" in tasks.stdout
    assert "rsd: " in tasks.stdout.split("toy-progress", 1)[0]  # after the shipped ones
    assert "did not load" not in listed.stderr + models.stderr + datasets.stderr + tasks.stderr


def test_the_encoder_makes_its_weights_extracts_the_dataset_and_cv_and_benchmark_run_the_protocol(
    site: Path, work: Path
) -> None:
    made = _run(work, [site], "-m", "plstitch_toy_plugin.encoder")
    weights = site / "plstitch_toy_plugin" / "weights" / "toy-vit"  # inside the plugin's package
    assert made.returncode == 0 and f"wrote {weights}" in made.stdout, made.stderr
    assert (weights / "config.json").is_file() and (weights / "model.safetensors").is_file()

    store = work / "store"
    _plstitch(work, [site], "extract", "--dataset", "toy-colours", "--model", "toy-vit", "--out", str(store),
              "--device", "cpu", "--num-workers", "0")  # fmt: skip
    manifest = json.loads((store / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["dataset"] == "toy-colours" and manifest["class_names"] == ["red", "green", "blue"]
    assert manifest["model"]["spec"] == "toy-vit" and manifest["feature_dim"] == 32
    used = Path(manifest["model"]["provenance"]["path"])
    assert used.resolve() == (weights / "model.safetensors").resolve()
    assert sorted(p.stem for p in store.glob("*.safetensors")) == ["toy1", "toy2", "toy3", "toy4"]
    assert (work / "cache" / "toy-colours" / "labels.json").is_file()  # generated on first use

    out = work / "cv.json"
    _plstitch(work, [site], "cv", "--features", str(store), "--protocol", "toy-centroid", "--folds", "2",
              "--set", "normalize=true", "--json", str(out))  # fmt: skip
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["task"] == "cv" and results["protocol"]["inner"] == "toy-centroid"
    assert results["protocol"]["normalize"] is True and len(results["folds"]) == 2
    assert sorted(v for fold in results["folds"] for v in fold["test"]) == ["toy1", "toy2", "toy3", "toy4"]
    features = FeatureStore(store)
    for fold in results["folds"]:  # nearest class mean of L2-normalised features, as scikit-learn has it
        train = [v for v in features.videos() if v not in fold["test"]]  # no validation videos held out
        x, y = stack_labelled(features.read_many(train))
        model = NearestCentroid().fit(x / np.linalg.norm(x, axis=1, keepdims=True), y)
        assert fold["classes_seen"] == len(np.unique(y))  # the fold fit's own record
        for video in fold["test"]:
            f = features.read(video).features
            expected = model.predict(f / np.linalg.norm(f, axis=1, keepdims=True))
            np.testing.assert_array_equal(results["predictions"][video], expected)

    bench = work / "bench"
    _plstitch(work, [site], "benchmark", "--models", "toy-vit", "--datasets", "toy-colours", "--protocols",
              "toy-centroid", "--out", str(bench), "--device", "cpu", "--num-workers", "0")  # fmt: skip
    table = json.loads((bench / "table.json").read_text(encoding="utf-8"))
    assert [(c["protocol"], c["status"]) for c in table["cells"]] == [("toy-centroid", "done")]
    assert "toy-colours centroid Acc" in [column["header"] for column in table["columns"]]


def test_train_takes_the_plugins_objective_on_the_plugins_dataset(site: Path, work: Path) -> None:
    run = work / "run"
    done = _plstitch(work, [site], "train", "--preset", "tiny-cpu", "--objective", "toy-margin",
                     "--epochs", "1", "--batch-size", "4", "--dataset", "toy-colours", "--lambda-mim", "0",
                     "--lambda-jigsaw", "0", "--eval-every", "0", "--out", str(run),
                     "--cache-dir", str(work / "frames"))  # fmt: skip
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["step"] == summary["total_steps"] > 0 and not summary["already_finished"]
    vid = summary["final"]["vid"]
    assert summary["final"]["loss"] == pytest.approx(vid) and 0.0 <= vid < 2.0  # L_vid alone
    assert json.loads((run / "train_config.json").read_text())["loss"]["objective"] == "toy-margin"
    assert (run / "backbone" / "model.safetensors").is_file()


def test_linear_fits_the_plugins_task(site: Path, work: Path) -> None:
    store = write_store(work / "progress-store")
    out = work / "progress.json"
    _plstitch(work, [site], "linear", "--features", str(store.root), "--task", "toy-progress",
              "--epochs", "2", "--lr", "0.1", "--wd", "0", "--device", "cpu", "--json", str(out))  # fmt: skip
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["task"] == results["protocol"]["name"] == "linear-toy-progress"
    assert results["protocol"]["task"] == "toy-progress" and results["protocol"]["outputs"] == ["progress"]
    assert results["headline_metrics"] == ["MAE"] and "elapsed-mean" in results["references"]
    errors = []
    for video, preds in results["predictions"].items():  # the fraction of the video elapsed, by hand
        times = store.read(video).frame_times
        end = times[-1] + (times[1] - times[0])  # the last frame lasts one (1 s) frame step
        assert len(preds) == len(times) and all(0.0 <= p <= 1.0 for p in preds)
        errors += [abs(p - t / end) for p, t in zip(preds, times, strict=True)]
    assert sorted(results["predictions"]) == store.splits()["test"]
    assert results["metrics"]["MAE"] == pytest.approx(sum(errors) / len(errors), abs=5.01e-5)  # 4 decimals


def test_a_broken_plugin_is_one_warning_and_a_shipped_name_is_refused_naming_both_packages(
    site: Path, work: Path
) -> None:
    source = work / "bad-src-tree"
    (source / "plstitch_bad_plugin").mkdir(parents=True)
    (source / "pyproject.toml").write_text(BAD_PYPROJECT)
    (source / "plstitch_bad_plugin" / "__init__.py").write_text("")
    (source / "plstitch_bad_plugin" / "broken.py").write_text(BROKEN)
    (source / "plstitch_bad_plugin" / "knn.py").write_text(SHIPPED_NAME)
    bad = _pip_install(source, work / "bad")

    done = _plstitch(work, [bad, site], "protocols", "--json", "-")
    rows = {row["name"]: row for row in json.loads(done.stdout)["protocols"]}
    assert rows["knn"]["package"] == "plstitch" and rows["knn"]["label"] == "k-NN"  # the shipped one stays
    assert rows["toy-centroid"]["package"] == PACKAGE  # the rest works
    warned = [line for line in done.stderr.splitlines() if "did not load" in line]
    assert len(warned) == 2 and "Traceback" not in done.stderr, done.stderr
    broken = next(line for line in warned if "'broken'" in line)
    assert f"package '{BAD_PACKAGE}'" in broken and "this toy plugin is broken on purpose" in broken
    taken = next(line for line in warned if "'knn'" in line)
    assert "already registered, by package 'plstitch'" in taken
    assert f"package '{BAD_PACKAGE}' registers it again" in taken

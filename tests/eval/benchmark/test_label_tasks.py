"""`plstitch benchmark --tasks triplets|cvs|skill`: each cell equals the task's own protocol run here on the
same store and seed (`run_multilabel_linear`, `run_skill_linear`, `run_skill_cv`), the sections' rows are the
mean ± std over the seeds with skill's reference rows, a store without the task's labels makes its cell n/a
(not failed), and a rerun recomputes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import plstitch_eval.benchmark.tasks as bench_tasks
from plstitch_eval.benchmark import runner as bench_runner
from plstitch_eval.benchmark.cells import cell_settings, plan_cells
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols.multilabel import run_multilabel_linear
from plstitch_eval.protocols.multilabel_cv import run_multilabel_cv
from plstitch_eval.protocols.skill import run_skill_cv, run_skill_linear
from tests.eval.benchmark.conftest import EPOCHS, MODELS, SMALL_DATASET, cli_args, runner, table_json

TINY = "plstitch-tiny-synthetic"
FOLDS = "3"


def datasets_file(folder: Path, name: str) -> str:
    """A datasets file of the small (6-video) variant of synthetic dataset `name`."""
    path = folder / f"{name}.toml"
    path.write_text(f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    return str(path)


def _bench(folder: Path, dataset: str, models: str, protocols: str, extra: list[str]) -> tuple[Path, list]:
    out = folder / "out"
    args = [*cli_args(out, datasets_file(folder, dataset), models=models, protocols=protocols), *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return out, [args, result]


@pytest.fixture(scope="module")
def triplets(cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """Two tiny models x small synthetic-triplets x linear x phases and triplets, seeds 0 and 1."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PLSTITCH_CACHE", str(cache))
    try:
        folder = tmp_path_factory.mktemp("bench-triplets")
        yield _bench(
            folder, "synthetic-triplets", MODELS, "linear", ["--tasks", "phases,triplets", "--seeds", "2"]
        )
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def cvs(cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """The tiny model x small synthetic-cvs x linear x cvs, seed 0."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PLSTITCH_CACHE", str(cache))
    try:
        yield _bench(
            tmp_path_factory.mktemp("bench-cvs"), "synthetic-cvs", TINY, "linear", ["--tasks", "cvs"]
        )
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def skill(cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """The tiny model x small synthetic-skill x linear and cv (3 folds) x skill, seeds 0 and 1."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PLSTITCH_CACHE", str(cache))
    try:
        extra = ["--tasks", "skill", "--seeds", "0,1", "--folds", FOLDS]
        yield _bench(tmp_path_factory.mktemp("bench-skill"), "synthetic-skill", TINY, "linear,cv", extra)
    finally:
        mp.undo()


def _results(record: dict) -> dict:
    return json.loads(Path(record["results"]).read_text(encoding="utf-8"))


def _section(block: dict, protocol: str) -> dict:
    (section,) = [s for s in block["sections"] if s["protocol"] == protocol]
    return section


def _assert_rows(section: dict, block: dict, own: dict) -> None:
    """Each model row is the mean (and sample std) over its cells of the independent runs' metrics."""
    rows = {r["row"]: r for r in section["rows"]}
    for model in {c["model"] for c in block["cells"]}:
        runs = [own[(c["model"], c["seed"])] for c in block["cells"] if c["model"] == model and
                c["protocol"] == section["protocol"]]  # fmt: skip
        for metric in section["metrics"]:
            values = [r["metrics"][metric] for r in runs if r["metrics"][metric] is not None]
            assert rows[model]["metrics"][metric] == pytest.approx(np.mean(values))
            std = rows[model]["metrics_std"][metric]
            assert std is None if len(values) == 1 else std == pytest.approx(np.std(values, ddof=1))


def test_triplet_cells_equal_run_multilabel_linear_at_each_seed(triplets) -> None:
    out, (_, result) = triplets
    table = table_json(out)
    block = table["tasks"]
    assert table["ok"] and [c["protocol"] for c in table["cells"]] == ["linear", "linear"]  # phase cells
    assert [(c["model"], c["task"], c["seed"]) for c in block["cells"]] == [
        (m, "triplets", s) for m in MODELS.split(",") for s in (0, 1)
    ]
    own = {}
    for record in block["cells"]:
        config = LinearConfig(epochs=int(EPOCHS), seed=record["seed"], balance_classes=True, device="cpu")
        alone = run_multilabel_linear("triplets", record["features"], config)
        assert alone["metrics"] == _results(record)["metrics"] and alone["task"] == "linear-triplets"
        own[(record["model"], record["seed"])] = alone
    section = _section(block, "linear")
    assert section["metrics"] == ["mAP_I", "mAP_V", "mAP_T", "mAP_IV", "mAP_IT", "mAP_IVT"]
    assert section["headline"] == "mAP_IVT" and section["paired_metrics"] == ["mAP_IVT"]
    assert section["lower_is_better"]["mAP_IVT"] is False and section["results_task"] == "linear-triplets"
    _assert_rows(section, block, own)
    (difference,) = section["differences"]
    first, second = MODELS.split(",")
    a = {
        v: np.mean([own[(first, s)]["per_video"][v]["mAP_IVT"] for s in (0, 1)])
        for v in own[(first, 0)]["per_video"]
    }
    b = {v: np.mean([own[(second, s)]["per_video"][v]["mAP_IVT"] for s in (0, 1)]) for v in a}
    assert difference["mean"] == pytest.approx(np.mean([a[v] - b[v] for v in a]))
    assert difference["a_better"] == sum(a[v] > b[v] for v in a)
    markdown = (out / "table.md").read_text(encoding="utf-8")
    assert "## Task: triplets" in markdown and "| Model | mAP_I | mAP_V |" in markdown
    assert "mAP_IVT " in result.stderr and "| triplets | linear | seed 1:" in result.stderr
    assert (out / "tasks.png").stat().st_size > 10_000


def test_cvs_cells_equal_run_multilabel_linear(cvs) -> None:
    out, (_, result) = cvs
    block = table_json(out)["tasks"]
    (record,) = block["cells"]
    config = LinearConfig(epochs=int(EPOCHS), seed=0, balance_classes=True, device="cpu")
    alone = run_multilabel_linear("cvs", record["features"], config)
    assert alone["metrics"] == _results(record)["metrics"]
    section = _section(block, "linear")
    assert section["metrics"][:2] == ["mAP", "brier"] and section["lower_is_better"]["brier"] is True
    _assert_rows(section, block, {(TINY, 0): alone})
    assert "cvs | linear | seed 0: mAP " in result.stderr and "brier " in result.stderr


def test_skill_cells_equal_the_skill_protocols_with_reference_rows(skill) -> None:
    out, (_, result) = skill
    block = table_json(out)["tasks"]
    assert [(c["protocol"], c["seed"]) for c in block["cells"]] == [("linear", None), ("cv", 0), ("cv", 1)]
    own = {}
    for record in block["cells"]:
        if record["protocol"] == "linear":
            alone = run_skill_linear(record["features"])
        else:
            alone = run_skill_cv(record["features"], FOLDS, seed=record["seed"])
        stored = _results(record)
        assert alone["metrics"] == stored["metrics"] and alone["predictions"] == stored["predictions"]
        own[(record["model"], record["seed"])] = alone
    linear, cv = _section(block, "linear"), _section(block, "cv")
    assert (linear["results_task"], cv["results_task"]) == ("linear-skill", "cv-linear-skill")
    assert linear["metrics"] == ["spearman_rho", "MAE"] and linear["paired_metrics"] == ["abs_error"]
    for section, seeds in ((linear, [None]), (cv, [0, 1])):
        _assert_rows(section, block, own)
        rows = {r["row"]: r for r in section["rows"]}
        assert [r for r in rows if r.startswith("reference: ")] == [
            "reference: training-mean",
            "reference: duration",
        ]
        mae = [own[(TINY, s)]["references"]["duration"]["metrics"]["MAE"] for s in seeds]
        assert rows["reference: duration"]["metrics"]["MAE"] == pytest.approx(np.mean(mae))
        assert rows["reference: training-mean"]["metrics"]["spearman_rho"] is None  # undefined: one value
    errors = {v: r["abs_error"] for v, r in own[(TINY, None)]["per_video"].items()}
    refs = own[(TINY, None)]["references"]["duration"]["per_video"]
    found = {d["b"]: d for d in linear["differences"]}["reference: duration"]
    assert found["mean"] == pytest.approx(np.mean([errors[v] - refs[v]["abs_error"] for v in errors]))
    assert "skill | cv | seed 1: spearman_rho " in result.stderr and "MAE " in result.stderr


def test_a_store_without_triplet_labels_makes_its_cell_na(
    cvs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cvs run's store asked for triplets: nothing loaded nor extracted (its store says), n/a, exit 0."""

    def forbidden(*_args, **_kwargs):
        raise AssertionError("an n/a cell was run")

    for name in ("load_encoder", "extract_many"):
        monkeypatch.setattr(bench_runner, name, forbidden)
    out = tmp_path / "out"
    shutil.copytree(cvs[0], out)
    args = cli_args(out, datasets_file(tmp_path, "synthetic-cvs"), models=TINY, protocols="linear")
    result = runner.invoke(app, [*args, "--tasks", "triplets"])
    assert result.exit_code == 0, result.output
    table = table_json(out)
    assert table["ok"] and table["failed"] == []
    (na,) = table["not_applicable"]
    assert (na["dataset"], na["task"], na["protocol"], na["seed"]) == (
        "synthetic-cvs",
        "triplets",
        "linear",
        0,
    )
    assert na["reason"] == "synthetic-cvs has no triplets labels (its store records no triplet_names)"
    assert "1 cell n/a: synthetic-cvs has no triplets labels (1)" in result.stderr


def test_a_rerun_recomputes_no_task_cell(triplets, skill, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*_args, **_kwargs):
        raise AssertionError("a finished cell was recomputed")

    for name in ("load_encoder", "extract_many"):
        monkeypatch.setattr(bench_runner, name, forbidden)
    for name in ("run_multilabel_linear", "run_skill_linear", "run_skill_cv"):
        monkeypatch.setattr(bench_tasks, name, forbidden)
    for out, (args, _) in (triplets, skill):
        files = sorted((out / "results").rglob("*.json"))
        before = {p: p.stat().st_mtime_ns for p in files}
        again = runner.invoke(app, args)
        assert again.exit_code == 0, again.output
        assert {p: p.stat().st_mtime_ns for p in files} == before
        cells = table_json(out)["tasks"]["cells"]
        assert all(c["resumed"] for c in cells) and again.stderr.count("skipped") >= len(cells)


def test_the_plan_and_settings_of_label_task_cells(tmp_path: Path) -> None:
    options = {"protocols": "knn,linear,cv", "tasks": "triplets,skill", "seeds": "0,1", "cv_folds": 4}
    config = BenchmarkConfig(TINY, "synthetic", tmp_path / "out", **options)
    cells = plan_cells(config)
    assert [(c.task, c.protocol, c.seed) for c in cells] == [
        ("triplets", "linear", 0),
        ("triplets", "linear", 1),
        ("triplets", "cv", 0),
        ("triplets", "cv", 1),
        ("skill", "linear", None),
        ("skill", "cv", 0),
        ("skill", "cv", 1),
    ]
    triplet = cell_settings(config, cells[1])
    assert triplet["linear"]["balance_classes"] is True and triplet["linear"]["select_metric"] == "mAP_IVT"
    assert triplet["linear"]["seed"] == 1 and triplet["task"] == {"name": "triplets", "elapsed": False}
    crossed = cell_settings(config, cells[3])  # the linear probe (no k-NN multi-label head), 4 folds, seed 1
    assert crossed["protocol"] == "cv" and crossed["cv"] == {"folds": 4, "inner": "linear", "seed": 1}
    assert crossed["linear"] == {**triplet["linear"], "seed": 1} and crossed != triplet
    ridge, folds = cell_settings(config, cells[4]), cell_settings(config, cells[6])
    assert "linear" not in ridge and ridge["skill"]["score"] == "grs" and "folds" not in ridge["skill"]
    assert (folds["skill"]["folds"], folds["skill"]["seed"]) == ("4", 1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"tasks": "skill", "protocols": "knn"},
            "--tasks skill: none of --protocols knn fits it; it runs with linear (and cv).",
        ),
        (
            {"tasks": "triplets", "protocols": "knn"},
            "--tasks triplets: none of --protocols knn fits it; it runs with linear, temporal (and cv).",
        ),
        ({"tasks": "skill", "protocols": "linear", "seeds": "0,1"}, "--seeds"),
        ({"tasks": "cvs", "fractions": "0.5,1"}, "without --fractions"),
    ],
)
def test_bad_label_task_options_are_one_line(tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        BenchmarkConfig(TINY, "synthetic", tmp_path / "out", **options)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_temporal_cvs_cell_equals_run_multilabel_temporal(cvs, tmp_path: Path) -> None:
    """`--protocols temporal --tasks cvs` on the cvs run's store: the multi-label MS-TCN, as
    `plstitch temporal --task cvs` gives it at the same seed and epochs, in its own table section."""
    from plstitch_eval.protocols.temporal_multilabel import run_multilabel_temporal
    from plstitch_eval.temporal import TemporalConfig

    out = tmp_path / "out"
    shutil.copytree(cvs[0], out)
    args = cli_args(out, datasets_file(tmp_path, "synthetic-cvs"), models=TINY, protocols="temporal")
    result = runner.invoke(app, [*args, "--tasks", "cvs", "--temporal-epochs", "3"])
    assert result.exit_code == 0, result.output
    block = table_json(out)["tasks"]
    (record,) = [c for c in block["cells"] if c["protocol"] == "temporal"]
    alone = run_multilabel_temporal("cvs", record["features"], TemporalConfig(epochs=3, seed=0))
    stored = _results(record)
    assert stored["task"] == "temporal-cvs" and alone["metrics"] == stored["metrics"]
    section = _section(block, "temporal")
    assert section["results_task"] == "temporal-cvs" and section["lower_is_better"]["brier"] is True
    assert "cvs | temporal | seed 0: mAP " in result.stderr


def test_cvs_cv_cells_equal_run_multilabel_cv_and_a_rerun_keeps_them(cvs, tmp_path: Path) -> None:
    """`--protocols cv --tasks cvs`: the cv cell cross-validates the class-balanced linear probe (k-NN, the
    default --cv-protocol, has no multi-label head) over --folds folds drawn with its seed, equal to
    `run_multilabel_cv` run here; its section is `cv-linear-cvs`; a rerun recomputes nothing."""
    out = tmp_path / "out"
    shutil.copytree(cvs[0], out)  # its store: no extraction here
    args = cli_args(out, datasets_file(tmp_path, "synthetic-cvs"), models=TINY, protocols="cv")
    args += ["--tasks", "cvs", "--folds", FOLDS, "--seeds", "0,1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    block = table_json(out)["tasks"]
    assert [(c["protocol"], c["seed"]) for c in block["cells"]] == [("cv", 0), ("cv", 1)]
    own = {}
    for record in block["cells"]:
        config = LinearConfig(epochs=int(EPOCHS), seed=record["seed"], balance_classes=True, device="cpu")
        alone = run_multilabel_cv("cvs", record["features"], "linear", config, int(FOLDS), record["seed"])
        stored = _results(record)
        assert stored["task"] == alone["task"] == "cv-linear-cvs"
        assert alone["metrics"] == stored["metrics"] and alone["predictions"] == stored["predictions"]
        assert [f["test"] for f in stored["folds"]] == [f["test"] for f in alone["folds"]]
        own[(record["model"], record["seed"])] = alone
    section = _section(block, "cv")
    assert section["results_task"] == "cv-linear-cvs" and section["label"] == "CV linear"
    _assert_rows(section, block, own)
    rerun = runner.invoke(app, args)
    assert rerun.exit_code == 0, rerun.output
    cells = table_json(out)["tasks"]["cells"]
    assert all(c["resumed"] for c in cells) and rerun.stderr.count("skipped") == len(cells)
    assert [c["metrics"] for c in cells] == [c["metrics"] for c in block["cells"]]

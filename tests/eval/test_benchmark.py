"""`plstitch benchmark`: two tiny models x the synthetic dataset and a `folder` dataset, on CPU.

The run's table is checked against the single-cell commands (`plstitch knn` / `plstitch linear`) on the same
stores; a rerun recomputes nothing; an interrupted run finishes only its missing cells; failing cells (a
missing checkpoint, a corrupt video) are named in the table with their error and give exit code 1; the
datasets file, the model / protocol lists and the paper's numbers are parsed and placed as documented.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plstitch_eval import benchmark as bench
from plstitch_eval.benchmark import (
    BenchmarkConfig,
    DatasetSpec,
    benchmark_table,
    expand_models,
    paper_numbers,
    parse_datasets,
    parse_protocols,
    plan_cells,
    read_datasets_file,
    table_markdown,
)
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import ExtractOptions
from plstitch_eval.knn import KnnConfig
from plstitch_eval.linear import LinearConfig
from plstitch_eval.tables import load_results
from tests.eval.data.media import write_index_video

SMALL_DATASET = {"n_videos": 6, "min_seconds": 8.0, "max_seconds": 12.0}
MODELS = "plstitch-tiny-synthetic,random-init:plstitch-tiny-synthetic"
EPOCHS = "5"  # linear-probe epochs of every run here
FOLDER_LABELS = ("cut", "cut", "stir", "stir", "pour")  # one label per second of each 5 s clip
FOLDER_SPLITS = ("train", "train", "train", "train", "test", "test")
DATASETS_TOML = """
[synthetic]
n_videos = 6
min_seconds = 8.0
max_seconds = 12.0

[clips]            # a name of our own for a `folder` dataset
adapter = "folder"
root = "clips-data"  # relative to this file
"""
runner = CliRunner()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private plstitch cache (the synthetic videos are generated there once for the module)."""
    return tmp_path_factory.mktemp("plstitch-cache")


@pytest.fixture(autouse=True)
def _private_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLSTITCH_CACHE", str(cache))


def make_folder_dataset(root: Path) -> Path:
    """A `folder` dataset: six 5 s MP4 clips (32 px, 5 fps), labels.csv with 1 label/s and a split column."""
    rows = []
    for i, split in enumerate(FOLDER_SPLITS):
        write_index_video(root / "videos" / f"clip{i}.mp4", n_frames=25, fps=5)
        rows += [(f"clip{i}", second, label, split) for second, label in enumerate(FOLDER_LABELS)]
    with (root / "labels.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("video", "frame", "label", "split"), *rows])
    return root


@pytest.fixture(scope="module")
def datasets_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("datasets")
    make_folder_dataset(folder / "clips-data")
    path = folder / "datasets.toml"
    path.write_text(DATASETS_TOML, encoding="utf-8")
    return path


def cli_args(out: Path, datasets: str, models: str = MODELS, protocols: str = "knn,linear") -> list[str]:
    return [
        "benchmark", "--models", models, "--datasets", datasets, "--protocols", protocols, "--out", str(out),
        "--device", "cpu", "--num-workers", "0", "--epochs", EPOCHS,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def run(datasets_file: Path, cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """The issue's benchmark: two tiny models x synthetic + a folder dataset x k-NN + linear, by the CLI."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PLSTITCH_CACHE", str(cache))
    try:
        out = tmp_path_factory.mktemp("bench") / "out"
        result = runner.invoke(app, cli_args(out, str(datasets_file)))
        assert result.exit_code == 0, result.output
        yield out, result
    finally:
        mp.undo()


def table_json(out: Path) -> dict:
    return json.loads((out / "table.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------ the full run


def test_every_cell_has_a_store_a_results_file_and_a_table_row(run) -> None:
    out, result = run
    table = table_json(out)
    assert table["ok"] and table["failed"] == []
    assert [(c["model"], c["dataset"], c["protocol"]) for c in table["cells"]] == [
        (m, d, p) for m in MODELS.split(",") for d in ("synthetic", "clips") for p in ("knn", "linear")
    ]
    assert all(c["status"] == "done" and not c["resumed"] for c in table["cells"])
    stores = {c["features"] for c in table["cells"]}
    assert len(stores) == 4  # one store per (model, dataset), shared by its two protocols
    for store in stores:
        assert (Path(store) / "manifest.json").is_file()
    results = load_results([c["results"] for c in table["cells"]])  # plain plstitch.results/v1 files
    assert {r["dataset"] for r in results} == {"synthetic", "folder"}
    headers = [c["header"] for c in table["columns"]]
    assert headers[0] == "synthetic k-NN Acc" and "clips linear F1 (videos)" in headers
    markdown = (out / "table.md").read_text(encoding="utf-8")
    assert "random-init:plstitch-tiny-synthetic" in markdown and "Failed cells" not in markdown
    # results on stdout, one status line per cell and the progress on stderr
    assert "| Model | synthetic k-NN Acc" in result.stdout and "[1/8]" not in result.stdout
    assert sum(f"[{i}/8] done" in result.stderr for i in range(1, 9)) == 8


def test_table_numbers_equal_the_single_cell_commands(run, tmp_path: Path) -> None:
    out, _ = run
    table = table_json(out)
    markdown = (out / "table.md").read_text(encoding="utf-8")
    for i, cell in enumerate(table["cells"]):
        single = tmp_path / f"{i}.json"
        extra = ["--epochs", EPOCHS] if cell["protocol"] == "linear" else []
        args = [cell["protocol"], "--features", cell["features"], "--device", "cpu", *extra]
        done = runner.invoke(app, [*args, "--json", str(single)])
        assert done.exit_code == 0, done.output
        expected = json.loads(single.read_text(encoding="utf-8"))["metrics"]
        assert cell["metrics"] == expected, (cell["model"], cell["dataset"], cell["protocol"])
        row = next(line for line in markdown.splitlines() if line.startswith(f"| {cell['model']} |"))
        assert f"{expected['accuracy']:.1f}" in row


def test_rerun_recomputes_nothing(run, datasets_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = run
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".safetensors"))
    files = [p for p in files if p.name not in ("table.json",)]
    before = {p: p.stat().st_mtime_ns for p in files}

    def forbidden(*_args, **_kwargs):
        raise AssertionError("a finished cell was recomputed")

    for name in ("load_encoder", "extract_features", "run_knn", "run_linear"):
        monkeypatch.setattr(bench, name, forbidden)
    again = runner.invoke(app, cli_args(out, str(datasets_file)))
    assert again.exit_code == 0, again.output
    assert {p: p.stat().st_mtime_ns for p in files} == before
    assert again.stderr.count("skipped") == 8
    assert all(c["resumed"] for c in table_json(out)["cells"])


def test_changed_settings_are_refused_not_overwritten(run, datasets_file: Path) -> None:
    out, _ = run
    knn_json = out / "results" / "plstitch-tiny-synthetic" / "synthetic" / "knn.json"
    before = knn_json.stat().st_mtime_ns
    changed = runner.invoke(app, [*cli_args(out, str(datasets_file)), "--k", "5"])
    assert changed.exit_code == 1
    lines = [line for line in changed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "knn.k: 20 -> 5" in lines[0] and "--overwrite" in lines[0]
    assert knn_json.stat().st_mtime_ns == before


# ---------------------------------------------------------------------------------- interrupt and resume


def test_interrupted_run_finishes_only_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    datasets = str(tmp_path / "small.toml")
    Path(datasets).write_text("[synthetic]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    args = cli_args(out, datasets, models="plstitch-tiny-synthetic")

    def killed(*_args, **_kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(bench, "run_linear", killed)  # the k-NN cell finishes, then the run is killed
        first = runner.invoke(app, args)
    assert first.exit_code == 130 and "rerun the same command" in first.stderr
    cell_dir = out / "results" / "plstitch-tiny-synthetic" / "synthetic"
    assert (cell_dir / "knn.json").is_file() and not (cell_dir / "linear.json").exists()
    assert not (out / "table.json").exists()
    knn_mtime = (cell_dir / "knn.json").stat().st_mtime_ns

    calls: dict[str, int] = {"run_knn": 0, "run_linear": 0}
    summaries = []
    for name in calls:
        original = getattr(bench, name)

        def counted(*a, _name=name, _original=original, **kw):
            calls[_name] += 1
            return _original(*a, **kw)

        monkeypatch.setattr(bench, name, counted)
    original_extract = bench.extract_features

    def recorded_extract(*a, **kw):
        summaries.append(original_extract(*a, **kw))
        return summaries[-1]

    monkeypatch.setattr(bench, "extract_features", recorded_extract)
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert calls == {"run_knn": 0, "run_linear": 1}
    assert (cell_dir / "knn.json").stat().st_mtime_ns == knn_mtime
    assert len(summaries) == 1 and {r.status for r in summaries[0].results} == {"skipped"}  # store resumed
    cells = table_json(out)["cells"]
    assert [(c["protocol"], c["status"], c["resumed"]) for c in cells] == [
        ("knn", "done", True),
        ("linear", "done", False),
    ]
    # the store that extraction reopened still matches both results: a third run computes nothing
    third = runner.invoke(app, args)
    assert third.exit_code == 0 and calls == {"run_knn": 0, "run_linear": 1} and len(summaries) == 1


# --------------------------------------------------------------------------------------- failing cells


def test_failing_cells_are_named_and_the_others_finish(datasets_file: Path, tmp_path: Path) -> None:
    broken = make_folder_dataset(tmp_path / "broken")
    good_clip = (broken / "videos" / "clip5.mp4").read_bytes()
    (broken / "videos" / "clip5.mp4").write_bytes(b"this is not an mp4")
    missing = tmp_path / "no-such-dir" / "model.safetensors"
    out = tmp_path / "out"
    datasets = f"{datasets_file},folder={broken}"  # synthetic + clips from the file, + the broken folder
    result = runner.invoke(
        app, cli_args(out, datasets, models=f"plstitch-tiny-synthetic,{missing}", protocols="knn")
    )
    assert result.exit_code == 1
    table = table_json(out)
    status = {(c["model"], c["dataset"]): c["status"] for c in table["cells"]}
    assert status == {
        ("plstitch-tiny-synthetic", "synthetic"): "done",
        ("plstitch-tiny-synthetic", "clips"): "done",
        ("plstitch-tiny-synthetic", "folder"): "failed",
        (str(missing), "synthetic"): "failed",
        (str(missing), "clips"): "failed",
        (str(missing), "folder"): "failed",
    }
    errors = {(f["model"], f["dataset"]): f["error"] for f in table["failed"]}
    assert "clip5.mp4" in errors[("plstitch-tiny-synthetic", "folder")]
    assert (
        errors[(str(missing), "synthetic")].startswith("load model:")
        and str(missing) in errors[(str(missing), "synthetic")]
    )
    markdown = (out / "table.md").read_text(encoding="utf-8")
    assert "Failed cells (4" in markdown and "clip5.mp4" in markdown
    assert f"| {missing} | failed |" in markdown
    assert "4 of 6 cell(s) failed" in result.stderr

    # the video fixed, the same command finishes the broken pair from its partial store, nothing else
    (broken / "videos" / "clip5.mp4").write_bytes(good_clip)
    again = runner.invoke(app, cli_args(out, datasets, models="plstitch-tiny-synthetic", protocols="knn"))
    assert again.exit_code == 0, again.output
    cells = table_json(out)["cells"]
    assert [(c["dataset"], c["resumed"]) for c in cells] == [
        ("synthetic", True),
        ("clips", True),
        ("folder", False),
    ]


# ----------------------------------------------------------------------------------------------- inputs


def test_dataset_list_and_files(tmp_path: Path, datasets_file: Path) -> None:
    specs = parse_datasets(f"synthetic,folder={datasets_file.parent / 'clips-data'}")
    assert [(s.name, s.adapter) for s in specs] == [("synthetic", "synthetic"), ("folder", "folder")]
    assert specs[1].root == datasets_file.parent / "clips-data"

    from_toml = read_datasets_file(datasets_file)
    assert [(s.name, s.adapter, s.root) for s in from_toml] == [
        ("synthetic", "synthetic", None),
        ("clips", "folder", datasets_file.parent / "clips-data"),
    ]
    assert from_toml[0].options == SMALL_DATASET
    yaml_file = datasets_file.parent / "datasets.yaml"
    yaml_file.write_text(
        "datasets:\n  synthetic:\n    options: {n_videos: 6, min_seconds: 8.0, max_seconds: 12.0}\n"
        "  clips: {adapter: folder, root: clips-data}\n",
        encoding="utf-8",
    )
    assert read_datasets_file(yaml_file) == from_toml


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("=/data", "'=/data' is malformed"),
        ("folder=", "'folder=' is malformed"),
        ("synthetic,,gtea=/x", "empty item"),
        ("cholec8=/tmp", "Did you mean 'cholec80'"),
        ("cholec80", "needs its folder"),
        ("folder=/no/such/folder", "/no/such/folder does not exist"),
        ("synthetic,synthetic", "given twice"),
        ("missing.toml", "missing.toml does not exist"),
    ],
)
def test_bad_dataset_items_are_one_clear_error(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        parse_datasets(text)


def test_bad_datasets_files(tmp_path: Path) -> None:
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[synthetic]\nn_videos = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.toml: invalid TOML.*line 2"):
        read_datasets_file(bad_toml)
    bad_option = tmp_path / "opt.toml"
    bad_option.write_text("[synthetic]\nvideos_count = 3\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"opt\.toml: Dataset 'synthetic' does not take option\(s\) videos_co"
    ):
        read_datasets_file(bad_option)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("synthetic: [1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: invalid YAML at line 2"):
        read_datasets_file(bad_yaml)


def test_models_and_protocols() -> None:
    surgical = expand_models("paper-surgical")
    assert "pl-stitch-lemon" in surgical and "dino-vitb16" in surgical
    assert expand_models("raw-pixels,./runs/x,raw-pixels,random-init:plstitch-tiny-synthetic") == [
        "raw-pixels",
        "./runs/x",
        "random-init:plstitch-tiny-synthetic",
    ]
    with pytest.raises(ConfigError, match="Unknown model 'plstitch-tiny-synthetc'.*Did you mean"):
        expand_models("plstitch-tiny-synthetc")
    with pytest.raises(ConfigError, match="Unknown protocol 'lin'.*knn, linear, temporal, cv"):
        parse_protocols("knn,lin")
    assert parse_protocols("linear,knn,cv") == ("linear", "knn", "cv")


def test_bad_input_is_one_line_on_the_cli(tmp_path: Path) -> None:
    result = runner.invoke(app, cli_args(tmp_path / "out", "nope"))
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Unknown dataset 'nope'" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------- paper numbers


def test_paper_numbers_sit_beside_ours(tmp_path: Path) -> None:
    assert paper_numbers("pl-stitch-lemon", "cholec80", "knn")["metrics"] == {"accuracy": 81.7}
    linear = paper_numbers("pl-stitch-lemon", "cholec80", "linear")
    assert linear["metrics"] == {"accuracy": 80.4, "macro_f1_pooled": 73.0, "macro_f1_video": 73.0}
    assert linear["same_checkpoint"] and linear["table"] == "Table 1"
    assert paper_numbers("pl-stitch-lemon", "gtea", "knn") is None  # GTEA's PL-Stitch is pl-stitch-gtea
    assert paper_numbers("pl-stitch-gtea", "gtea", "linear")["metrics"]["edit"] == 60.2
    assert paper_numbers("dino-vitb16", "cholec80", "knn")["same_checkpoint"] is False
    assert paper_numbers("plstitch-tiny-synthetic", "synthetic", "knn") is None
    assert paper_numbers("pl-stitch-lemon", "cholec80", "cv") is None

    root = tmp_path / "cholec80"
    root.mkdir()
    config = BenchmarkConfig(
        models="pl-stitch-lemon,dino-vitb16",
        datasets=[DatasetSpec("cholec80", root=root)],
        out=tmp_path / "out",
        protocols="knn",
        metrics="accuracy",
        extract=ExtractOptions(device="cpu"),
        knn=KnnConfig(),
        linear=LinearConfig(device="cpu"),
    )
    cells = plan_cells(config)
    for cell, accuracy in zip(cells, (80.0, 70.0), strict=True):  # filled by hand: nothing is loaded
        cell.status, cell.metrics = "done", {"accuracy": accuracy}
    markdown = table_markdown(benchmark_table(config, cells))
    assert "| pl-stitch-lemon | **80.0** (81.7) |" in markdown
    assert "| dino-vitb16 | 70.0 (69.4†) |" in markdown
    # every method of the paper's tables has a registry entry now (Endo-FM, VideoMAEv2, T-CoRe: issue 17)
    assert "no loadable checkpoint" not in markdown
    assert {"endo-fm", "videomaev2-vitb16", "t-core-vitb16"} <= set(expand_models("paper-surgical"))


def test_temporal_protocol_runs_inside_the_benchmark(tmp_path: Path) -> None:
    """`--protocols temporal,cv --cv-protocol temporal`: MS-TCN cells equal to `plstitch temporal`."""
    out = tmp_path / "out"
    args = cli_args(out, "synthetic", models="plstitch-tiny-synthetic", protocols="temporal,cv")
    args = [*args, "--cv-protocol", "temporal", "--folds", "2", "--temporal-epochs", "3"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    table = table_json(out)
    assert [c["protocol"] for c in table["cells"]] == ["temporal", "cv"]
    headers = [c["header"] for c in table["columns"]]
    assert "synthetic MS-TCN Acc" in headers and "synthetic CV MS-TCN Acc" in headers
    cell = table["cells"][0]
    single = tmp_path / "single.json"
    single_args = ["temporal", "--features", cell["features"], "--epochs", "3", "--device", "cpu"]
    done = runner.invoke(app, [*single_args, "--json", str(single)])
    assert done.exit_code == 0, done.output
    assert cell["metrics"] == json.loads(single.read_text(encoding="utf-8"))["metrics"]
    cv = json.loads(Path(table["cells"][1]["results"]).read_text(encoding="utf-8"))
    assert cv["protocol"]["inner"] == "temporal" and cv["protocol"]["epochs"] == 3


def test_tool_presence_cells(tmp_path: Path) -> None:
    """`--protocols linear-tools`: a tool-presence cell per pair, its mAP the table's column for it."""
    out = tmp_path / "out"
    datasets = str(tmp_path / "small.toml")
    Path(datasets).write_text("[synthetic]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    result = runner.invoke(
        app, cli_args(out, datasets, models="plstitch-tiny-synthetic", protocols="knn,linear-tools")
    )
    assert result.exit_code == 0, result.output
    table = table_json(out)
    headers = [c["header"] for c in table["columns"]]
    assert headers[-1] == "synthetic linear (tools) mAP"
    (tools,) = [r for r in table["cells"] if r["protocol"] == "linear-tools"]
    cell = json.loads(Path(tools["results"]).read_text(encoding="utf-8"))
    assert cell["task"] == "linear-tools" and tools["metrics"]["mAP"] == pytest.approx(cell["metrics"]["mAP"])
    assert cell["protocol"]["balance_classes"] is True and 0 < cell["metrics"]["mAP"] <= 100

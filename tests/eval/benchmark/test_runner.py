"""`run_benchmark` by the CLI: two tiny models x the synthetic dataset and a `folder` dataset, on CPU.

The run's table is checked against the single-cell commands (`plstitch knn` / `plstitch linear`) on the same
stores; a rerun recomputes nothing; failing cells (a missing checkpoint, a corrupt video) are named in the
table with their error and give exit code 1; MS-TCN and tool-presence cells run inside the benchmark.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import plstitch_eval.protocols.knn as knn_protocol
import plstitch_eval.protocols.linear as linear_protocol
from plstitch_eval.benchmark import runner as bench_runner
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.runner import describe_error, run_benchmark
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.tables import load_results
from tests.eval.benchmark.conftest import (
    EPOCHS,
    MODELS,
    SMALL_DATASET,
    cli_args,
    make_folder_dataset,
    runner,
    table_json,
)


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

    for name in ("load_encoder", "extract_many"):
        monkeypatch.setattr(bench_runner, name, forbidden)
    monkeypatch.setattr(knn_protocol, "run_knn", forbidden)  # where the registered protocols run
    monkeypatch.setattr(linear_protocol, "run_linear", forbidden)
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


def test_out_must_be_new_empty_or_a_benchmark(tmp_path: Path) -> None:
    config = BenchmarkConfig(models="raw-pixels", datasets="synthetic", out=tmp_path / "out")
    (tmp_path / "out").write_text("a file", encoding="utf-8")
    with pytest.raises(ConfigError, match="is a file; choose a new or empty folder"):
        run_benchmark(config)
    (tmp_path / "out").unlink()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not empty and holds no benchmark"):
        run_benchmark(config)


def test_errors_are_one_line_with_their_type_unless_ours() -> None:
    assert describe_error(ConfigError("bad\n  input")) == "bad input"
    assert describe_error(MemoryError()) == "MemoryError: MemoryError"
    assert describe_error(ValueError("x")) == "ValueError: x"


def test_the_models_of_a_dataset_share_one_decoding_pass(
    datasets_file: Path, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plstitch_eval.extract import chunks
    from plstitch_eval.store.features import FeatureStore

    monkeypatch.setenv("PLSTITCH_CACHE", str(cache))
    decoded: list[str] = []
    real = chunks.read_frames

    def counting(source, *args, **kwargs):
        decoded.append(str(source))
        return real(source, *args, **kwargs)

    monkeypatch.setattr(chunks, "read_frames", counting)
    out = tmp_path / "out"
    result = runner.invoke(app, cli_args(out, str(datasets_file), protocols="knn"))
    assert result.exit_code == 0, result.output
    cells = table_json(out)["cells"]
    assert len({c["model"] for c in cells}) == 2
    videos = sum(len(FeatureStore(c["features"]).videos()) for c in cells) // 2
    assert len(decoded) == len(set(decoded)) == videos  # two models, each video decoded once


def test_a_dataset_with_a_frame_cache_reads_its_frames_from_there(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plstitch_eval.extract import chunks
    from plstitch_eval.store.features import FeatureStore

    monkeypatch.setenv("PLSTITCH_CACHE", str(cache))
    lmdb = tmp_path / "synthetic.lmdb"
    datasets = tmp_path / "d.toml"
    entries = "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items())
    datasets.write_text(f'[synthetic]\nframes = "{lmdb.name}"\n{entries}')
    from plstitch_eval.data.datasets import get_dataset
    from plstitch_eval.data.frames_lmdb import FrameCache
    from plstitch_train.frames_lmdb import write_frames_lmdb
    from plstitch_train.videos import TrainingVideo

    adapter = get_dataset("synthetic", **SMALL_DATASET)
    videos = [TrainingVideo(r.name, r.source, r.folder_fps) for r in adapter.videos()]
    write_frames_lmdb(videos, lmdb, adapter.eval_fps, None, source="test")
    assert len(FrameCache.open(lmdb)) == len(videos)

    monkeypatch.setattr(chunks, "read_frames", lambda *a, **k: pytest.fail("a video was decoded"))
    out = tmp_path / "out"
    result = runner.invoke(app, cli_args(out, str(datasets), protocols="knn"))
    assert result.exit_code == 0, result.output
    for cell in table_json(out)["cells"]:
        assert FeatureStore(cell["features"]).manifest["preprocessing"]["frames"] == "jpeg-lmdb"

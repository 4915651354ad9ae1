"""`plstitch quickstart` end to end on a reduced synthetic dataset, and the shipped tiny model.

The quickstart runs here with a random tiny ViT (any encoder works) on 6 short synthetic videos; its k-NN
accuracy is checked against a brute-force numpy k-NN written in this file, and its table holds the
reference rows (random init, raw pixels, majority class) with their own stores and results. The shipped
checkpoint is checked to load (plstitch and plain timm) and to keep its k-NN accuracy on the real synthetic
test split above a floor.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
import typer
from typer.testing import CliRunner

from plstitch_eval.commands import quickstart as quickstart_cmd
from plstitch_eval.hub import DataConfig, load_encoder, save_timm_dir
from plstitch_eval.quickstart import (
    PROTOCOL_NAMES,
    SHIPPED_DIR,
    QuickstartConfig,
    default_model_spec,
    run_quickstart,
)
from plstitch_eval.store.features import FeatureStore

SMALL_DATASET = {"n_videos": 6, "min_seconds": 8.0, "max_seconds": 12.0}
# Floors of the shipped model on the synthetic test split (k=20, exp weighting, 1 fps), in accuracy points
# above the reference rows measured beside it (issue 14): raw pixels (8x8x3) and the same ViT at random init.
RAW_PIXELS_KNN_MARGIN = 5.0
RANDOM_INIT_MARGIN = 5.0
SHIPPED_MAX_BYTES = 5 * 2**20


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private plstitch cache, so the test never touches (or depends on) the user's."""
    return tmp_path_factory.mktemp("plstitch-cache")


@pytest.fixture(autouse=True)
def _private_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLSTITCH_CACHE", str(cache))


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-block ViT on 32 px inputs, saved in timm format."""
    return save_tiny_vit(tmp_path_factory.mktemp("tiny-vit"), seed=0)


def save_tiny_vit(folder: Path, seed: int) -> Path:
    """A 2-block ViT on 32 px inputs with the weights of `seed`, saved in timm format into `folder`."""
    torch.manual_seed(seed)
    model = timm.create_model(
        "vit_tiny_patch16_224",
        pretrained=False,
        num_classes=0,
        img_size=32,
        patch_size=8,
        embed_dim=32,
        depth=2,
        num_heads=2,
    )
    return save_timm_dir(model, folder, DataConfig.for_size(32))


@pytest.fixture(scope="module")
def quickstart_run(tiny_vit: Path, tmp_path_factory: pytest.TempPathFactory, cache: Path):
    mp = pytest.MonkeyPatch()
    mp.setenv("PLSTITCH_CACHE", str(cache))
    try:
        out = tmp_path_factory.mktemp("quickstart")
        config = QuickstartConfig(
            out=out,
            model=str(tiny_vit),
            device="cpu",
            num_workers=0,
            linear_epochs=5,
            timeline_videos=2,
            progress=False,
            dataset_options=SMALL_DATASET,
        )
        yield run_quickstart(config)
    finally:
        mp.undo()


def brute_force_knn(train_x, train_y, test_x, k, temperature, n_classes) -> np.ndarray:
    """Textbook DINO k-NN: cosine top-k, votes exp(sim / T), argmax (ties -> lowest class id)."""
    a = train_x / np.linalg.norm(train_x, axis=1, keepdims=True)
    b = test_x / np.linalg.norm(test_x, axis=1, keepdims=True)
    sims = b.astype(np.float64) @ a.T.astype(np.float64)
    preds = []
    for row in sims:
        top = np.argsort(-row, kind="stable")[: min(k, len(row))]
        votes = np.zeros(n_classes)
        for j in top:
            votes[train_y[j]] += np.exp(row[j] / temperature)
        preds.append(int(np.argmax(votes)))
    return np.array(preds)


def test_quickstart_writes_every_output(quickstart_run) -> None:
    result = quickstart_run
    assert [row.name for row in result.rows] == ["model", "random-init", "raw-pixels"] and not result.skipped
    for row in result.rows:  # one store and one results folder per encoder
        assert row.features == result.out / "features" / row.name
        assert len(FeatureStore(row.features).videos()) == SMALL_DATASET["n_videos"]
        for protocol in ("knn", "linear"):
            assert row.paths[protocol] == result.out / "results" / row.name / f"{protocol}.json"
            assert json.loads(row.paths[protocol].read_text())["model"]["spec"] == row.spec
    assert [row.spec for row in result.rows[1:]] == [f"random-init:{result.model.spec}", "raw-pixels"]
    assert FeatureStore(result.rows[1].features).manifest["model"]["provenance"]["random_init"] is True
    assert FeatureStore(result.rows[2].features).manifest["feature_dim"] == 192
    table = result.table_md.read_text()
    for label in (result.model.label, "random init (seed 0)", "raw pixels (8x8x3)", "majority class"):
        assert f"| {label} |" in table
    assert 0.0 < result.majority["metrics"]["accuracy"] <= 100.0
    for path in (result.knn_json, result.linear_json, result.table_md, result.timeline_png):
        assert path.is_file(), path
    assert result.timeline_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for data in (result.knn, result.linear):
        saved = json.loads((result.knn_json if data is result.knn else result.linear_json).read_text())
        assert saved["schema"] == "plstitch.results/v1"
        assert saved["dataset"] == "synthetic"
        assert 0.0 <= saved["metrics"]["accuracy"] <= 100.0
    store = FeatureStore(result.features)
    assert len(store.videos()) == SMALL_DATASET["n_videos"]
    assert store.manifest["fps"] == 1.0
    assert "synthetic knn Acc" in result.table_md.read_text()


def test_quickstart_knn_matches_brute_force(quickstart_run) -> None:
    result = quickstart_run
    store = FeatureStore(result.features)
    splits = result.knn["splits"]
    train = [store.read(v) for v in splits["train"]]
    test = [store.read(v) for v in splits["test"]]
    train_x = np.concatenate([t.features for t in train])
    train_y = np.concatenate([t.labels for t in train])
    n_classes = len(result.knn["class_names"])
    correct = total = 0
    for item in test:
        preds = brute_force_knn(train_x, train_y, item.features, 20, 0.07, n_classes)
        assert preds.tolist() == result.knn["predictions"][item.video]
        correct += int((preds == item.labels).sum())
        total += len(preds)
    assert result.knn["metrics"]["accuracy"] == pytest.approx(100.0 * correct / total)


def test_quickstart_majority_row_is_the_training_mode(quickstart_run) -> None:
    result = quickstart_run
    store = FeatureStore(result.features)
    splits = result.knn["splits"]
    train_y = np.concatenate([store.read(v).labels for v in splits["train"]])
    test_y = np.concatenate([store.read(v).labels for v in splits["test"]])
    mode = int(np.bincount(train_y[train_y >= 0]).argmax())
    labelled = test_y[test_y >= 0]
    assert result.majority["class_id"] == mode
    assert result.majority["metrics"]["accuracy"] == pytest.approx(100.0 * np.mean(labelled == mode))


def test_quickstart_differences_are_paired_over_the_test_videos(quickstart_run) -> None:
    """The model minus each reference row: per-video accuracy from the results files, checked against
    scipy's paired t-test written out here; the same numbers are in table.md and the JSON."""
    from scipy.stats import ttest_rel

    result = quickstart_run
    assert [(d["b"], d["protocol"]) for d in result.differences] == [
        (other, protocol) for other in ("random-init", "raw-pixels") for protocol in ("knn", "linear")
    ]
    table = result.table_md.read_text()
    for diff in result.differences:
        other = next(row for row in result.rows if row.name == diff["b"])
        mine = json.loads(result.model.paths[diff["protocol"]].read_text())["per_video"]
        theirs = json.loads(other.paths[diff["protocol"]].read_text())["per_video"]
        videos = sorted(mine)
        assert videos == sorted(theirs) == sorted(result.knn["splits"]["test"]) and len(videos) >= 2
        a = np.array([mine[v]["accuracy"] for v in videos])
        b = np.array([theirs[v]["accuracy"] for v in videos])
        test = ttest_rel(a, b)
        low, high = test.confidence_interval(0.95)
        assert diff["videos"] == len(videos) and diff["ahead"] == int(np.sum(a > b))
        assert diff["mean"] == pytest.approx(float(np.mean(a - b)))
        if np.std(a - b) > 0:
            assert (diff["ci_low"], diff["ci_high"]) == pytest.approx((low, high))
            assert diff["p_value"] == pytest.approx(test.pvalue)
            assert f"[{low:+.1f}, {high:+.1f}]" in table
        assert f"| {other.label} | {PROTOCOL_NAMES[diff['protocol']]} | {diff['mean']:+.1f} |" in table
    assert json.loads(json.dumps(result.to_dict()))["differences"] == result.differences


def test_quickstart_rerun_resumes_without_reextracting(quickstart_run, tiny_vit: Path) -> None:
    result = quickstart_run
    before = {p: p.stat().st_mtime_ns for p in (result.out / "features").glob("*/*.safetensors")}
    assert len(before) == 3 * SMALL_DATASET["n_videos"]
    again = run_quickstart(
        QuickstartConfig(
            out=result.out,
            model=str(tiny_vit),
            device="cpu",
            num_workers=0,
            linear_epochs=5,
            timeline_videos=2,
            progress=False,
            dataset_options=SMALL_DATASET,
        )
    )
    after = {p: p.stat().st_mtime_ns for p in (again.out / "features").glob("*/*.safetensors")}
    assert after == before
    assert again.knn["predictions"] == result.knn["predictions"]


def test_quickstart_command_prints_table(tiny_vit: Path, tmp_path: Path, monkeypatch) -> None:
    # the command has no dataset options: shrink the adapter's defaults for this test only
    from plstitch_eval import quickstart as quickstart_lib

    original = quickstart_lib.QuickstartConfig

    def small(**kwargs):
        return original(
            **kwargs, dataset_options=SMALL_DATASET, linear_epochs=2, timeline_videos=1, num_workers=0
        )

    monkeypatch.setattr(quickstart_lib, "QuickstartConfig", small)
    app = typer.Typer()
    quickstart_cmd.register(app)
    app.command("noop")(lambda: None)  # two commands, so `quickstart` is addressed by name as in the CLI
    out = tmp_path / "qs"
    res = CliRunner().invoke(
        app, ["quickstart", "--out", str(out), "--model", str(tiny_vit), "--device", "cpu"]
    )
    assert res.exit_code == 0, res.output
    knn = json.loads((out / "results" / "model" / "knn.json").read_text())
    assert "k-NN (k=20)" in res.stdout and "k-NN Acc" in res.stdout
    assert f"{knn['metrics']['accuracy']:.1f}" in res.stdout
    for label in (tiny_vit.name, "random init (seed 0)", "raw pixels (8x8x3)", "majority class"):
        assert label in res.stdout
    assert "paired over the test videos" in res.stdout and "model ahead in" in res.stdout
    assert (out / "figures" / "timeline.png").is_file()

    # --no-reference --json -: only the model and the majority class; stdout is the JSON alone
    res = CliRunner().invoke(
        app,
        ["quickstart", "--out", str(out), "--model", str(tiny_vit), "--device", "cpu", "--no-reference"]
        + ["--json", "-"],
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert [row["name"] for row in report["rows"]] == ["model", "majority"] and report["differences"] == []
    assert report["rows"][0]["metrics"]["knn"]["accuracy"] == pytest.approx(knn["metrics"]["accuracy"])
    assert "raw pixels" not in (out / "results" / "table.md").read_text()


def test_quickstart_json_rows_and_skipped_random_init(tiny_vit: Path, tmp_path: Path) -> None:
    """A raw checkpoint is not timm-format: no random-init row but a one-line reason; JSON has every row."""
    from safetensors.torch import load_file, save_file

    checkpoint = tmp_path / "tiny.safetensors"
    save_file(load_file(tiny_vit / "model.safetensors"), str(checkpoint))
    result = run_quickstart(
        QuickstartConfig(
            out=tmp_path / "qs",
            model=str(checkpoint),
            device="cpu",
            num_workers=0,
            linear_epochs=2,
            timeline_videos=1,
            progress=False,
            dataset_options=SMALL_DATASET,
        )
    )
    assert [row.name for row in result.rows] == ["model", "raw-pixels"]
    assert "random init row skipped" in result.skipped["random-init"]
    report = result.to_dict()
    json.dumps(report, allow_nan=False)  # plain JSON
    assert [row["name"] for row in report["rows"]] == ["model", "raw-pixels", "majority"]
    assert report["skipped"] == [{"name": "random-init", "reason": result.skipped["random-init"]}]
    for row in report["rows"][:2]:
        assert set(row["metrics"]) == {"knn", "linear"} and "accuracy" in row["metrics"]["knn"]
        assert Path(row["results"]["knn"]).is_file() and Path(row["features"]).is_dir()
    majority = report["rows"][2]
    assert majority["metrics"]["accuracy"] == pytest.approx(result.majority["metrics"]["accuracy"])
    assert majority["class_name"] in result.knn["class_names"]
    assert not (tmp_path / "qs" / "features" / "random-init").exists()


def test_compared_encoder_gets_its_own_row_and_differences(
    quickstart_run, tiny_vit: Path, tmp_path: Path, cache: Path
) -> None:
    """`--compare SPEC` adds SPEC as a row (its own store and results) between the model and the references;
    its numbers are those of SPEC run as the model, and the model's differences include it."""
    other = save_tiny_vit(tmp_path / "other-vit", seed=1)
    settings = dict(
        device="cpu",
        num_workers=0,
        linear_epochs=5,
        timeline_videos=1,
        progress=False,
        dataset_options=SMALL_DATASET,
        reference=False,
    )
    both = run_quickstart(
        QuickstartConfig(out=tmp_path / "both", model=str(tiny_vit), compare=(str(other),), **settings)
    )
    alone = run_quickstart(QuickstartConfig(out=tmp_path / "alone", model=str(other), **settings))
    assert [row.name for row in both.rows] == ["model", "compare-other-vit"]
    compared = both.rows[1]
    assert compared.label == "other-vit" and compared.features.name == "compare-other-vit"
    assert compared.results["knn"]["metrics"]["accuracy"] == pytest.approx(alone.knn["metrics"]["accuracy"])
    assert both.model.results["knn"]["metrics"]["accuracy"] == pytest.approx(
        quickstart_run.knn["metrics"]["accuracy"]
    )
    knn = next(d for d in both.differences if d["b"] == "compare-other-vit" and d["protocol"] == "knn")
    mine, theirs = both.model.results["knn"]["per_video"], compared.results["knn"]["per_video"]
    expected = np.mean([mine[v]["accuracy"] - theirs[v]["accuracy"] for v in sorted(mine)])
    assert knn["videos"] == len(mine) and knn["mean"] == pytest.approx(expected)
    assert "other-vit" in both.table_md.read_text()


def test_unknown_model_is_a_clear_error(tmp_path: Path) -> None:
    from plstitch_eval.errors import ModelNotFoundError

    with pytest.raises(ModelNotFoundError, match="neither a registry model"):
        run_quickstart(
            QuickstartConfig(
                out=tmp_path, model=str(tmp_path / "missing"), progress=False, dataset_options=SMALL_DATASET
            )
        )


# ------------------------------------------------------------------------------------------ shipped model

shipped = pytest.mark.skipif(
    not (SHIPPED_DIR / "model.safetensors").is_file(), reason="shipped model not exported yet"
)


@shipped
def test_shipped_model_is_small_and_loads_with_plain_timm() -> None:
    import torch

    size = sum(p.stat().st_size for p in SHIPPED_DIR.iterdir() if p.is_file())
    assert size < SHIPPED_MAX_BYTES
    model = timm.create_model(f"local-dir:{SHIPPED_DIR}", pretrained=True, num_classes=0).eval()
    encoder = load_encoder(default_model_spec())
    x = torch.rand(2, *encoder.data_config.input_size)
    with torch.inference_mode():
        assert torch.allclose(model.forward_features(x)[:, 0], encoder(x), atol=1e-6)
    from plstitch_eval.hub.ranking_head import load_temporal_head

    head = load_temporal_head(SHIPPED_DIR)
    assert head is not None
    card = (SHIPPED_DIR / "README.md").read_text(encoding="utf-8")
    assert "synthetic" in card.lower()


@shipped
@pytest.mark.slow
def test_shipped_model_beats_its_reference_rows(tmp_path: Path) -> None:
    """Issue 14's floors, measured against the references in the same run on the real synthetic test split:
    k-NN at least 5 points above raw pixels, and above the random-init backbone on both probes."""
    result = run_quickstart(QuickstartConfig(out=tmp_path / "q", device="cpu", num_workers=1, progress=False))
    rows = {row.name: {p: r["metrics"]["accuracy"] for p, r in row.results.items()} for row in result.rows}
    model, pixels, random = rows["model"], rows["raw-pixels"], rows["random-init"]
    assert model["knn"] >= pixels["knn"] + RAW_PIXELS_KNN_MARGIN, rows
    assert model["knn"] >= random["knn"] + RANDOM_INIT_MARGIN, rows
    assert model["linear"] >= random["linear"] + RANDOM_INIT_MARGIN, rows
    assert model["knn"] > result.majority["metrics"]["accuracy"] + 20, rows


@shipped
def test_shipped_model_as_a_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry the CLI registers: a local timm folder relative to the repository root."""
    from plstitch_eval.hub.registry import MODELS, ModelEntry

    entry = ModelEntry(
        name="plstitch-tiny-synthetic",
        architecture="vit_tiny_patch8_64",
        feature_dim=64,
        converter="timm",
        local_path="model_cards/plstitch-tiny-synthetic",
        license="MIT",
    )
    monkeypatch.setitem(MODELS, entry.name, entry)
    assert default_model_spec() == "plstitch-tiny-synthetic"
    encoder = load_encoder("plstitch-tiny-synthetic")
    assert encoder.feature_dim == 64
    assert encoder.provenance["path"] == str((SHIPPED_DIR / "model.safetensors").resolve())


@shipped
def test_shipped_card_states_the_real_architecture() -> None:
    """The card's Architecture row is what `architecture_text` makes of the shipped config.json (64-d ViT)."""
    from plstitch_train.publishing.cards import architecture_text

    config = json.loads((SHIPPED_DIR / "config.json").read_text(encoding="utf-8"))
    args = config["model_args"]
    row = architecture_text(config)
    for part in (f"embed dim {args['embed_dim']}", f"depth {args['depth']}", f"{args['num_heads']} heads"):
        assert part in row
    assert f"patch {args['patch_size'][0]}," in row and f"{args['img_size'][0]} px input" in row
    assert row.startswith("timm VisionTransformer") and "layout" not in row
    card = (SHIPPED_DIR / "README.md").read_text(encoding="utf-8")
    assert f"| Architecture | {row} |" in card


@shipped
def test_shipped_model_passes_the_publish_checks() -> None:
    """Its recorded results belong to its weights, so `push-to-hub` would accept it (issue 27)."""
    from plstitch_eval.hub.safe_load import sha256_file
    from plstitch_train.publishing.publish import check_folder_loads, check_results_belong

    meta = json.loads((SHIPPED_DIR / "plstitch.json").read_text(encoding="utf-8"))
    assert meta["weights_sha256"] == sha256_file(SHIPPED_DIR / "model.safetensors")
    assert {r["task"] for r in meta["results"]} == {"knn", "linear"}
    check_results_belong(SHIPPED_DIR)
    check_folder_loads(SHIPPED_DIR)

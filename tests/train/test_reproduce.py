"""`plstitch reproduce`: row definitions, aggregation, resumability and a tiny end-to-end reproduction."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from plstitch_eval.commands import reproduce as reproduce_command
from plstitch_eval.errors import ConfigError
from plstitch_train.config import flat_settings
from plstitch_train.reproduce import (
    RANDOM_INIT,
    ROWS,
    ReproduceConfig,
    ReproduceLayout,
    aggregate,
    best_run,
    ensure_trained,
    export_best,
    get_reproduce_preset,
    markdown_tables,
    mean_std,
    refuse_other_presets_tables,
    reproduce,
    train_config,
    training_seconds,
)

SMALL_DATASET = {"n_videos": 6, "min_seconds": 8.0, "max_seconds": 12.0}
ROW_FIELDS = ("lambda_vid", "lambda_mim", "lambda_jigsaw", "objective", "clip_len", "min_step")
ROW_ONLY = (*ROW_FIELDS, "permutation_classes", "centering", "epochs")


def _config(out: Path, linear_epochs: int | None = None, **changes) -> ReproduceConfig:
    preset = get_reproduce_preset("synthetic-smoke")
    if linear_epochs is not None:
        preset = dataclasses.replace(preset, linear_epochs=linear_epochs)
    return ReproduceConfig(preset=preset, out=out, **changes)


def test_rows_follow_the_paper_tables(tmp_path: Path) -> None:
    config = _config(tmp_path, steps=7)
    # (lambda_vid, lambda_mim, lambda_jigsaw, objective, clip_len, min_step); paper weights 1, 1, 0.4. The
    # smoke preset's clip steps start at 1; the clip-length rows set their own minimum step.
    expected = {
        "mim": (0.0, 1.0, 0.0, "pl", 4, 1),
        "mim-vid": (1.0, 1.0, 0.0, "pl", 4, 1),
        "mim-jigsaw": (0.0, 1.0, 0.4, "pl", 4, 1),
        "pl": (1.0, 1.0, 0.4, "pl", 4, 1),
        "pairwise": (1.0, 1.0, 0.4, "pairwise", 4, 1),
        "permutation": (1.0, 1.0, 0.4, "permutation", 4, 1),
        # the paper's objective ablation: jigsaw off, k = 8
        "mim-pl-k8": (1.0, 1.0, 0.0, "pl", 8, 1),
        "mim-pairwise-k8": (1.0, 1.0, 0.0, "pairwise", 8, 1),
        "mim-permutation-k8": (1.0, 1.0, 0.0, "permutation", 8, 1),
        # the clip-length ablation of the full model
        "pl-k8": (1.0, 1.0, 0.4, "pl", 8, 1),
        "pl-k12": (1.0, 1.0, 0.4, "pl", 12, 1),
        "pl-k16": (1.0, 1.0, 0.4, "pl", 16, 1),
        "mim-init": (0.0, 1.0, 0.0, "pl", 4, 1),
    }
    assert set(expected) == set(ROWS)
    budgets = []
    for row, values in expected.items():
        train = train_config(config, row, seed=3).to_flat_dict()
        assert tuple(train[f] for f in ROW_FIELDS) == values, row
        assert train["max_steps"] == 7 and train["seed"] == 3 and train["dataset"] == "synthetic"
        if row != "mim-init":
            budgets.append({k: v for k, v in train.items() if k not in ROW_ONLY})
    assert all(b == budgets[0] for b in budgets)  # same budget and settings except the row's own
    permutation = train_config(config, "mim-permutation-k8", seed=0)
    assert permutation.permutation_classes == 1000 and permutation.permutation_head == "temporal"
    init = train_config(config, "mim-init", seed=0)  # the MIM pretraining: Sinkhorn-Knopp targets, 24 epochs
    assert (init.centering, init.epochs) == ("sinkhorn_knopp", 24)
    assert train_config(config, "mim", seed=0).centering == "center"  # every ablation row: iBOT as published
    # the clip-length preset: the shortest synthetic video (80 frames at 2 fps) holds every clip
    clips = ReproduceConfig(preset=get_reproduce_preset("synthetic-clip-length"), out=tmp_path / "k")
    for row, k, step in (("pl", 4, 10), ("pl-k8", 8, 10), ("pl-k12", 12, 7), ("pl-k16", 16, 5)):
        sampling = train_config(clips, row, seed=0).sampling
        assert (sampling.clip_len, sampling.min_step, sampling.max_step) == (k, step, 40)
        assert step * (k - 1) < 80
    reversed_run = train_config(config, "pl", seed=0, reverse_time=True)
    assert reversed_run.reverse_time and not train_config(config, "pl", seed=0).reverse_time


def test_mean_std_is_sample_std() -> None:
    values = [61.0, 64.5, 70.25]
    mean, std = mean_std(values)
    assert mean == pytest.approx(statistics.mean(values))
    assert std == pytest.approx(statistics.stdev(values))
    assert mean_std([5.0]) == (5.0, None)


def _run(row: str, seed: int, knn: float, linear: float, reverse: bool = False) -> dict:
    metrics = {p: {"accuracy": v, "macro_f1_video": v / 2} for p, v in (("knn", knn), ("linear", linear))}
    return {"row": row, "seed": seed, "reverse_time": reverse, "metrics": metrics}


def test_aggregate_markdown_and_best_run() -> None:
    runs = {
        "pl-seed0": _run("pl", 0, 70.0, 80.0),
        "pl-seed1": _run("pl", 1, 74.0, 78.0),
        "pl-reversed-seed0": _run("pl", 0, 10.0, 10.0, reverse=True),  # a row of its own
        "mim-seed0": _run("mim", 0, 50.0, 60.0),
        "mim-seed1": _run("mim", 1, 52.0, 61.0),
    }
    agg = aggregate(runs)
    assert agg["pl"]["knn/accuracy"]["mean"] == pytest.approx(72.0)
    assert agg["pl"]["knn/accuracy"]["std"] == pytest.approx(statistics.stdev([70.0, 74.0]))
    assert agg["pl"]["knn/accuracy"]["values"] == [70.0, 74.0]
    assert agg["mim"]["linear/macro_f1_video"]["mean"] == pytest.approx(30.25)
    assert agg["pl-reversed"]["knn/accuracy"]["values"] == [10.0]
    assert "(synthetic test split, one seed)" not in markdown_tables(agg, 1)  # pl and mim have 2 seeds
    assert "(synthetic test split, one seed)" in markdown_tables(
        {"mim": {k: {**v, "values": v["values"][:1]} for k, v in agg["mim"].items()}}, 1
    )  # no "over 1 seeds"
    partial = markdown_tables(agg, 3)  # a preset of 3 seeds with 2 finished
    assert "mean ± std over the seeds finished so far: 2 of 3" in partial and "over 3 seeds" not in partial
    one_off = {"values": [54.0], "mean": 54.0, "std": None}
    text = markdown_tables({**agg, "raw-pixels": {"knn/accuracy": one_off}}, 2)
    assert "**References** (synthetic test split, mean ± std over 2 seeds)" in text  # measured once by design
    assert "(synthetic test split, mean ± std over 2 seeds)" in text
    assert "| MIM only | 51.0 ± 1.4 | 25.5 ± 0.7 | 60.5 ± 0.7 | 30.2 ± 0.4 |" in text
    assert "| MIM + L_vid + L_jigsaw (PL-Stitch) | 72.0 ± 2.8 |" in text
    # a one-row objective table repeating a row of a larger table is left out
    assert "| Plackett-Luce (PL-Stitch) |" not in text and "Temporal objective" not in text
    assert "MIM + L_jigsaw" not in text  # rows without runs are left out
    assert "| PL-Stitch, time-reversed videos | 10.0 | 5.0 | 10.0 | 5.0 | - | - | - | - |" in text
    assert best_run(runs) == "pl-seed1"
    runs["pl-seed0"] = _run("pl", 0, 74.0, 78.0)  # a tie goes to the lower seed
    assert best_run(runs) == "pl-seed0"


def test_run_with_other_settings_is_refused(tmp_path: Path) -> None:
    config = _config(tmp_path, steps=5)
    run_dir = tmp_path / "runs" / "pl-seed0"
    run_dir.mkdir(parents=True)
    other = train_config(config, "pl", 0).replace(max_steps=9)
    (run_dir / "train_config.json").write_text(json.dumps(other.to_dict()))
    expected = r"pl-seed0 was trained with other settings \(max_steps 9 -> 5, as old -> new\)"
    with pytest.raises(ConfigError, match=expected):
        ensure_trained(run_dir, train_config(config, "pl", 0))


def test_unknown_row_and_preset_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Unknown ablation row"):
        _config(tmp_path, rows=["mim", "nope"]).row_names()
    app = typer.Typer()
    reproduce_command.register(app)
    app.command("noop")(lambda: None)
    res = CliRunner().invoke(app, ["reproduce", "--preset", "nope", "--out", str(tmp_path)])
    assert isinstance(res.exception, ConfigError)
    assert "synthetic-smoke" in str(res.exception)


# ----------------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def tiny_reproduction(tmp_path_factory: pytest.TempPathFactory):
    """Two seeds of the PL-Stitch row (1 step each) plus their time-reversed runs, on 6 short videos."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PLSTITCH_CACHE", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("PLSTITCH_NO_LIVE", "1")
    try:
        config = _config(
            tmp_path_factory.mktemp("reproduce"),
            seeds=2,
            steps=1,
            rows=["pl"],
            num_workers=0,
            linear_epochs=2,
            dataset_options=SMALL_DATASET,
        )
        done = []
        summary = reproduce(config, on_run_done=lambda run: done.append(run["row"]))
        yield config, summary, done
    finally:
        mp.undo()


def test_reproduction_trains_evaluates_and_tabulates(tiny_reproduction) -> None:
    config, summary, done = tiny_reproduction
    out = Path(config.out)
    trained = {"pl-seed0", "pl-seed1", "pl-reversed-seed0", "pl-reversed-seed1"}
    references = {f"{RANDOM_INIT}-seed0", f"{RANDOM_INIT}-seed1", "raw-pixels", "oracle-time", "majority"}
    assert set(summary["runs"]) == trained | references
    assert done == ["pl", "pl", "pl", "pl"]
    knn = [
        json.loads((out / "runs" / f"pl-seed{s}" / "eval" / "knn.json").read_text())["metrics"]["accuracy"]
        for s in (0, 1)
    ]
    stats = summary["aggregated"]["pl"]["knn/accuracy"]
    assert stats["values"] == knn and stats["mean"] == pytest.approx(statistics.mean(knn))
    assert summary["best_pl_run"] == max(("pl-seed0", "pl-seed1"), key=lambda n: knn[int(n[-1])])
    reversed_config = flat_settings(
        json.loads((out / "runs" / "pl-reversed-seed0" / "train_config.json").read_text())
    )
    assert reversed_config["reverse_time"] is True and reversed_config["max_steps"] == 1
    on_disk = json.loads((out / "ablation.json").read_text())
    assert on_disk["table_markdown"] == (out / "ablation.md").read_text() == summary["table_markdown"]
    for label in ("PL-Stitch, forward videos", "raw pixels (8x8x3)", "oracle: normalised time t/T only"):
        assert f"| {label} |" in summary["table_markdown"]


def test_training_time_is_summed_over_runs_and_resumed_segments(tiny_reproduction, tmp_path: Path) -> None:
    config, summary, _ = tiny_reproduction
    trained = [r for r in summary["runs"].values() if r.get("train_seconds") is not None]
    assert len(trained) == 4 and all(r["train_seconds"] > 0 for r in trained)
    assert summary["train_seconds_total"] == pytest.approx(sum(r["train_seconds"] for r in trained))
    assert f"{summary['train_seconds_total'] / 60:.1f} min for 4 runs" in summary["table_markdown"]
    log = tmp_path / "log.jsonl"  # a run stopped at 30 s and resumed for 12 s more
    rows = [json.dumps({"step": i, "time": t}) for i, t in enumerate([10, 30, 5, 12])]
    log.write_text("\n".join(rows) + "\n")
    assert training_seconds(tmp_path) == pytest.approx(42.0)


def test_every_trained_run_starts_from_the_shared_random_init(tiny_reproduction) -> None:
    config, summary, _ = tiny_reproduction
    shared = Path(summary["shared_init"])
    assert shared == (Path(config.out) / "runs" / f"{RANDOM_INIT}-seed0").resolve()
    for name in ("pl-seed0", "pl-seed1", "pl-reversed-seed1"):
        train = json.loads((Path(config.out) / "runs" / name / "train_config.json").read_text())
        assert train["model"]["init"] == str(shared)


def test_order_measures_and_heldout_jigsaw_per_run(tiny_reproduction) -> None:
    from plstitch_train.heldout import jigsaw_chance

    _, summary, _ = tiny_reproduction
    runs = summary["runs"]
    for name in ("pl-seed0", "pl-reversed-seed1"):
        order = runs[name]["order"]
        assert -1.0 <= order["tau"] <= 1.0 and order["time_r2"] <= 1.0
        jigsaw = order["heldout_jigsaw"]
        assert jigsaw["chance"] == pytest.approx(jigsaw_chance(8 * 8))  # 64 px frames, 8 px patches
        assert order["jigsaw_minus_chance"] == pytest.approx(jigsaw["loss"] - jigsaw["chance"])
    for name in (f"{RANDOM_INIT}-seed0", "raw-pixels"):  # no heads: only the t/T probe
        assert runs[name]["order"]["tau"] is None and runs[name]["order"]["jigsaw_minus_chance"] is None
    assert runs["oracle-time"]["order"]["time_r2"] > 0.99  # (cos, sin) of t/T: linear in t/T up to curvature
    assert runs["majority"]["metrics"]["knn"]["macro_f1_video"] is None
    assert (
        "order/tau" in summary["aggregated"]["pl"] and "order/tau" not in summary["aggregated"]["raw-pixels"]
    )


def test_awareness_is_reported_against_same_direction_controls(tiny_reproduction) -> None:
    _, summary, _ = tiny_reproduction
    awareness = summary["awareness"]["pl"]
    figure = Path(awareness["figure"])
    assert figure.read_bytes()[:4] == b"\x89PNG" and figure == Path(summary["awareness_figure"])
    data = json.loads(figure.with_suffix(".json").read_text())
    assert set(data["pair_means"]["forward vs reversed"]) == {
        f"pl-seed{f} vs pl-reversed-seed{r}" for f in (0, 1) for r in (0, 1)
    }
    assert list(data["pair_means"]["forward vs forward"]) == ["pl-seed0 vs pl-seed1"]
    cross = statistics.mean(data["pair_means"]["forward vs reversed"].values())
    same = data["same_direction_mean"]
    assert awareness["contrast"] == pytest.approx(cross - same, abs=1e-9)
    twins = [data["pair_means"]["forward vs reversed"][f"pl-seed{s} vs pl-reversed-seed{s}"] for s in (0, 1)]
    direction_only = awareness["cross_split_means"]["direction only (same seed)"]
    assert direction_only == pytest.approx(statistics.mean(twins), abs=1e-9)  # equal frame counts per pair


def test_rerun_skips_finished_runs(tiny_reproduction, monkeypatch: pytest.MonkeyPatch) -> None:
    from plstitch_train import trainer

    config, summary, _ = tiny_reproduction

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(trainer, "train", no_training)
    monkeypatch.setattr("plstitch_eval.evaluate.evaluate_encoder", no_training)
    again = reproduce(config)
    assert again["aggregated"] == summary["aggregated"]


def test_another_presets_tables_are_not_replaced(tiny_reproduction) -> None:
    config, _, _ = tiny_reproduction
    summary = config.out / "ablation.json"
    before = summary.read_bytes()
    runs_before = sorted(p.name for p in (config.out / "runs").iterdir())
    other = ReproduceConfig(preset=get_reproduce_preset("synthetic-objectives"), out=config.out, seeds=1)
    refused = r"holds the tables of preset 'synthetic-smoke'.*move ablation.json"
    with pytest.raises(ConfigError, match=refused):
        reproduce(other)
    assert summary.read_bytes() == before  # refused before anything was trained or written
    assert sorted(p.name for p in (config.out / "runs").iterdir()) == runs_before


def test_export_best_gives_a_loadable_model(tiny_reproduction, tmp_path: Path) -> None:
    import timm

    from plstitch_eval.hub import load_encoder

    _, summary, _ = tiny_reproduction
    folder = export_best(summary, tmp_path / "plstitch-tiny-synthetic", "plstitch-tiny-synthetic")
    assert (folder / "README.md").is_file() and (folder / "temporal_head.safetensors").is_file()
    encoder = load_encoder(folder)
    timm_model = timm.create_model(f"local-dir:{folder}", pretrained=True, num_classes=0)
    assert encoder.feature_dim == timm_model.num_features
    meta = json.loads((folder / "plstitch.json").read_text())
    assert {r["task"] for r in meta["results"]} == {"knn", "linear"}


@pytest.mark.slow  # ~100-280 s of spawned training; the serial path is covered above
def test_two_runs_at_once_give_the_same_runs(tiny_reproduction, tmp_path: Path) -> None:
    """`jobs=2`: runs train in two spawned processes; same runs, settings and (up to float noise) features."""
    import numpy as np

    from plstitch_eval.store.features import FeatureStore

    config, summary, _ = tiny_reproduction
    parallel = dataclasses.replace(config, out=tmp_path / "parallel", jobs=2)
    done: list[str] = []
    result = reproduce(parallel, on_run_done=lambda run: done.append(run["run_dir"]))
    assert set(result["runs"]) == set(summary["runs"]) and len(done) == 4
    for name in ("pl-seed1", "pl-reversed-seed0"):
        ours, theirs = (Path(c.out) / "runs" / name for c in (parallel, config))
        settings = [flat_settings(json.loads((d / "train_config.json").read_text())) for d in (ours, theirs)]
        for s, root in zip(settings, (parallel.out, config.out), strict=True):
            assert s.pop("init") == str((Path(root) / "runs" / f"{RANDOM_INIT}-seed0").resolve())
            assert Path(s.pop("cache_dir")) == Path(root) / "frame_cache"
        assert settings[0] == settings[1]
        a, b = (FeatureStore(d / "features") for d in (ours, theirs))
        video = a.videos()[0]
        np.testing.assert_allclose(a.read(video).features, b.read(video).features, atol=1e-4)
    assert result["awareness"]["pl"]["contrast"] == pytest.approx(
        summary["awareness"]["pl"]["contrast"], abs=1e-3
    )
    with pytest.raises(ConfigError, match="jobs must be >= 1"):
        dataclasses.replace(config, jobs=0)


def test_the_synthetic_preset_trains_two_runs_at_once_unless_told_otherwise() -> None:
    full, smoke = get_reproduce_preset("synthetic"), get_reproduce_preset("synthetic-smoke")
    assert ReproduceConfig(preset=full).n_jobs == 2 and ReproduceConfig(preset=smoke).n_jobs == 1
    assert ReproduceConfig(preset=full, jobs=1).n_jobs == 1


def test_unreadable_tables_are_not_replaced(tmp_path: Path) -> None:
    config = _config(tmp_path, steps=5)
    layout = ReproduceLayout.of(config)
    layout.root.mkdir(parents=True, exist_ok=True)
    layout.summary_json.write_text("{not json")
    unreadable = r"cannot be read as the tables of a reproduction.*move ablation.json"
    with pytest.raises(ConfigError, match=unreadable):
        refuse_other_presets_tables(layout, config.preset.name)
    assert layout.summary_json.read_text() == "{not json"

"""What changes a temporal result is recorded and fixed by default (threads, device), `--seeds N` trains N
different seeds, each equal to a one-seed run, refusals without validation videos say what to do, and the
epoch progress reaches a log that is not a terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import plstitch_eval.protocols.temporal as protocol
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.temporal.fit import TemporalConfig

from .conftest import make_procedure_store

runner = CliRunner()
SMALL = dict(stages=2, layers=3, channels=8, epochs=3, lr=1e-2)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Official train / val / test splits, so every seed trains on the same videos."""
    return make_procedure_store(tmp_path / "store", n_videos=8, dim=8, with_val=True, max_frames=50).root


@pytest.fixture
def keep_torch_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def same_model(a, b) -> bool:
    sa, sb = a.model.state_dict(), b.model.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def without_created(results: dict) -> dict:
    return {k: v for k, v in results.items() if k != "created"}


# --------------------------------------------------------------------------------------- threads, device
def test_results_record_threads_and_device_and_the_default_ignores_the_machine(store, keep_torch_threads):
    runs = []
    for machine_threads in (2, 3):  # torch's setting differs between machines (physical cores)
        torch.set_num_threads(machine_threads)
        results, fit = protocol.run_temporal(store, TemporalConfig(**SMALL), progress=False)
        assert torch.get_num_threads() == machine_threads  # restored after the fit
        runs.append((results, fit))
    (a, fit_a), (b, fit_b) = runs
    assert a["protocol"]["threads"] == fit_a.threads == 1 and a["protocol"]["num_threads"] == 1
    assert a["protocol"]["device"] == fit_a.device == "cpu"
    assert a["protocol"]["torch"] == torch.__version__
    assert a["protocol"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert without_created(a) == without_created(b) and same_model(fit_a, fit_b)  # same default, same run


def test_explicit_and_machine_thread_counts_are_recorded(store, keep_torch_threads):
    results, fit = protocol.run_temporal(store, TemporalConfig(**SMALL, num_threads=2), progress=False)
    assert results["protocol"]["threads"] == fit.threads == 2
    torch.set_num_threads(3)
    results, fit = protocol.run_temporal(store, TemporalConfig(**SMALL, num_threads=None), progress=False)
    assert results["protocol"]["threads"] == fit.threads == 3 and results["protocol"]["num_threads"] is None


def test_same_seed_and_threads_give_identical_results_through_the_cli(store, tmp_path):
    args = ["temporal", "--features", str(store), "--stages", "2", "--layers", "3", "--channels", "8"]
    args += ["--epochs", "3", "--seed", "4", "--threads", "2"]
    for name in ("a", "b"):
        result = runner.invoke(app, [*args, "--json", str(tmp_path / f"{name}.json")])
        assert result.exit_code == 0, result.output
        assert "cpu, 2 threads" in " ".join(result.stdout.split())
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("a", "b"))
    assert a["protocol"]["threads"] == 2 and a["protocol"]["device"] == "cpu"
    assert without_created(a) == without_created(b)


def test_threads_zero_means_torchs_setting(store, tmp_path, keep_torch_threads):
    torch.set_num_threads(2)
    out = tmp_path / "r.json"
    args = ["temporal", "--features", str(store), "--stages", "2", "--layers", "2", "--channels", "4"]
    result = runner.invoke(app, [*args, "--epochs", "1", "--threads", "0", "--json", str(out)])
    assert result.exit_code == 0, result.output
    recorded = json.loads(out.read_text())["protocol"]
    assert recorded["threads"] == 2 and recorded["num_threads"] is None


# ------------------------------------------------------------------------------------------------ seeds
def test_every_seed_is_its_own_run_equal_to_a_one_seed_run(store):
    config = TemporalConfig(**SMALL, seed=5)
    results, fits = protocol.run_temporal_seeds(store, config, seeds=3, progress=False)
    assert [run["seed"] for run in results["seeds"]] == [5, 6, 7]
    for run, fit in zip(results["seeds"], fits, strict=True):
        alone, fit_alone = protocol.run_temporal(
            store, TemporalConfig(**SMALL, seed=run["seed"]), progress=False
        )
        assert same_model(fit, fit_alone)  # the weights of that seed's one-seed run
        assert fit.train_losses == fit_alone.train_losses and fit.val_scores == fit_alone.val_scores
        assert run["metrics"] == alone["metrics"] and run["chosen_epoch"] == alone["protocol"]["chosen_epoch"]
    # different seeds: different models (identical runs would also give std 0 on every metric)
    assert not same_model(fits[0], fits[1]) and not same_model(fits[1], fits[2])
    assert len({tuple(fit.train_losses) for fit in fits}) == 3
    assert any(value > 0 for value in results["metrics_std"].values())


# ----------------------------------------------------------------------------- no validation videos
def edit_manifest(root: Path, change) -> None:
    path = root / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def run_cli(root: Path, *extra: str):
    args = ["temporal", "--features", str(root), "--stages", "2", "--layers", "2", "--channels", "4"]
    return runner.invoke(app, [*args, "--epochs", "1", *extra])


def one_line_error(result) -> str:
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    text = " ".join(result.output.split())
    assert text.startswith("error:") and text.count("error:") == 1
    return text


def test_one_training_video_names_the_manifest_entry_and_following_it_works(tmp_path):
    root = make_procedure_store(tmp_path / "store", n_videos=4, dim=8).root  # 2 train, no val, 2 test

    def one_train_video(manifest):
        manifest["splits"]["train"] = manifest["splits"]["train"][:1]

    edit_manifest(root, one_train_video)
    with pytest.raises(EvaluationError, match="1 training video and no 'val' split") as err:
        protocol.load_temporal_data(root)
    assert str(root / "manifest.json") in str(err.value)
    text = one_line_error(run_cli(root))
    assert 'move some videos from the "train" list of "splits" into a "val" list beside it' in text
    for val_fraction in ("0", "0.5"):  # no fraction helps with one training video: the same advice
        assert 'into a "val" list' in one_line_error(run_cli(root, "--val-fraction", val_fraction))

    def with_val(manifest):  # what the message says to do
        manifest["splits"]["val"] = [manifest["splits"]["test"][0]]
        manifest["splits"]["test"] = manifest["splits"]["test"][1:]

    edit_manifest(root, with_val)
    assert run_cli(root).exit_code == 0


def test_a_recorded_scheme_with_val_videos_is_named_and_following_it_works(tmp_path):
    root = make_procedure_store(tmp_path / "store", n_videos=5, dim=8).root
    manifest = json.loads((root / "manifest.json").read_text())
    train, test = manifest["splits"]["train"], manifest["splits"]["test"]

    def schemes(manifest):
        manifest["splits"] = {"train": train[:1], "val": [], "test": test}
        manifest["split_scheme"] = "train-test"
        manifest["split_schemes"] = {
            "train-test": {"train": train[:1], "val": [], "test": test},
            "train-val-test": {"train": train[:1], "val": train[1:], "test": test},
        }

    edit_manifest(root, schemes)
    text = one_line_error(run_cli(root))
    assert "pass --split-scheme train-val-test (recorded with val videos: train-val-test)" in text
    assert run_cli(root, "--split-scheme", "train-val-test").exit_code == 0


@pytest.mark.parametrize(("val_fraction", "held"), [(0.0, "none"), (1.0, "all"), (-0.2, "none")])
def test_val_fraction_that_holds_out_none_or_all_names_the_flag(tmp_path, val_fraction, held):
    root = make_procedure_store(tmp_path / "store", n_videos=8, dim=8).root  # 6 train, no val
    with pytest.raises(ConfigError, match=f"would hold out {held} of the 6 training videos") as err:
        protocol.load_temporal_data(root, val_fraction=val_fraction)
    assert "pass --val-fraction between 0 and 1" in str(err.value)
    text = one_line_error(run_cli(root, "--val-fraction", str(val_fraction)))
    assert "or record a val split: in " in text and 'into a "val" list' in text
    assert run_cli(root, "--val-fraction", "0.2").exit_code == 0  # the advice works


def test_an_official_val_split_ignores_val_fraction(store):
    data = protocol.load_temporal_data(store, val_fraction=0.0)
    assert data.validation == "official" and data.val


# -------------------------------------------------------------------------------------------- progress
def test_epoch_lines_reach_a_log_that_is_not_a_terminal(store):
    args = ["temporal", "--features", str(store), "--stages", "2", "--layers", "2", "--channels", "4"]
    result = runner.invoke(app, [*args, "--epochs", "2", "--seed", "3"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("MS-TCN seed 3 (accuracy): ")]
    # after the first epoch (the run has started), not only at the end
    assert lines[0].startswith("MS-TCN seed 3 (accuracy): 1/2 (50%)  val ") and "ETA" in lines[0]
    assert lines[-1].startswith("MS-TCN seed 3 (accuracy): 2/2 (100%)")
    quiet = runner.invoke(app, ["--quiet", *args, "--epochs", "2"])
    assert quiet.exit_code == 0 and "MS-TCN seed" not in quiet.stderr

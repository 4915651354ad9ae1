"""`plstitch_eval/extract/request.py` without the CLI: the default model, `--videos` parsing, the checks made
before any model loads, and a run's closing lines and exit codes (encoders and extraction replaced by
stand-ins, so no model loads and no video is decoded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError, DataError, FeatureStoreError
from plstitch_eval.extract import ExtractOptions, ExtractSummary, MultiExtractSummary, VideoResult
from plstitch_eval.extract import request as request_module
from plstitch_eval.extract.request import (
    SYNTHETIC_DEFAULT_MODEL,
    ExtractRequest,
    default_model,
    extract_session,
    failed_videos_line,
    video_names,
)
from plstitch_eval.hub.registry import MODELS


def test_the_synthetic_dataset_defaults_to_the_shipped_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_model("synthetic") == SYNTHETIC_DEFAULT_MODEL
    with pytest.raises(ConfigError, match=r"^--model is required for dataset 'cholec80': pass a registry"):
        default_model("cholec80")
    monkeypatch.delitem(MODELS, SYNTHETIC_DEFAULT_MODEL)
    with pytest.raises(ConfigError, match="--model is required for dataset 'synthetic'"):
        default_model("synthetic")


def test_video_names_are_a_comma_list_or_every_video() -> None:
    assert video_names(" a, b ,,c ") == ["a", "b", "c"]
    assert video_names(None) is None and video_names("") is None


def test_specs_are_unique_in_order_and_where_names_the_folder(tmp_path: Path) -> None:
    one = ExtractRequest("synthetic", tmp_path / "s", models=["m", "m"])
    assert one.specs == ["m"] and one.where == str(tmp_path / "s")
    several = ExtractRequest("synthetic", tmp_path / "s", models=["b", "a", "b"])
    assert several.specs == ["b", "a"] and several.where == f"the stores under {tmp_path / 's'}"
    assert ExtractRequest("synthetic", tmp_path).specs == [SYNTHETIC_DEFAULT_MODEL]


def test_check_gives_one_store_per_model(cholec_root: Path, tmp_path: Path) -> None:
    options = ExtractOptions(device="cpu")
    adapter, targets = ExtractRequest("cholec80", tmp_path / "one", cholec_root, ["m1"]).check(options)
    assert adapter.name == "cholec80" and [(t.name, t.out) for t in targets] == [("m1", tmp_path / "one")]
    _, targets = ExtractRequest("cholec80", tmp_path / "two", cholec_root, ["m1", "m2"]).check(options)
    assert [t.out for t in targets] == [tmp_path / "two" / "m1", tmp_path / "two" / "m2"]


def test_check_refuses_a_wrong_root_unknown_videos_and_a_foreign_out(
    cholec_root: Path, tmp_path: Path
) -> None:
    options = ExtractOptions(device="cpu")
    with pytest.raises((ConfigError, DataError)):
        ExtractRequest("cholec80", tmp_path / "s", tmp_path / "nowhere", ["m"]).check(options)
    with pytest.raises(ConfigError, match="video99"):
        ExtractRequest("cholec80", tmp_path / "s", cholec_root, ["m"]).check(
            ExtractOptions(device="cpu", videos=["video99"])
        )
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(FeatureStoreError, match="foreign exists, is not empty"):
        ExtractRequest("cholec80", foreign, cholec_root, ["m"]).check(options)


def _summary(store: Path, *failed: str) -> ExtractSummary:
    results = [VideoResult("video01", "done", frames=3, seconds=1.0)]
    return ExtractSummary(store, results + [VideoResult(v, "failed", error="bad") for v in failed], 1.0)


@pytest.fixture
def extracted(monkeypatch: pytest.MonkeyPatch):
    """Stand-ins for the encoders and the extraction: the run returns (or raises) what the test says."""
    loaded: list[str] = []
    monkeypatch.setattr(request_module, "load_encoder", lambda spec, **_: loaded.append(spec) or spec)

    def returns(outcome) -> list[str]:
        def fake(adapter, targets, options):
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome(targets)

        monkeypatch.setattr(request_module, "extract_many", fake)
        return loaded

    return returns


def test_a_clean_run_prints_its_summary_writes_json_and_exits_0(
    extracted, cholec_root: Path, tmp_path: Path, capsys
) -> None:
    loaded = extracted(lambda targets: MultiExtractSummary([_summary(targets[0].out)], ["m"], 1.0))
    request = ExtractRequest("cholec80", tmp_path / "s", cholec_root, ["m"], json_path=Path("-"))
    assert extract_session(request, ExtractOptions(device="cpu")) == 0
    out, err = capsys.readouterr()
    assert loaded == ["m"] and '"store"' in out and "Feature extraction" in err


def test_failed_videos_exit_1_naming_each_and_its_model(extracted, cholec_root: Path, tmp_path: Path) -> None:
    def two_models(targets):
        stores = [_summary(targets[0].out, "video02"), _summary(targets[1].out, "video03")]
        return MultiExtractSummary(stores, ["a", "b"], 1.0)

    extracted(two_models)
    request = ExtractRequest("cholec80", tmp_path / "s", cholec_root, ["a", "b"])
    assert extract_session(request, ExtractOptions(device="cpu")) == 1
    summary = two_models(request.check(ExtractOptions(device="cpu"))[1])
    line = failed_videos_line(summary, request.where)
    assert line.startswith("2 video(s) failed: video02 (a), video03 (b); the others are in the stores under")
    single = MultiExtractSummary([_summary(tmp_path, "video02")], ["a"], 1.0)
    assert failed_videos_line(single, "s").startswith("1 video(s) failed: video02; the others are in s.")


def test_an_interrupted_run_exits_130(extracted, cholec_root: Path, tmp_path: Path, capsys) -> None:
    extracted(KeyboardInterrupt())
    request = ExtractRequest("cholec80", tmp_path / "s", cholec_root, ["m"])
    assert extract_session(request, ExtractOptions(device="cpu")) == 130
    assert "hold(s) every video finished so far; rerun the same command to resume" in capsys.readouterr().err


def test_another_rank_exits_by_its_own_share(extracted, cholec_root: Path, tmp_path: Path, capsys) -> None:
    def rank_one(targets, *failed):
        return MultiExtractSummary([_summary(targets[0].out, *failed)], ["m"], 1.0, rank=1)

    request = ExtractRequest("cholec80", tmp_path / "s", cholec_root, ["m"], json_path=Path("-"))
    extracted(lambda targets: rank_one(targets))
    assert extract_session(request, ExtractOptions(device="cpu")) == 0
    extracted(lambda targets: rank_one(targets, "video02"))
    assert extract_session(request, ExtractOptions(device="cpu")) == 1
    assert capsys.readouterr().out == ""  # rank 0 reports


def test_no_model_given_notes_the_default_once(extracted, tmp_path: Path, capsys, monkeypatch) -> None:
    extracted(lambda targets: MultiExtractSummary([_summary(targets[0].out)], ["m"], 1.0))
    monkeypatch.setattr(request_module, "get_dataset", lambda name, root=None: _NoVideos())
    monkeypatch.setattr(request_module, "select_videos", lambda *args: [])
    request = ExtractRequest("synthetic", tmp_path / "s")
    assert extract_session(request, ExtractOptions(device="cpu")) == 0
    err = capsys.readouterr().err
    note = f"note: no --model given: using {SYNTHETIC_DEFAULT_MODEL}, the shipped toy model for the synthetic"
    assert note + " dataset" in err
    monkeypatch.setenv("RANK", "1")
    assert extract_session(request, ExtractOptions(device="cpu")) == 0
    assert "note:" not in capsys.readouterr().err


class _NoVideos:
    name = "synthetic"

"""Publishing probes to the Hub and using them by name, offline: backbone pinning and its refusals, the card
(licence, metrics with per-video intervals), the folder that is uploaded, loading it back from a Hugging Face
cache entry, a tampered backbone, and the listing of cached probes. No network: fake caches in temp dirs,
`HfApi` calls patched."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from huggingface_hub import HfApi, ModelCard

from plstitch_eval.errors import ModelNotFoundError, PublishError
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.probes import ProbeError, load_probe, save_probe
from plstitch_eval.probes.backbone import pin_backbone
from plstitch_eval.probes.card import RESULTS_NAME
from plstitch_eval.probes.hub import cached_probes, download_probe, resolve_probe
from plstitch_eval.probes.publish import push_probe, write_probe_repo
from plstitch_eval.utils.stats import mean_interval
from tests.eval.hub.conftest import hf_cache, temp_entry  # noqa: F401 (fixtures)
from tests.eval.probes.conftest import CLASS_NAMES, MANIFEST, one_line_error, random_head

ENCODER = "org/encoder-a"
ENCODER_BYTES = b"the encoder's weights"
METRICS = {"accuracy": 61.0, "macro_f1_pooled": 50.0, "macro_f1_video": 48.0, "edit": 70.0}
PER_VIDEO = {
    "v1": {"accuracy": 60.0, "macro_f1": 40.0, "edit": 65.0},
    "v2": {"accuracy": 70.0, "macro_f1": 50.0, "edit": 72.0},
    "v3": {"accuracy": 55.0, "macro_f1": 54.0, "edit": 73.0},
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_probe(folder: Path, spec: str, weights_sha: str | None, dataset: str = "cholec80") -> Path:
    manifest = {
        **MANIFEST,
        "dataset": dataset,
        "model": {**MANIFEST["model"], "spec": spec, "provenance": {"sha256": weights_sha}},
    }
    return save_probe(folder, "linear", random_head(), manifest, CLASS_NAMES, {"lr": 0.1}, METRICS)


def results_for(folder: Path, **changes: Any) -> Path:
    """The results JSON of the run that saved the probe in `folder` (as `plstitch linear --json` does)."""
    probe = load_probe(folder)
    record = {
        "schema": "plstitch.results/v1",
        "task": "linear",
        "dataset": probe.dataset,
        "model": {"spec": probe.encoder["spec"], "provenance": {"sha256": probe.encoder["weights_sha256"]}},
        "splits": {"train": ["v4", "v5"], "test": sorted(PER_VIDEO)},
        "class_names": probe.class_names,
        "metrics": dict(METRICS),
        "per_video": PER_VIDEO,
        **changes,
    }
    path = folder.parent / f"{folder.name}-results.json"
    path.write_text(json.dumps(record))
    return path


@pytest.fixture
def encoder_cache(hf_cache):  # noqa: F811
    """An offline cache holding `org/encoder-a` (timm layout, a licence in its card); returns its commit."""
    _, commit = hf_cache(
        ENCODER,
        {
            "model.safetensors": lambda p: p.write_bytes(ENCODER_BYTES),
            "config.json": lambda p: p.write_text("{}"),
            "README.md": lambda p: p.write_text("---\nlicense: cc-by-nc-4.0\n---\n# encoder\n"),
        },
    )
    return hf_cache, commit


@pytest.fixture
def hub_probe(tmp_path, encoder_cache) -> Path:
    """A probe on hf-hub:org/encoder-a features (Cholec80), with the results JSON of its run."""
    return make_probe(tmp_path / "probe", f"hf-hub:{ENCODER}", sha(ENCODER_BYTES))


def publish_to_cache(add, folder: Path, repo_id: str = "me/c80-phases") -> str:
    """The repo folder `push-to-hub --dry-run --out` writes, laid out as a cache entry; returns its commit."""
    files = {p.name: (lambda target, src=p: shutil.copyfile(src, target)) for p in folder.iterdir()}
    return add(repo_id, files)[1]


# ---------------------------------------------------------------------------------------------- pinning
def test_hub_backbone_is_pinned_to_the_cached_commit_holding_its_weights(hub_probe, encoder_cache) -> None:
    add, first = encoder_cache
    add(ENCODER, {"model.safetensors": lambda p: p.write_bytes(b"newer weights")})  # main moved on
    backbone = pin_backbone(load_probe(hub_probe))
    assert backbone.source == "hf-hub" and backbone.commit == first
    assert backbone.spec == f"hf-hub:{ENCODER}@{first}" and backbone.trained_spec == f"hf-hub:{ENCODER}"
    assert backbone.sha256 == sha(ENCODER_BYTES) and backbone.filename == "model.safetensors"
    assert backbone.license == "cc-by-nc-4.0" and backbone.base_model == ENCODER


def test_shipped_backbone_is_pinned_by_name_and_digest(tmp_path) -> None:
    weights = MODELS["plstitch-tiny-synthetic"].resolve_local_path() / "model.safetensors"
    folder = make_probe(tmp_path / "probe", "plstitch-tiny-synthetic", sha(weights.read_bytes()), "synthetic")
    backbone = pin_backbone(load_probe(folder))
    assert (backbone.source, backbone.spec, backbone.repo_id) == ("registry", "plstitch-tiny-synthetic", None)
    assert backbone.sha256 == sha(weights.read_bytes()) and backbone.license == "MIT"


def test_a_backbone_only_on_this_disk_is_refused(tmp_path) -> None:
    run = tmp_path / "runs" / "pl"
    folder = make_probe(tmp_path / "probe", str(run), "ab" * 32)
    with pytest.raises(ProbeError) as exc:
        pin_backbone(load_probe(folder))
    message = one_line_error(exc)
    assert f"backbone {run} exists only on this disk" in message
    assert "plstitch push-to-hub DIR --repo-id ORG/NAME" in message and "plstitch export RUN" in message


def test_an_uncached_or_other_hub_backbone_is_refused(tmp_path, hf_cache) -> None:  # noqa: F811
    folder = make_probe(tmp_path / "probe", f"hf-hub:{ENCODER}", sha(ENCODER_BYTES))
    with pytest.raises(ProbeError) as exc:
        pin_backbone(load_probe(folder))
    assert f"run `plstitch download hf-hub:{ENCODER}` first" in one_line_error(exc)
    hf_cache(ENCODER, {"model.safetensors": lambda p: p.write_bytes(b"other weights")})
    with pytest.raises(ProbeError) as exc:
        pin_backbone(load_probe(folder))
    message = one_line_error(exc)
    assert sha(ENCODER_BYTES) in message and sha(b"other weights") in message


# ---------------------------------------------------------------------------------------- repo and card
def test_dry_run_folder_holds_config_head_and_card(tmp_path, hub_probe, encoder_cache) -> None:
    _, commit = encoder_cache
    out = write_probe_repo(hub_probe, tmp_path / "repo", "me/c80-phases", results=results_for(hub_probe))
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "probe.safetensors"]
    assert (out / "probe.safetensors").read_bytes() == (hub_probe / "probe.safetensors").read_bytes()
    config = json.loads((out / "config.json").read_text())
    probe = load_probe(hub_probe)
    assert config["kind"] == "linear" and config["class_names"] == CLASS_NAMES and config["causal"] is True
    assert config["fps"] == probe.fps and config["preprocessing"] == probe.preprocessing
    assert config["black_margin"] is None  # whole frames: the rule recorded as "not cut"
    assert config["backbone"]["spec"] == config["encoder"]["spec"] == f"hf-hub:{ENCODER}@{commit}"
    assert config["backbone"]["sha256"] == sha(ENCODER_BYTES) and config["library_name"] == "plstitch"
    assert "store" not in config["source"]  # no path of the publisher's disk

    card = ModelCard.load(out / "README.md")
    assert card.data.base_model == ENCODER and card.data.library_name == "plstitch"
    assert card.data.pipeline_tag == "video-classification" and card.data.datasets == ["cholec80"]
    assert card.data.license == "cc-by-nc-sa-4.0"  # Cholec80's terms over the backbone's cc-by-nc-4.0
    recorded = {r.metric_type: r.metric_value for r in card.data.eval_results}
    assert recorded == {f"linear_{k}": v for k, v in METRICS.items() if k != "macro_f1_video"}
    assert {r.dataset_split for r in card.data.eval_results} == {"test"}
    for metric in ("accuracy", "macro_f1", "edit"):
        interval = mean_interval([scores[metric] for scores in PER_VIDEO.values()])
        assert f"[{interval['ci_low']:.2f}, {interval['ci_high']:.2f}] (3 videos)" in card.text
    assert "train 2 videos, test 3 videos (test: v1, v2, v3)" in card.text


def test_card_without_results_says_it_has_no_intervals(tmp_path, hub_probe) -> None:
    card = ModelCard.load(write_probe_repo(hub_probe, tmp_path / "repo", "me/x") / "README.md")
    assert "No per-video confidence intervals" in card.text and "95 % CI" not in card.text
    assert {r.metric_type: r.metric_value for r in card.data.eval_results} == {
        f"linear_{k}": v for k, v in METRICS.items()
    }


def test_results_kept_in_the_folder_are_found(tmp_path, hub_probe) -> None:
    shutil.copyfile(results_for(hub_probe), hub_probe / RESULTS_NAME)
    card = ModelCard.load(write_probe_repo(hub_probe, tmp_path / "repo", "me/x") / "README.md")
    assert "(3 videos)" in card.text


def test_results_of_another_run_are_refused(tmp_path, hub_probe) -> None:
    other = results_for(hub_probe, metrics={**METRICS, "accuracy": 99.0})
    with pytest.raises(ProbeError) as exc:
        write_probe_repo(hub_probe, tmp_path / "repo", "me/x", results=other)
    assert "accuracy is 99.0 but the probe records 61.0" in one_line_error(exc)
    assert not (tmp_path / "repo").exists()


def test_an_existing_out_folder_is_never_overwritten(tmp_path, hub_probe) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "keep.txt").write_text("mine")
    with pytest.raises(PublishError) as exc:
        write_probe_repo(hub_probe, tmp_path / "repo", "me/x")
    assert "exists and is not an empty folder" in one_line_error(exc)
    assert (tmp_path / "repo" / "keep.txt").read_text() == "mine"


def test_push_uploads_exactly_the_dry_run_folder(tmp_path, hub_probe, monkeypatch) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def upload_folder(self: HfApi, **kwargs: Any) -> str:
        root = Path(kwargs["folder_path"])
        calls.append(("upload_folder", {**kwargs, "sent": {p.name: p.read_bytes() for p in root.iterdir()}}))
        return "https://huggingface.co/me/x/commit/0123"

    monkeypatch.setattr(HfApi, "create_repo", lambda self, **kw: calls.append(("create_repo", kw)))
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    dry = write_probe_repo(hub_probe, tmp_path / "dry", "me/x")
    result = push_probe(hub_probe, "me/x", private=True)
    assert [name for name, _ in calls] == ["create_repo", "upload_folder"]
    assert calls[0][1]["private"] is True and result.commit_url.endswith("commit/0123")
    sent = calls[1][1]["sent"]
    assert sent == {p.name: p.read_bytes() for p in dry.iterdir()}
    assert sorted(calls[1][1]["allow_patterns"]) == sorted(sent)


# ------------------------------------------------------------------------------------------- use by name
def test_a_published_probe_loads_from_the_cache_as_its_folder(tmp_path, hub_probe, encoder_cache) -> None:
    add, encoder_commit = encoder_cache
    commit = publish_to_cache(add, write_probe_repo(hub_probe, tmp_path / "repo", "me/c80-phases"))
    features = np.random.default_rng(0).normal(size=(9, 6)).astype(np.float32)
    folder = load_probe(hub_probe)
    for name in ("hf-hub:me/c80-phases", f"hf-hub:me/c80-phases@{commit}"):
        probe = resolve_probe(name)
        np.testing.assert_array_equal(probe.probabilities(features), folder.probabilities(features))
        assert probe.encoder["spec"] == f"hf-hub:{ENCODER}@{encoder_commit}"
        assert probe.source["hub"] == f"hf-hub:me/c80-phases@{commit}"
    old = resolve_probe(hub_probe)  # a probe folder, as saved before probes were published, still loads
    np.testing.assert_array_equal(old.probabilities(features), folder.probabilities(features))


def test_a_tampered_backbone_is_refused_naming_both_digests(tmp_path, hub_probe, encoder_cache) -> None:
    add, encoder_commit = encoder_cache
    publish_to_cache(add, write_probe_repo(hub_probe, tmp_path / "repo", "me/c80-phases"))
    weights = add.cache_dir / "models--org--encoder-a" / "snapshots" / encoder_commit / "model.safetensors"
    weights.write_bytes(b"swapped weights")
    with pytest.raises(ProbeError) as exc:
        resolve_probe("hf-hub:me/c80-phases")
    message = one_line_error(exc)
    assert sha(b"swapped weights") in message and sha(ENCODER_BYTES) in message
    assert "plstitch download hf-hub:me/c80-phases" in message


def test_missing_cache_entries_name_the_download_command(tmp_path, hub_probe, encoder_cache) -> None:
    add, _ = encoder_cache
    with pytest.raises(ModelNotFoundError) as exc:
        resolve_probe("hf-hub:me/absent")
    assert "`plstitch download hf-hub:me/absent`" in one_line_error(exc)
    publish_to_cache(add, write_probe_repo(hub_probe, tmp_path / "repo", "me/c80-phases"))
    shutil.rmtree(add.cache_dir / "models--org--encoder-a")  # the head is cached, its backbone is not
    with pytest.raises(ModelNotFoundError) as exc:
        resolve_probe("hf-hub:me/c80-phases")
    assert "`plstitch download hf-hub:me/c80-phases`" in one_line_error(exc)


def test_download_and_listing_offline(tmp_path, hub_probe, encoder_cache) -> None:
    add, encoder_commit = encoder_cache
    commit = publish_to_cache(add, write_probe_repo(hub_probe, tmp_path / "repo", "me/c80-phases"))
    files = download_probe("hf-hub:me/c80-phases")
    names = {(f.repo_id, f.filename) for f in files}
    assert {("me/c80-phases", "config.json"), ("me/c80-phases", "probe.safetensors")} <= names
    assert {(ENCODER, "config.json"), (ENCODER, "model.safetensors")} <= names
    assert download_probe(f"hf-hub:{ENCODER}") is None  # an encoder's repo: not a probe
    [row] = cached_probes()
    assert row["probe"] == "hf-hub:me/c80-phases" and row["commit"] == commit and row["refs"] == ["main"]
    assert row["kind"] == "linear" and row["classes"] == CLASS_NAMES and row["backbone_cached"] is True
    assert row["backbone"] == f"hf-hub:{ENCODER}@{encoder_commit}" and row["metrics"]["accuracy"] == 61.0


def test_registry_hub_backbone_is_pinned_with_its_repo_and_commit(tmp_path, hf_cache, temp_entry) -> None:  # noqa: F811
    from plstitch_eval.hub.model_entry import ModelEntry

    temp_entry(ModelEntry(name="hub-ckpt-test", architecture="vit", feature_dim=6, converter="timm",
                          repo_id="org/ckpt", filename="ckpt.pth", license="CC-BY-NC-4.0"))  # fmt: skip
    _, commit = hf_cache("org/ckpt", {"ckpt.pth": lambda p: p.write_bytes(b"checkpoint")})
    backbone = pin_backbone(load_probe(make_probe(tmp_path / "probe", "hub-ckpt-test", sha(b"checkpoint"))))
    assert (backbone.source, backbone.spec, backbone.repo_id, backbone.commit) == (
        "registry",
        "hub-ckpt-test",
        "org/ckpt",
        commit,
    )
    assert backbone.license == "CC-BY-NC-4.0" and backbone.base_model == "org/ckpt"


def test_probes_lists_nothing_in_an_empty_cache(hf_cache) -> None:  # noqa: F811
    from typer.testing import CliRunner

    from plstitch_eval.cli import app

    result = CliRunner().invoke(app, ["probes", "--json", "-"])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    result = CliRunner().invoke(app, ["probes"])
    assert result.exit_code == 0 and "plstitch download hf-hub:ORG/NAME" in result.stderr


# ------------------------------------------------------------------------------------------------ offline
def _cli_error_line(args: list[str]) -> str:
    from typer.testing import CliRunner

    from plstitch_eval.cli import app

    result = CliRunner().invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_download_offline_of_an_uncached_repo_names_the_repo_not_its_config(tmp_path, hf_cache) -> None:  # noqa: F811
    """Issue 64: the fix is `plstitch download hf-hub:ORG/NAME`, as predict --probe says, never its
    config.json (a probe's record, not an encoder's weights)."""
    line = _cli_error_line(["download", "hf-hub:me/absent"])
    assert (
        line.startswith("error: hf-hub:me/absent is not in the Hugging Face cache ")
        and "HF_HUB_OFFLINE" in line
    )
    assert "with `plstitch download hf-hub:me/absent` on a machine with network" in line, line
    assert "config.json" not in line and "weights" not in line
    pinned = _cli_error_line(["download", "hf-hub:me/absent", "--revision", "v2"])
    assert "`plstitch download hf-hub:me/absent --revision v2`" in pinned
    video, out = str(tmp_path / "any.mp4"), str(tmp_path / "out")
    probe_line = _cli_error_line(["predict", "--probe", "hf-hub:me/absent", video, "--out", out])
    assert "`plstitch download hf-hub:me/absent`" in probe_line and "config.json" not in probe_line


def test_push_offline_names_the_users_probe_folder_not_a_staging_copy(hub_probe, monkeypatch) -> None:
    """Issue 64: the upload goes from a temporary folder written from the probe; the error names the probe."""
    monkeypatch.setenv("HF_TOKEN", "hf_x")  # HF_HUB_OFFLINE is on (hf_cache): the real client refuses
    line = _cli_error_line(["push-to-hub", str(hub_probe), "--repo-id", "me/x"])
    assert line.startswith(f"error: Cannot upload {hub_probe} to me/x@main: offline mode is on"), line
    assert "plstitch-probe-" not in line and "unset HF_HUB_OFFLINE" in line

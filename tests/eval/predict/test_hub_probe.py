"""A probe published with `plstitch push-to-hub PROBE_DIR --dry-run --out DIR`, laid out as a Hugging Face
cache entry, predicts by name (`--probe hf-hub:ORG/NAME`) exactly as its folder does, offline; `download` and
`probes` see it; a tampered backbone is refused in one line naming both digests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from plstitch_eval.hub.registry import MODELS
from plstitch_eval.hub.safe_load import sha256_file
from tests.eval.hub.conftest import hf_cache  # noqa: F401 (a fixture: an offline cache as HF_HUB_CACHE)
from tests.eval.predict.conftest import CPU, MODEL, VIDEO, edited_probe, invoke, one_error_line, video_file

VARYING = {"probe", "probe_folder", "out", "files", "wall_seconds"}  # which folder, where it wrote, how long


def publish(add, probe: Path, out: Path, repo_id: str, *extra: Any) -> str:
    """`push-to-hub --dry-run --out`, then the folder laid out as `models--ORG--NAME/snapshots/<commit>/`."""
    result = invoke("push-to-hub", probe, "--repo-id", repo_id, "--dry-run", "--out", out, *extra)
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["README.md", "config.json", "probe.safetensors"]
    assert all(name in result.stdout for name in names) and "nothing uploaded" in result.stderr
    files = {name: (lambda target, src=out / name: shutil.copyfile(src, target)) for name in names}
    return add(repo_id, files)[1]


def predict(probe: str | Path, video: Path, out: Path) -> tuple[bytes, dict[str, Any]]:
    """The CSV's bytes and the summary (less paths and timings) of `plstitch predict`."""
    result = invoke("predict", "--probe", probe, video, "--out", out, *CPU)
    assert result.exit_code == 0, result.output
    return (out / f"{VIDEO}.csv").read_bytes(), _without(json.loads(result.stdout), VARYING)


def _without(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def test_published_probe_predicts_as_its_folder(data, tmp_path, hf_cache) -> None:  # noqa: F811
    video = video_file(data)
    commit = publish(
        hf_cache, data["probe"], tmp_path / "repo", "me/c80-phases", "--results", data["results"]
    )
    card = (tmp_path / "repo" / "README.md").read_text()
    assert "library_name: plstitch" in card and "(2 videos)" in card  # intervals over the 2 test videos
    folder = predict(data["probe"], video, tmp_path / "runs" / "folder")
    assert predict("hf-hub:me/c80-phases", video, tmp_path / "runs" / "hub") == folder
    assert predict(f"hf-hub:me/c80-phases@{commit}", video, tmp_path / "runs" / "pinned") == folder

    listed = invoke("probes", "--json", "-")
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.stdout)
    assert (row["probe"], row["backbone"], row["backbone_cached"]) == ("hf-hub:me/c80-phases", MODEL, True)
    fetched = invoke("download", "hf-hub:me/c80-phases")
    assert fetched.exit_code == 0, fetched.output
    assert json.loads(fetched.stdout)["commit"] == commit


def test_hub_backbone_is_pinned_verified_and_refused_when_tampered(data, tmp_path, hf_cache) -> None:  # noqa: F811
    video = video_file(data)
    shipped = MODELS[MODEL].resolve_local_path()  # the tiny model, published as a timm repo org/tiny
    _, encoder_commit = hf_cache(
        "org/tiny", {p.name: (lambda t, s=p: shutil.copyfile(s, t)) for p in shipped.iterdir() if p.is_file()}
    )
    probe = edited_probe(data, tmp_path, lambda record: record["encoder"].update(spec="hf-hub:org/tiny"))
    publish(hf_cache, probe, tmp_path / "repo", "me/tiny-phases")
    config = json.loads((tmp_path / "repo" / "config.json").read_text())
    assert config["backbone"]["spec"] == f"hf-hub:org/tiny@{encoder_commit}"
    assert "base_model: org/tiny" in (tmp_path / "repo" / "README.md").read_text()

    # the same weights as the registry name's: the same rows; the summary names the pinned encoder
    folder_csv, folder_summary = predict(data["probe"], video, tmp_path / "runs" / "folder")
    hub_csv, hub_summary = predict("hf-hub:me/tiny-phases", video, tmp_path / "runs" / "hub")
    assert hub_csv == folder_csv and hub_summary.pop("encoder") == config["backbone"]["spec"]
    assert folder_summary.pop("encoder") == MODEL and hub_summary == folder_summary

    weights = hf_cache.cache_dir / "models--org--tiny" / "snapshots" / encoder_commit / "model.safetensors"
    pinned = sha256_file(weights)
    weights.write_bytes(weights.read_bytes()[:-4] + b"\0\0\0\0")
    result = invoke("predict", "--probe", "hf-hub:me/tiny-phases", video, "--out", tmp_path / "x", *CPU)
    line = one_error_line(result)
    assert (
        pinned in line and sha256_file(weights) in line and "plstitch download hf-hub:me/tiny-phases" in line
    )


def test_disk_only_backbone_is_refused_in_one_line(data, tmp_path) -> None:
    probe = edited_probe(data, tmp_path, lambda record: record["encoder"].update(spec=str(tmp_path / "run")))
    result = invoke("push-to-hub", probe, "--repo-id", "me/x", "--dry-run", "--out", tmp_path / "repo")
    assert "exists only on this disk" in one_error_line(result) and not (tmp_path / "repo").exists()


def test_model_folder_options_are_refused_for_a_model_folder(tmp_path) -> None:
    (tmp_path / "model").mkdir()
    result = invoke("push-to-hub", tmp_path / "model", "--repo-id", "me/x", "--out", tmp_path / "repo")
    assert "--out and --results go with a probe folder" in one_error_line(result)


def test_published_rsd_probe_predicts_minutes_and_its_card_names_the_task(data, tmp_path, hf_cache) -> None:  # noqa: F811
    from huggingface_hub import ModelCard

    from tests.eval.predict.conftest import read_csv

    probe, results = tmp_path / "rsd", tmp_path / "rsd.json"
    done = invoke(
        "temporal", "--features", data["store"], "--task", "rsd", "--causal", "--epochs", 2, "--stages", 2,
        "--layers", 2, "--device", "cpu", "--save", probe, "--json", results,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    publish(hf_cache, probe, tmp_path / "repo", "me/c80-rsd", "--results", results)
    config = json.loads((tmp_path / "repo" / "config.json").read_text())
    assert config["task"]["name"] == "rsd" and config["task"]["columns"] == ["remaining_min"]
    card = ModelCard.load(tmp_path / "repo" / "README.md")
    assert "remaining-surgery-duration" in card.data.tags and card.data.pipeline_tag is None
    recorded = {r.metric_name: r.metric_value for r in card.data.eval_results}
    measured = json.loads(results.read_text())["metrics"]
    assert recorded["MAE"] == round(measured["MAE"], 4) and "Test value (min)" in card.text
    assert "predicts the remaining surgery duration" in card.text and "| Task | rsd:" in card.text
    video = video_file(data)
    folder = predict(probe, video, tmp_path / "runs" / "folder")
    assert predict("hf-hub:me/c80-rsd", video, tmp_path / "runs" / "hub") == folder
    header, _ = read_csv(tmp_path / "runs" / "hub" / f"{VIDEO}.csv")
    assert header[2] == "remaining_min"

"""Published probes in use: `resolve_probe` (a folder or ``hf-hub:ORG/NAME[@REV]``), `download_probe` (the
head and its pinned backbone into the Hugging Face cache) and `cached_probes` (what `plstitch probes` lists).

Files come through `huggingface_hub`'s own cache code (`hf_hub_download`, `scan_cache_dir`), so everything
works offline (`HF_HUB_OFFLINE=1`) once downloaded; a missing entry names the `plstitch download` that
fetches it, and a backbone whose weights are not the pinned ones is refused (`verify_backbone`).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huggingface_hub
from huggingface_hub import constants as hf_constants
from huggingface_hub.errors import CacheNotFound

from plstitch_eval.errors import ConfigError, ModelNotFoundError
from plstitch_eval.hub.download import download_model, local_weights
from plstitch_eval.hub.hub_files import HubFile, fetch_file, is_cached
from plstitch_eval.hub.ranking_head import HEAD_CONFIG_FILE, HEAD_WEIGHTS_FILE
from plstitch_eval.hub.spec import HF_HUB_FORM, HF_HUB_PREFIX, parse_hf_spec
from plstitch_eval.probes.backbone import HF_HUB, Backbone, verify_backbone
from plstitch_eval.probes.folder import load_probe
from plstitch_eval.probes.onnx_files import ONNX_FILES, export_hint
from plstitch_eval.probes.probe import PROBE_SCHEMA, PROBE_WEIGHTS, Probe, ProbeError
from plstitch_eval.probes.publish import CARD_NAME, CONFIG_NAME

HEADLINE = ("accuracy", "macro_f1_video", "macro_f1_pooled", "edit", "f1@50")  # shown by `plstitch probes`


@dataclass(frozen=True)
class HubProbe:
    """A published probe found in the cache: `spec` as typed (``hf-hub:ORG/NAME[@REV]``), its snapshot
    folder and commit, and its pinned backbone."""

    spec: str
    repo_id: str
    commit: str | None
    folder: Path
    backbone: Backbone


def is_hub_probe(text: str | os.PathLike) -> bool:
    """True for an ``hf-hub:`` probe name (anything else is a probe folder)."""
    return str(text).startswith(HF_HUB_PREFIX)


def resolve_probe(text: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Probe:
    """The probe `text` names: a probe folder (`load_probe`), or ``hf-hub:ORG/NAME[@REV]`` from the Hugging
    Face cache (fetched when online), its backbone's weights checked against the pinned sha256."""
    if not is_hub_probe(text):
        return load_probe(text)
    found = fetch_hub_probe(str(text), cache_dir=cache_dir)
    verify_backbone(found.backbone, found.spec, cache_dir)
    probe = load_probe(found.folder, CONFIG_NAME)
    probe.source = {**probe.source, "hub": f"{HF_HUB_PREFIX}{found.repo_id}@{found.commit}"}
    return probe


def fetch_hub_export(probe: Probe, cache_dir: str | os.PathLike | None = None) -> list[HubFile]:
    """The ONNX files of a published probe, from the commit its head came from (fetched when online); one
    line when it was published without an export, or they are not cached offline."""
    spec = str(probe.source.get("hub"))
    repo_id, commit = _parse(spec, None)
    record = _probe_config(probe.folder / CONFIG_NAME) or {}
    if not record.get("onnx"):
        unpinned = spec.rsplit("@", 1)[0]
        raise ProbeError(
            f"{spec} was published without an ONNX export; {export_hint(unpinned)} (or publish an export "
            "folder: plstitch push-to-hub DIR)."
        )
    hint = f"`plstitch download {spec}`"
    return [
        fetch_file(repo_id, name, revision=commit, cache_dir=cache_dir, fix_hint=hint) for name in ONNX_FILES
    ]


def fetch_hub_probe(
    spec: str, *, revision: str | None = None, cache_dir: str | os.PathLike | None = None
) -> HubProbe:
    """The head of a published probe (config.json + probe.safetensors of one commit) from the cache, fetched
    when online; a repo that is no probe, or a malformed config, is one `ProbeError` line."""
    repo_id, revision = _parse(spec, revision)
    hint = f"`plstitch download {spec}`"
    fix = (
        f"fetch it and its backbone with {hint} on a machine with network (same cache dir), or pass a probe "
        "folder"
    )
    _refuse_uncached_offline(repo_id, revision, cache_dir, f"Probe {spec}", fix)
    config = fetch_file(repo_id, CONFIG_NAME, revision=revision, cache_dir=cache_dir, fix_hint=hint)
    record = _probe_config(config.path)
    if record is None:
        raise ProbeError(
            f"{spec} is not a plstitch probe (its {CONFIG_NAME} has no {PROBE_SCHEMA} record and backbone); "
            f"an encoder goes to --model, or `plstitch download {spec}`."
        )
    # the head of the very commit the config came from
    fetch_file(repo_id, PROBE_WEIGHTS, revision=config.commit or revision, cache_dir=cache_dir, fix_hint=hint)
    backbone = Backbone.from_dict(record.get("backbone"), str(config.path))
    if (record.get("encoder") or {}).get("spec") != backbone.spec:
        raise ProbeError(
            f"{config.path}: encoder.spec is not the pinned backbone {backbone.spec}; publish the probe "
            "again."
        )
    return HubProbe(spec, repo_id, config.commit, config.path.parent, backbone)


def _refuse_uncached_offline(
    repo_id: str, revision: str | None, cache_dir: str | os.PathLike | None, what: str, fix: str
) -> None:
    """One `ModelNotFoundError` line when HF_HUB_OFFLINE is set and the repo's config.json is not cached:
    `what` is not in the cache, then `fix` (the `plstitch download` that fetches it)."""
    if hf_constants.is_offline_mode() and not is_cached(
        repo_id, CONFIG_NAME, revision=revision, cache_dir=cache_dir
    ):
        raise ModelNotFoundError(
            f"{what} is not in the Hugging Face cache {cache_dir or hf_constants.HF_HUB_CACHE} and "
            f"HF_HUB_OFFLINE is set; {fix}."
        )


def download_probe(
    spec: str, *, revision: str | None = None, cache_dir: str | os.PathLike | None = None
) -> list[HubFile] | None:
    """Fetch a published probe - its head, card and pinned backbone - into the cache and verify the backbone;
    None when `spec` names a file or its repo is not a probe (an encoder: `hub.download.download_model`)."""
    if parse_hf_spec(spec)[1] is not None:
        return None
    repo_id, revision = _parse(spec, revision)
    pinned = "" if revision is None or "@" in spec else f" --revision {revision}"
    hint = f"`plstitch download {spec}{pinned}`"  # not its config.json: that file is no model's weights
    fix = (
        f"fetch it (a published probe and its backbone, or an encoder) with {hint} on a machine with network "
        "and HF_HUB_OFFLINE unset (same cache dir)"
    )
    _refuse_uncached_offline(repo_id, revision, cache_dir, spec, fix)
    config = fetch_file(repo_id, CONFIG_NAME, revision=revision, cache_dir=cache_dir, fix_hint=hint)
    if _probe_config(config.path) is None:
        return None
    found = fetch_hub_probe(f"{HF_HUB_PREFIX}{repo_id}", revision=config.commit, cache_dir=cache_dir)
    files = [config, fetch_file(repo_id, PROBE_WEIGHTS, revision=config.commit, cache_dir=cache_dir)]
    with contextlib.suppress(ModelNotFoundError):  # the card is for people; the probe works without it
        files.append(fetch_file(repo_id, CARD_NAME, revision=config.commit, cache_dir=cache_dir))
    if (_probe_config(config.path) or {}).get("onnx"):  # published with its ONNX export
        files += [fetch_file(repo_id, n, revision=config.commit, cache_dir=cache_dir) for n in ONNX_FILES]
    backbone = found.backbone
    if local_weights(backbone.spec) is None and backbone.sha256 is not None:
        # an hf-hub backbone at its pinned commit; a registry one as `load_encoder` will read it (main)
        files += download_model(backbone.spec, cache_dir=cache_dir)
    if backbone.source == HF_HUB and parse_hf_spec(backbone.spec)[1] is None:  # a timm repo's ranking head
        for name in (HEAD_CONFIG_FILE, HEAD_WEIGHTS_FILE):  # (predict's progression column), if it has one
            with contextlib.suppress(ModelNotFoundError):
                files.append(
                    fetch_file(str(backbone.repo_id), name, revision=backbone.commit, cache_dir=cache_dir)
                )
    verify_backbone(backbone, spec, cache_dir)
    return files


def cached_probes(cache_dir: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Every published probe in the Hugging Face cache, one row per cached commit: name, refs, kind,
    classes, dataset, backbone (and whether its weights are cached), headline metrics. Nothing is fetched."""
    try:
        info = huggingface_hub.scan_cache_dir(cache_dir or hf_constants.HF_HUB_CACHE)
    except CacheNotFound:
        return []
    rows = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        for revision in sorted(repo.revisions, key=lambda r: r.commit_hash):
            record = _probe_config(revision.snapshot_path / CONFIG_NAME)
            if record is None or not (revision.snapshot_path / PROBE_WEIGHTS).is_file():
                continue
            rows.append(_row(repo.repo_id, revision.commit_hash, sorted(revision.refs), record, cache_dir))
    return rows


def _row(
    repo_id: str, commit: str, refs: list[str], record: dict[str, Any], cache_dir: str | os.PathLike | None
) -> dict[str, Any]:
    backbone = record.get("backbone") or {}
    metrics = record.get("metrics") or {}
    return {
        "probe": f"{HF_HUB_PREFIX}{repo_id}",
        "commit": commit,
        "refs": refs,
        "kind": record.get("kind"),
        "onnx": bool(record.get("onnx")),
        "classes": record.get("class_names"),
        "dataset": record.get("dataset"),
        "fps": record.get("fps"),
        "causal": record.get("causal"),
        "backbone": backbone.get("spec"),
        "backbone_sha256": backbone.get("sha256"),
        "backbone_cached": _backbone_cached(backbone, cache_dir),
        "license": record.get("license"),
        "metrics": {k: metrics[k] for k in HEADLINE if isinstance(metrics.get(k), int | float)},
    }


def _backbone_cached(backbone: dict[str, Any], cache_dir: str | os.PathLike | None) -> bool:
    """Whether the backbone's weights are on this machine (no digest computed: `download` verifies)."""
    if backbone.get("sha256") is None:
        return True
    try:
        if local_weights(str(backbone.get("spec"))) is not None:
            return True
    except ConfigError:
        return False
    repo_id, filename = backbone.get("repo_id"), backbone.get("filename")
    if not repo_id or not filename:
        return False
    revision = backbone.get("commit") if backbone.get("source") == HF_HUB else None
    found = huggingface_hub.try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision)
    return isinstance(found, str)


def _probe_config(path: Path) -> dict[str, Any] | None:
    """A published probe's config.json as a dict, None for any other file (a timm config, unreadable)."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if isinstance(record, dict) and record.get("schema") == PROBE_SCHEMA and "backbone" in record:
        return record
    return None


def _parse(spec: str, revision: str | None) -> tuple[str, str | None]:
    """(repo_id, revision) of ``hf-hub:ORG/NAME[@REV]``; a file path or two revisions are refused."""
    repo_id, filename, spec_revision = parse_hf_spec(spec)
    if filename is not None:
        raise ConfigError(
            f"Probe {spec!r} names a file; a published probe is a whole repo: {HF_HUB_FORM}[@REV]."
        )
    if revision and spec_revision and revision != spec_revision:
        raise ConfigError(
            f"Probe {spec!r} names revision {spec_revision!r}; --revision {revision!r} differs."
        )
    return repo_id, revision or spec_revision

"""The backbone of a published probe: pinned when the probe is published (a Hub repo at a commit, or a
registry model by name, with the sha256 of its weights), then found and verified where the probe is used.

Why: a probe is only right on the very weights its features came from; a Hub name alone may move (a new
commit) and a file may be swapped, so the pin names the commit and the weights' digest, and both are checked
before the encoder runs. A backbone that exists only on this disk cannot be pinned: it is refused.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import huggingface_hub
import yaml
from huggingface_hub import ModelCard
from huggingface_hub import constants as hf_constants
from huggingface_hub.file_download import repo_folder_name

from plstitch_eval.errors import ModelNotFoundError
from plstitch_eval.hub.hub_files import commit_of, fetch_file
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.hub.run_folder import resolve_backbone_dir
from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.hub.spec import HF_HUB_PREFIX, parse_spec
from plstitch_eval.hub.timm_format import WEIGHTS_NAME
from plstitch_eval.probes.probe import Probe, ProbeError

REGISTRY, HF_HUB = "registry", "hf-hub"
PUBLISH_FIRST = (
    "publish it first (`plstitch export RUN --out DIR`, then `plstitch push-to-hub DIR --repo-id ORG/NAME`), "
    "extract features with hf-hub:ORG/NAME and save the probe again"
)


@dataclass(frozen=True)
class Backbone:
    """A pinned backbone: `spec` is what `load_encoder` is given where the probe is used (a registry name,
    or ``hf-hub:ORG/NAME@COMMIT[/FILE]``); `trained_spec` is the spec the probe's features were made with."""

    source: str  # "registry" or "hf-hub"
    spec: str
    trained_spec: str
    sha256: str | None  # of the weights file; None: a registry encoder built in code (no weights)
    repo_id: str | None = None
    filename: str | None = None
    commit: str | None = None
    license: str = "unknown"
    license_source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: Any, where: str) -> Backbone:
        """The `backbone` block of a published probe's config.json; one line naming the key when malformed."""
        if not isinstance(record, dict) or record.get("source") not in (REGISTRY, HF_HUB):
            raise ProbeError(
                f"{where}: 'backbone' must be an object with source 'registry' or 'hf-hub'; publish the "
                "probe again with `plstitch push-to-hub PROBE_DIR --repo-id ORG/NAME`."
            )
        for key in ("spec", "trained_spec"):
            if not isinstance(record.get(key), str):
                raise ProbeError(f"{where}: backbone.{key} must be a string; publish the probe again.")
        if record["source"] == HF_HUB and not all(
            isinstance(record.get(k), str) for k in ("repo_id", "filename", "commit", "sha256")
        ):
            raise ProbeError(
                f"{where}: an hf-hub backbone needs repo_id, filename, commit and sha256; publish the "
                "probe again."
            )
        known = {k: record[k] for k in cls.__dataclass_fields__ if k in record}
        return cls(**known)

    @property
    def base_model(self) -> str | None:
        """The Hub repo the backbone's weights come from (the card's `base_model`), if any."""
        return self.repo_id


# --------------------------------------------------------------------------------------------------- pin
def pin_backbone(probe: Probe, cache_dir: str | Path | None = None) -> Backbone:
    """Pin the backbone `probe` was trained on, from what is on this machine (the HF cache or the package).

    Refused (`ProbeError`, one line): no recorded spec or weights digest, a random-init or disk-only
    backbone, a Hub backbone not in the cache, or cached weights whose sha256 is not the probe's.
    """
    where = f"probe {probe.folder}"
    spec, want = probe.encoder.get("spec"), probe.encoder.get("weights_sha256")
    if not spec:
        raise ProbeError(f"{where} records no encoder spec; save it again from a feature store.")
    parsed = parse_spec(spec)
    if parsed.kind == "random-init":
        raise ProbeError(
            f"{where} was trained on a randomly initialised {spec}: a reference baseline, not a backbone "
            "to publish; save a probe on a pretrained encoder."
        )
    if parsed.kind == "path":
        raise ProbeError(f"{where}: its backbone {spec} exists only on this disk; {PUBLISH_FIRST}.")
    if parsed.kind == REGISTRY and not parsed.entry.has_weights:
        entry = parsed.entry
        return Backbone(
            REGISTRY, spec, spec, None, license=entry.license, license_source=entry.license_source
        )
    if not want:
        raise ProbeError(
            f"{where} does not record the sha256 of its backbone's weights, so a pin could name other "
            "weights; extract the features again and save the probe again."
        )
    if parsed.kind == REGISTRY:
        return _pin_registry(parsed.entry, want, where, cache_dir)
    repo_id, filename = str(parsed.repo_id), parsed.filename or WEIGHTS_NAME
    commit = _cached_commit(repo_id, filename, want, parsed.revision, spec, where, cache_dir)
    pinned = f"{HF_HUB_PREFIX}{repo_id}@{commit}" + (f"/{parsed.filename}" if parsed.filename else "")
    licence, source = _hub_licence(repo_id, commit, cache_dir)
    return Backbone(HF_HUB, pinned, spec, want, repo_id, filename, commit, licence, source)


def _pin_registry(entry: ModelEntry, want: str, where: str, cache_dir: str | Path | None) -> Backbone:
    """A registry model by name and digest; its Hub repo and commit too when its weights come from the Hub."""
    local = entry.resolve_local_path()
    if local is not None and local.exists():
        got = sha256_file(_weights_file(local))
        if got != want:
            raise ProbeError(
                f"{where} was trained on {entry.name} weights with sha256 {want}, but {local} has sha256 "
                f"{got}; point the model at the weights the probe was trained on, or save the probe again."
            )
        return Backbone(
            REGISTRY, entry.name, entry.name, want, license=entry.license, license_source=entry.license_source
        )
    if entry.repo_id is None:
        fix = f"set ${entry.path_env} to them" if entry.path_env else "restore them"
        raise ProbeError(
            f"{where}: the weights of its backbone {entry.name} are not on this machine ({local}); {fix} "
            "and publish again."
        )
    filenames = entry.filenames if entry.filename else (WEIGHTS_NAME,)
    for filename in filenames:
        if _snapshots(entry.repo_id, filename, cache_dir):
            # main only: `load_encoder(name)` reads the cache's main, where the probe is used too
            commit = _cached_commit(entry.repo_id, filename, want, None, entry.name, where, cache_dir, False)
            return Backbone(
                REGISTRY,
                entry.name,
                entry.name,
                want,
                entry.repo_id,
                filename,
                commit,
                entry.license,
                entry.license_source,
            )
    raise ProbeError(
        f"{where}: its backbone {entry.name} is not in the Hugging Face cache; run "
        f"`plstitch download {entry.name}` first, then publish again."
    )


def _weights_file(path: Path) -> Path:
    """The weights file a local model path names: the file, or a timm folder's (a run's backbone's)."""
    if not path.is_dir():
        return path
    folder = resolve_backbone_dir(path) or path
    return folder / WEIGHTS_NAME


def _snapshots(repo_id: str, filename: str, cache_dir: str | Path | None) -> list[Path]:
    """`filename` in every cached snapshot of `repo_id` (newest first)."""
    root = Path(cache_dir or hf_constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")
    found = [p for p in (root / "snapshots").glob(f"*/{filename}") if p.is_file()]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def _cached_commit(
    repo_id: str,
    filename: str,
    want: str,
    revision: str | None,
    spec: str,
    where: str,
    cache_dir: str | Path | None,
    any_commit: bool = True,
) -> str:
    """The commit of the cached snapshot whose `filename` has sha256 `want`: the spec's revision (main
    without one), then, with `any_commit`, every other cached commit."""
    first = huggingface_hub.try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir, revision=revision)
    candidates = [Path(first)] if isinstance(first, str) else []
    if any_commit:
        candidates += [p for p in _snapshots(repo_id, filename, cache_dir) if p not in candidates]
    if not candidates:
        raise ProbeError(
            f"{where}: its backbone {spec} is not in the Hugging Face cache, so its commit cannot be pinned; "
            f"run `plstitch download {spec}` first, then publish again."
        )
    seen = {}
    for path in candidates:
        seen[path] = sha256_file(path)
        if seen[path] == want:
            return commit_of(path, filename) or path.parent.name
    raise ProbeError(
        f"{where} was trained on {spec} weights with sha256 {want}, but no cached commit of {repo_id} holds "
        f"them ({filename}: {', '.join(sorted(set(seen.values())))}); download the revision the probe was "
        f"trained on (`plstitch download {spec} --revision REV`), or save the probe again."
    )


def _hub_licence(repo_id: str, commit: str, cache_dir: str | Path | None) -> tuple[str, str]:
    """A Hub backbone's licence: the registry's word for that repo, else its cached model card's metadata."""
    entry = next((e for e in MODELS.values() if e.repo_id == repo_id), None)
    if entry is not None:
        return entry.license, entry.license_source or f"plstitch registry entry {entry.name}"
    card = huggingface_hub.try_to_load_from_cache(repo_id, "README.md", cache_dir=cache_dir, revision=commit)
    if isinstance(card, str):
        try:
            licence = ModelCard.load(card).data.license
        except (ValueError, TypeError, OSError, yaml.YAMLError):  # an unparsable card states nothing
            licence = None
        if licence:
            return str(licence), f"the model card of {repo_id} at {commit[:12]}"
    return "unknown", f"{repo_id} states no licence in its cached model card"


# ----------------------------------------------------------------------------------------------- verify
def verify_backbone(backbone: Backbone, probe_name: str, cache_dir: str | Path | None = None) -> Path | None:
    """The backbone's weights on this machine, checked against the pinned sha256 (None: no weights).

    Fetched through the HF cache when missing (offline: `ModelNotFoundError` naming the `plstitch download`
    that fetches it); weights with another sha256 are a `ProbeError` naming both digests.
    """
    if backbone.sha256 is None:
        return None
    hint = f"`plstitch download {probe_name}`"
    path = _local_weights(backbone, hint, cache_dir)
    got = sha256_file(path)
    if got != backbone.sha256:
        raise ProbeError(
            f"backbone {backbone.spec} of probe {probe_name}: {path} has sha256 {got}, but the probe pins "
            f"sha256 {backbone.sha256}; these are other weights: delete the file and run {hint} again."
        )
    return path


def _local_weights(backbone: Backbone, hint: str, cache_dir: str | Path | None) -> Path:
    entry = MODELS.get(backbone.spec) if backbone.source == REGISTRY else None
    local = entry.resolve_local_path() if entry is not None else None
    if local is not None and (local.exists() or backbone.repo_id is None):
        if not local.exists():
            raise ModelNotFoundError(
                f"backbone {backbone.spec}: its weights should be at {local}, which does not exist; restore "
                "them (a shipped model: reinstall plstitch)."
            )
        return _weights_file(local)
    if backbone.repo_id is None or backbone.filename is None:
        raise ModelNotFoundError(
            f"backbone {backbone.spec} is not a model this plstitch knows; install the package that "
            "registers it (`plstitch models`)."
        )
    return fetch_file(
        backbone.repo_id, backbone.filename, revision=backbone.commit, cache_dir=cache_dir, fix_hint=hint
    ).path

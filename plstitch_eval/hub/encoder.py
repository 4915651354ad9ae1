"""`load_encoder(spec)` -> a frozen `Encoder`: CLS features, eval preprocessing and provenance together.

Image encoders give one feature per frame; clip encoders (VideoMAE V2, Endo-FM's TimeSformer, V-JEPA 2) one
feature per window of frames around a sampled frame, the window described by `Encoder.clip`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from plstitch_eval.data.video import ClipSampling
from plstitch_eval.errors import ConfigError, ModelNotFoundError
from plstitch_eval.hub import timm_format
from plstitch_eval.hub.converters import CLIP_DEFAULTS as CLIP_DEFAULTS  # its old home
from plstitch_eval.hub.converters import get_loader, sniff_converter
from plstitch_eval.hub.hub_files import HubFile, fetch_file, fetch_first
from plstitch_eval.hub.random_init import build_random_init
from plstitch_eval.hub.registry import MODELS, ModelEntry, did_you_mean
from plstitch_eval.hub.run_folder import BACKBONE_DIR, checkpoint_path, is_run_dir, resolve_backbone_dir
from plstitch_eval.hub.safe_load import CHECKPOINT_SUFFIXES, load_checkpoint, sha256_file
from plstitch_eval.hub.spec import HF_HUB_FILE_FORM, RANDOM_INIT_FORM, hub_spec, parse_spec
from plstitch_eval.preprocess import DataConfig, EvalTransform, preprocess_batch
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.device import resolve_device

WHICH = ("teacher", "student")  # the two networks of a self-distillation training checkpoint


class _Loaded(NamedTuple):
    """What a source gives: the module, its eval preprocessing, provenance, and a clip encoder's window."""

    model: nn.Module
    data_config: DataConfig
    provenance: dict[str, Any]
    clip: ClipSampling | None = None


class Encoder(nn.Module):
    """A frozen encoder in eval mode: `forward(x[B,3,H,W]) -> [B,D]` (ViTs: CLS after the final norm), or
    for a clip encoder (`.clip` set) `forward(x[B,T,3,H,W]) -> [B,D]`, one feature per window of T frames.

    Holds the module (`.model`), its eval preprocessing (`.data_config`, applied to every frame; `.transform`
    and `.preprocess_batch` from `plstitch_eval.preprocess`), a clip encoder's window around each sampled
    frame (`.clip`, None for image encoders) and where the weights came from (`.provenance`).
    """

    def __init__(
        self,
        model: nn.Module,
        data_config: DataConfig,
        provenance: dict[str, Any],
        clip: ClipSampling | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.data_config = data_config
        self.clip = clip
        self.provenance = dict(provenance)
        if clip is not None:
            self.provenance["clip"] = clip.to_dict()
        self.transform = EvalTransform(data_config)
        self.feature_dim = int(model.num_features)
        self.is_vit = clip is None and getattr(model, "cls_token", None) is not None
        patch = getattr(getattr(model, "patch_embed", None), "patch_size", None)
        self.patch_size = int(patch[0]) if patch is not None and self.is_vit else None
        self.requires_grad_(False)
        self.eval()

    @property
    def device(self) -> torch.device:
        """Device of the weights (of the buffers for a parameter-free model such as raw-pixels; else CPU)."""
        for tensor in (*self.model.parameters(), *self.model.buffers()):
            return tensor.device
        return torch.device("cpu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Frame features [B, D]: CLS token after the final LayerNorm (ViT), else pooled + normed features;
        a clip encoder takes windows [B, T, 3, H, W] (see `forward_clips`)."""
        if self.clip is not None:
            return self.forward_clips(x)
        features = self.model.forward_features(x)
        if self.is_vit:
            return features[:, 0]
        return self.model.forward_head(features, pre_logits=True)

    def forward_clips(self, clips: torch.Tensor) -> torch.Tensor:
        """Window features [B, D] of normalised windows [B, T, 3, H, W] (oldest frame first, T = clip length).

        The upstream modules take [B, 3, T, H, W]; the window layout here is the stack of preprocessed frames.
        """
        if self.clip is None:
            raise ConfigError(f"{self.provenance.get('spec')} is an image encoder: pass frames [B, 3, H, W].")
        if clips.ndim != 5 or clips.shape[1] != self.clip.num_frames or clips.shape[2] != 3:
            raise ConfigError(
                f"{self.provenance.get('spec')} is a clip encoder: pass windows "
                f"[B, {self.clip.num_frames}, 3, H, W] of preprocessed frames (Encoder.clip says which), "
                f"got {tuple(clips.shape)}."
            )
        return self.model(clips.transpose(1, 2))

    def forward_tokens(self, x: torch.Tensor) -> torch.Tensor:
        """All tokens after the final norm [B, 1+N, D] (CLS, then patches in raster order); ViTs only."""
        if not self.is_vit:
            raise ConfigError(f"forward_tokens needs a ViT; {self.provenance.get('spec')} is not one.")
        return self.model.forward_features(x)

    def preprocess_batch(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 [B,H,W,3] or [B,3,H,W] -> normalised float [B,3,h,w] on this encoder's device (fast path)."""
        return preprocess_batch(images, self.data_config, self.device)

    def extra_repr(self) -> str:
        return f"feature_dim={self.feature_dim}, spec={self.provenance.get('spec')!r}"


def load_encoder(
    spec: str | Path,
    *,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    device: str | torch.device = "cpu",
    which: str = "teacher",
    trust_pickle: bool = False,
    transform: str | None = None,
) -> Encoder:
    """Load a frozen encoder: registry name, `hf-hub:ORG/NAME[/FILE]`, timm folder, run dir or checkpoint;
    `random-init:SPEC` is a timm-format SPEC's architecture with fresh weights (seed 0, `hub.random_init`).

    Every backbone tensor is loaded or it raises (`CheckpointError`); pickles load with `weights_only=True`
    unless `trust_pickle`; offline, only the HF cache is used (`ModelNotFoundError` names the fix).
    `which` picks a training checkpoint's teacher or student; `transform` (`whole-frame`, `center-crop`)
    overrides the model's own eval transform (recorded in the provenance and every feature store).
    """
    if which not in WHICH:
        raise ConfigError(f"which must be one of {', '.join(WHICH)}, got {which!r}.")
    model, data_config, provenance, clip = _build(str(spec), revision, cache_dir, which, trust_pickle)
    if transform is not None:
        data_config = data_config.with_transform(transform)
        provenance = {**provenance, "transform": transform}
    encoder = Encoder(model, data_config, provenance, clip)
    logger.debug("Loaded encoder %s: %s", spec, provenance)
    return encoder.to(resolve_device(device))


def _build(
    spec: str, revision: str | None, cache_dir: str | Path | None, which: str, trust_pickle: bool
) -> _Loaded:
    parsed = parse_spec(spec)
    if parsed.kind == "random-init" and parsed.source is not None:
        return _Loaded(*build_random_init(parsed.source.text, revision=revision, cache_dir=cache_dir))
    if parsed.kind == "registry":
        return _build_entry(parsed.entry, revision, cache_dir, which, trust_pickle)
    if parsed.kind == "hf-hub" and parsed.repo_id is not None:
        revision = revision or parsed.revision
        if parsed.filename is None:
            return _from_hub_timm(spec, parsed.repo_id, revision, cache_dir, None, {})
        hub_file = fetch_file(parsed.repo_id, parsed.filename, revision=revision, cache_dir=cache_dir)
        return _from_checkpoint(spec, hub_file.path, which, trust_pickle, None, hub_file)
    if parsed.path.exists():
        return _from_path(spec, parsed.path, which, trust_pickle, None)
    raise ModelNotFoundError(
        f"{spec!r} is neither a registry model, an {HF_HUB_FILE_FORM} spec, a {RANDOM_INIT_FORM}, nor an "
        "existing path."
        f"{did_you_mean(spec)} Run `plstitch models` for the list ({', '.join(sorted(MODELS))})."
    )


def _build_entry(
    entry: ModelEntry, revision: str | None, cache_dir: str | Path | None, which: str, trust_pickle: bool
) -> _Loaded:
    if not entry.has_weights:  # built in code: its converter needs no checkpoint
        converted = get_loader(entry.converter)(None, entry, which, entry.name)
        return _Loaded(converted.model, converted.data_config, _no_weights_provenance(entry.name))
    local = entry.resolve_local_path()
    if local is not None:
        if not local.exists():
            raise ModelNotFoundError(f"Model {entry.name!r} points at {local}, which does not exist.")
        return _from_path(entry.name, local, which, trust_pickle, entry)
    if entry.repo_id is None:
        hint = f" or set ${entry.path_env}" if entry.path_env else ""
        raise ModelNotFoundError(
            f"Model {entry.name!r} is not on the Hub: pass the path of its checkpoint to load_encoder{hint}."
        )
    if entry.filename is None:
        return _from_hub_timm(entry.name, entry.repo_id, revision, cache_dir, entry, entry.model_args)
    hub_file = fetch_first(
        entry.repo_id,
        entry.filenames,
        revision=revision,
        cache_dir=cache_dir,
        fix_hint=f"`plstitch download {entry.name}`",
    )
    return _from_checkpoint(entry.name, hub_file.path, which, trust_pickle, entry, hub_file)


def _from_hub_timm(
    spec: str,
    repo_id: str,
    revision: str | None,
    cache_dir: str | Path | None,
    entry: ModelEntry | None,
    model_args: dict[str, Any],
) -> _Loaded:
    hint = f"`plstitch download {entry.name if entry else hub_spec(repo_id)}`"
    config = fetch_file(
        repo_id, timm_format.CONFIG_NAME, revision=revision, cache_dir=cache_dir, fix_hint=hint
    )
    weights = fetch_file(
        repo_id, timm_format.WEIGHTS_NAME, revision=revision, cache_dir=cache_dir, fix_hint=hint
    )
    model, data_config = timm_format.load_timm_dir(config.path.parent, **model_args)
    if entry is not None and entry.data_config is not None:
        data_config = entry.data_config
    return _Loaded(model, data_config, _provenance(spec, weights.path, weights))


def _from_path(spec: str, path: Path, which: str, trust_pickle: bool, entry: ModelEntry | None) -> _Loaded:
    if path.is_dir():
        folder = resolve_backbone_dir(path)
        if folder is None and is_run_dir(path):
            raise ModelNotFoundError(
                f"{path} is an unfinished training run (no {BACKBONE_DIR}/ yet): rerun its `plstitch train` "
                f"command to finish it, or `plstitch export {checkpoint_path(path)} --out DIR` and load DIR."
            )
        if folder is None:
            raise ModelNotFoundError(
                f"{path} is a folder without {timm_format.CONFIG_NAME} + {timm_format.WEIGHTS_NAME} "
                f"(timm format) or {BACKBONE_DIR}/ (training run); pass the checkpoint file instead."
            )
        if which != "teacher":
            raise ConfigError(
                f"{folder} is a timm-format folder holding one network (the exported teacher); --which "
                f"{which} needs a training checkpoint file that has one (e.g. the authors' pl_*.pth)."
            )
        model, data_config = timm_format.load_timm_dir(folder, **(entry.model_args if entry else {}))
        return _Loaded(model, data_config, _provenance(spec, folder / timm_format.WEIGHTS_NAME, None))
    if path.suffix not in CHECKPOINT_SUFFIXES:
        raise ConfigError(
            f"{path}: unknown checkpoint type; expected one of {', '.join(CHECKPOINT_SUFFIXES)}."
        )
    return _from_checkpoint(spec, path, which, trust_pickle, entry, None)


def _from_checkpoint(
    spec: str, path: Path, which: str, trust_pickle: bool, entry: ModelEntry | None, hub_file: HubFile | None
) -> _Loaded:
    """A checkpoint file through its converter: the entry's tag, or what a bare checkpoint's keys say."""
    checkpoint = load_checkpoint(path, trust_pickle=trust_pickle)
    converter = entry.converter if entry is not None else sniff_converter(checkpoint, which)
    converted = get_loader(converter)(checkpoint, entry, which, str(path))
    provenance = _provenance(spec, path, hub_file)
    provenance["which"] = which
    provenance["dropped_keys"] = len(converted.dropped)
    return _Loaded(converted.model, converted.data_config, provenance, converted.clip)


def _no_weights_provenance(spec: str) -> dict[str, Any]:
    """Provenance of an encoder built in code: nothing was loaded from anywhere."""
    keys = ("repo_id", "filename", "revision", "commit", "sha256", "path")
    return {"spec": spec, **dict.fromkeys(keys)}


def _provenance(spec: str, weights: Path, hub_file: HubFile | None) -> dict[str, Any]:
    return {
        "spec": spec,
        "repo_id": hub_file.repo_id if hub_file else None,
        "filename": hub_file.filename if hub_file else weights.name,
        "revision": hub_file.revision if hub_file else None,
        "commit": hub_file.commit if hub_file else None,
        "sha256": sha256_file(weights),
        "path": str(weights.resolve()),
    }

"""PL-Stitch's frame-ranking head `h_vid` (the paper's "temporal head": one Plackett-Luce ranking score per
frame): the module, its storage, and loading it.

Named apart from the MS-TCN of the temporal protocol (`plstitch_eval.temporal`, `protocols/temporal.py`), a
probe trained on frozen features; this head is part of the pretrained model. The file names on disk
(`temporal_head.safetensors` / `.json`) and the class names keep the paper's word. Old import path:
`plstitch_eval.hub.temporal_head`.

Lives in `plstitch_eval` so that evaluation (progression scores) can load a trained head without
`plstitch_train`. Parameter names equal the authors' (`reduce.0.*`, `temporal.enc.layers.{i}.*`,
`scorer.{0,2}.*`), so the `temporal_head` state dict of a released `pl_*.pth` loads strictly once the DDP
`module.` prefix is removed. `load_temporal_head(spec)` takes every spec `load_encoder` takes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import torch
from safetensors.torch import save_file
from torch import Tensor, nn

from plstitch_eval.errors import CheckpointError, ConfigError, ModelNotFoundError
from plstitch_eval.hub.hub_files import fetch_file
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME as RUN_CHECKPOINT
from plstitch_eval.hub.run_folder import backbone_dir
from plstitch_eval.hub.safe_load import load_checkpoint, load_safetensors_file
from plstitch_eval.hub.spec import HF_HUB_FILE_FORM, parse_spec
from plstitch_eval.utils.io import atomic_path, write_json_atomic

ModuleT = TypeVar("ModuleT", bound=nn.Module)

__all__ = [
    "AUTHORS_TEMPORAL_HEADS",
    "HEAD_CONFIG_FILE",
    "HEAD_WEIGHTS_FILE",
    "TemporalHead",
    "TemporalTrunk",
    "check_state_dict",
    "head_state_from_checkpoint",
    "load_checked",
    "load_temporal_head",
    "resolve_head_source",
    "save_temporal_head",
    "sized_from_shapes",
    "strip_wrappers",
    "temporal_head_from_state_dict",
    "temporal_trunk",
]

HEAD_WEIGHTS_FILE = "temporal_head.safetensors"
HEAD_CONFIG_FILE = "temporal_head.json"
AUTHORS_TEMPORAL_HEADS = 8  # the authors' TemporalSideContext uses nhead=8 whatever the width
OFFICIAL_KEY = "temporal_head"  # entry of a released pl_*.pth
_WRAPPER_PREFIXES = ("module.", "_orig_mod.")
# names before the head followed the authors' (files written then still load)
_LEGACY_PREFIXES = (("input_proj.", "reduce."), ("encoder.", "temporal.enc."))


class TemporalEncoder(nn.Module):
    """The authors' `TemporalSideContext`: a post-norm ReLU `nn.TransformerEncoder` under the name `enc`."""

    def __init__(self, dim: int, n_layers: int, n_heads: int, ff_dim: int, dropout: float) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model=dim, nhead=n_heads, dim_feedforward=ff_dim, dropout=dropout, batch_first=True
        )
        self.enc = nn.TransformerEncoder(layer, num_layers=n_layers, enable_nested_tensor=False)

    def forward(self, x: Tensor, padding: Tensor | None = None) -> Tensor:
        """[B, K, dim] -> [B, K, dim]; `padding` [B, K] True = ignore that frame."""
        return self.enc(x, src_key_padding_mask=padding)


class TemporalTrunk(NamedTuple):
    """The per-frame trunk shared by the ranking head and the permutation classifier, and its sizes."""

    reduce: nn.Sequential  # Linear(D -> hidden) + GELU
    temporal: TemporalEncoder
    hidden_dim: int
    ff_dim: int


def temporal_trunk(
    in_dim: int,
    hidden_dim: int | None = None,
    n_layers: int = 6,
    n_heads: int = AUTHORS_TEMPORAL_HEADS,
    ff_dim: int | None = None,
    dropout: float = 0.1,
    owner: str = "TemporalHead",
) -> TemporalTrunk:
    """`reduce` and `temporal` of the authors' head: hidden D/2 and ff 4*hidden unless given (`owner` names
    the module in the one-line error when hidden is not a multiple of the heads)."""
    hidden = int(hidden_dim or in_dim // 2)
    ff = int(ff_dim or 4 * hidden)
    if hidden < 2 or hidden % n_heads != 0:
        raise ConfigError(f"{owner}: hidden_dim {hidden} must be divisible by n_heads {n_heads}")
    reduce = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU())
    return TemporalTrunk(reduce, TemporalEncoder(hidden, n_layers, n_heads, ff, dropout), hidden, ff)


class TemporalHead(nn.Module):
    """Frame embeddings [B, K, D] -> ranking scores [B, K] (higher = earlier in the procedure).

    `reduce` = Linear(D->hidden)+GELU, `temporal` = 6 post-norm layers (8 heads, ff 4*hidden), `scorer` =
    Linear(hidden->hidden/2)-GELU-Linear(->1); hidden = D/2 (authors' `hidden_mul=0.5`) unless given. No
    temporal position embedding: the head is permutation-equivariant, so input order leaks nothing.
    """

    def __init__(
        self,
        in_dim: int,
        hidden_dim: int | None = None,
        n_layers: int = 6,
        n_heads: int = AUTHORS_TEMPORAL_HEADS,
        ff_dim: int | None = None,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        trunk = temporal_trunk(in_dim, hidden_dim, n_layers, n_heads, ff_dim, dropout)
        hidden_dim, ff_dim = trunk.hidden_dim, trunk.ff_dim
        self.config: dict[str, Any] = {
            "in_dim": int(in_dim),
            "hidden_dim": hidden_dim,
            "n_layers": int(n_layers),
            "n_heads": int(n_heads),
            "ff_dim": ff_dim,
            "dropout": float(dropout),
        }
        self.reduce, self.temporal = trunk.reduce, trunk.temporal
        self.scorer = nn.Sequential(
            nn.Linear(hidden_dim, hidden_dim // 2), nn.GELU(), nn.Linear(hidden_dim // 2, 1)
        )
        self.register_load_state_dict_pre_hook(_upgrade_legacy_keys_hook)

    def forward(self, frames: Tensor, mask: Tensor | None = None) -> Tensor:
        """Score each frame; `mask` [B, K] bool marks the valid frames of padded clips (others unattended)."""
        padding = None if mask is None else ~mask.to(device=frames.device, dtype=torch.bool)
        return self.scorer(self.temporal(self.reduce(frames), padding)).squeeze(-1)


def upgrade_legacy_keys(state: Mapping[str, Tensor], prefix: str = "") -> dict[str, Tensor]:
    """Rename keys of heads saved before the authors' names were adopted (`input_proj.` -> `reduce.`, ...)."""
    out = {}
    for key, value in state.items():
        for old, new in _LEGACY_PREFIXES:
            if key.startswith(prefix + old):
                key = prefix + new + key[len(prefix + old) :]
                break
        out[key] = value
    return out


def _upgrade_legacy_keys_hook(module: nn.Module, state_dict: dict, prefix: str, *args: Any) -> None:
    upgraded = upgrade_legacy_keys(state_dict, prefix)
    if upgraded.keys() != state_dict.keys():
        state_dict.clear()
        state_dict.update(upgraded)


# --- storage: our folder format --------------------------------------------------------------------------


def save_temporal_head(head: TemporalHead, out_dir: str | os.PathLike) -> Path:
    """Write `temporal_head.safetensors` and `temporal_head.json` (constructor arguments) into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    with atomic_path(out_dir / HEAD_WEIGHTS_FILE) as tmp:
        save_file(state, str(tmp), metadata={"format": "pt", "module": "TemporalHead"})
    write_json_atomic(out_dir / HEAD_CONFIG_FILE, head.config)
    return out_dir


def _load_head_folder(directory: Path) -> TemporalHead:
    """A `TemporalHead` from the JSON arguments and the safetensors weights of one folder (strict)."""
    config_path, weights_path = directory / HEAD_CONFIG_FILE, directory / HEAD_WEIGHTS_FILE
    for path in (config_path, weights_path):
        if not path.is_file():
            raise CheckpointError(
                f"{path} not found; save the head with save_temporal_head(head, {directory})"
            )
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{config_path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(config, dict):
        raise CheckpointError(f"{config_path}: expected a JSON object of TemporalHead arguments")
    try:
        head = TemporalHead(**config)
    except (TypeError, ConfigError) as exc:
        raise CheckpointError(
            f"{config_path}: invalid TemporalHead arguments ({exc}); re-export the head"
        ) from exc
    fix = f"save the head again with save_temporal_head(head, {directory})"
    state = upgrade_legacy_keys(load_safetensors_file(weights_path, fix=fix))
    return load_checked(head, state, f"{weights_path} (arguments from {HEAD_CONFIG_FILE})")


def load_checked(module: ModuleT, state: Mapping[str, Tensor], source: str) -> ModuleT:
    """`module` with `state` loaded strictly, after `check_state_dict` named every mismatch in one line."""
    check_state_dict(module, state, source)
    module.load_state_dict(state, strict=True)
    return module


def sized_from_shapes(build: Callable[[], ModuleT], source: str) -> ModuleT:
    """`build()`: a head sized from state-dict shapes; a size it refuses is a CheckpointError of `source`."""
    try:
        return build()
    except ConfigError as exc:
        raise CheckpointError(f"{source}: {exc}") from exc


def check_state_dict(module: nn.Module, state: Mapping[str, Tensor], source: str) -> None:
    """Raise `CheckpointError` listing missing, unexpected and mis-shaped keys (nothing is loaded then)."""
    expected = module.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    mis_shaped = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in sorted(set(expected) & set(state))
        if state[k].shape != expected[k].shape
    ]
    if missing or unexpected or mis_shaped:
        parts = []
        if missing:
            parts.append(f"missing {missing[:8]}")
        if unexpected:
            parts.append(f"unexpected {unexpected[:8]}")
        if mis_shaped:
            parts.append(f"shape mismatch {mis_shaped[:8]}")
        raise CheckpointError(
            f"{source} does not match the {type(module).__name__} it describes: " + "; ".join(parts)
        )


# --- finding a head behind any model spec ----------------------------------------------------------------


def resolve_head_source(
    spec: str | os.PathLike,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    folder_files: tuple[str, ...] | None = (HEAD_CONFIG_FILE, HEAD_WEIGHTS_FILE),
) -> Path:
    """Where the heads behind a model spec live: a folder holding `folder_files`, or a checkpoint file.

    Specs as in `load_encoder`: registry name, `hf-hub:ORG/NAME[/FILE]`, exported or run folder, checkpoint
    file. A run folder without an exported head gives its `last.ckpt`; `folder_files=None` skips folders.
    """
    parsed = parse_spec(spec)
    spec = parsed.text
    if parsed.kind == "registry":
        entry = parsed.entry
        local = entry.resolve_local_path()
        if local is not None:
            if not local.exists():
                raise ModelNotFoundError(f"Model {entry.name!r} points at {local}, which does not exist.")
            return _local_source(local, folder_files, spec)
        if entry.repo_id is None:
            hint = f" or set ${entry.path_env}" if entry.path_env else ""
            raise ModelNotFoundError(
                f"Model {entry.name!r} is not on the Hub: pass its checkpoint path{hint}."
            )
        repo_id, filename, spec_revision = entry.repo_id, entry.filename, None
        hint = f"`plstitch download {entry.name}`"
    elif parsed.kind == "hf-hub" and parsed.repo_id is not None:
        repo_id, filename, spec_revision = parsed.repo_id, parsed.filename, parsed.revision
        hint = None
    else:  # a path (a random-init spec carries no head: it is looked for as a path, and is none)
        if not parsed.path.exists():
            raise ModelNotFoundError(
                f"{spec!r} is neither a registry model, an {HF_HUB_FILE_FORM} spec, nor an existing path."
            )
        return _local_source(parsed.path, folder_files, spec)
    revision = revision or spec_revision
    if filename is not None:
        return fetch_file(repo_id, filename, revision=revision, cache_dir=cache_dir, fix_hint=hint).path
    if folder_files is None:
        raise CheckpointError(
            f"{spec} is a timm-format repo, which holds no training heads; pass a training checkpoint."
        )
    fetched = [
        fetch_file(repo_id, name, revision=revision, cache_dir=cache_dir, fix_hint=hint)
        for name in folder_files
    ]
    return fetched[0].path.parent


def _local_source(path: Path, folder_files: tuple[str, ...] | None, spec: str) -> Path:
    if path.is_file():
        if folder_files and path.name in folder_files:
            return path.parent
        return path
    if folder_files:
        for folder in (backbone_dir(path), path):
            if all((folder / name).is_file() for name in folder_files):
                return folder
    if (path / RUN_CHECKPOINT).is_file():
        return path / RUN_CHECKPOINT
    wanted = " + ".join(folder_files) + " or " if folder_files else ""
    raise CheckpointError(
        f"{spec}: folder without {wanted}{RUN_CHECKPOINT}; pass a training run, an exported folder or a "
        "PL-Stitch checkpoint file."
    )


def strip_wrappers(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """`state` with DDP / torch.compile prefixes (`module.`, `_orig_mod.`, repeated) removed from every key.

    Why: the authors saved from DDP modules; one helper serves the head loaders and `train --init`.
    """
    out = {}
    for key, value in state.items():
        while key.startswith(_WRAPPER_PREFIXES):
            key = key.split(".", 1)[1]
        out[key] = value
    return out


def head_state_from_checkpoint(
    checkpoint: Any, official_key: str, student_name: str, source: str
) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """(head tensors, training config) of a released PL-Stitch checkpoint or one of our `last.ckpt` files.

    Released: `checkpoint[official_key]`, saved from DDP (`module.` removed here). Ours: the tensors under
    `student.<student_name>.` of `checkpoint["model"]`, with `checkpoint["config"]`. Else `CheckpointError`.
    """
    if not isinstance(checkpoint, Mapping):
        raise CheckpointError(f"{source} is not a training checkpoint (found a {type(checkpoint).__name__}).")
    official = checkpoint.get(official_key)
    if isinstance(official, Mapping):
        return strip_wrappers(official), {}
    model = checkpoint.get("model")
    if isinstance(model, Mapping):
        marker = f"student.{student_name}."
        state = {k[len(marker) :]: v for k, v in strip_wrappers(model).items() if k.startswith(marker)}
        if state:
            config = checkpoint.get("config")
            return state, dict(config) if isinstance(config, Mapping) else {}
    raise CheckpointError(
        f"{source} holds no {student_name.replace('_', ' ')}: expected a released PL-Stitch checkpoint "
        f"(entry {official_key!r}) or a `plstitch train` {RUN_CHECKPOINT}; top-level keys: "
        f"{sorted(map(str, checkpoint))[:12]}."
    )


def temporal_head_from_state_dict(
    state: Mapping[str, Tensor],
    n_heads: int = AUTHORS_TEMPORAL_HEADS,
    dropout: float = 0.1,
    source: str = "state dict",
) -> TemporalHead:
    """A `TemporalHead` sized from tensor shapes (in_dim, hidden, layers, ff) and loaded strictly.

    Shapes cannot show the number of attention heads: the authors use 8 (`n_heads`).
    """
    state = upgrade_legacy_keys(state)
    reduce = state.get("reduce.0.weight")
    first_ff = state.get("temporal.enc.layers.0.linear1.weight")
    if reduce is None or first_ff is None:
        raise CheckpointError(
            f"{source}: not a PL-Stitch temporal head (no reduce.0.weight / temporal.enc.layers.0.*); "
            f"keys start with {sorted({k.split('.', 1)[0] for k in state})}."
        )
    layers = {int(m.group(1)) for k in state if (m := re.match(r"temporal\.enc\.layers\.(\d+)\.", k))}
    hidden, in_dim = reduce.shape
    head = sized_from_shapes(
        lambda: TemporalHead(
            int(in_dim), int(hidden), max(layers) + 1, n_heads, int(first_ff.shape[0]), float(dropout)
        ),
        source,
    )
    return load_checked(head, state, source)


def load_temporal_head(
    spec: str | os.PathLike,
    device: torch.device | str = "cpu",
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    trust_pickle: bool = False,
    n_heads: int | None = None,
) -> TemporalHead:
    """The temporal head behind any `load_encoder` spec, loaded strictly, in eval mode: [B, k, D] -> [B, k].

    Folders (exported, run `backbone/`, Hub timm repos) hold `temporal_head.json` + `.safetensors`; released
    `pl_*.pth` files and `last.ckpt` hold the state dict, sized from its shapes (heads: 8 unless recorded).
    """
    source = resolve_head_source(spec, revision=revision, cache_dir=cache_dir)
    if source.is_dir():
        head = _load_head_folder(source)
    else:
        checkpoint = load_checkpoint(source, trust_pickle=trust_pickle)
        state, train_config = head_state_from_checkpoint(
            checkpoint, OFFICIAL_KEY, "temporal_head", str(source)
        )
        heads = n_heads or train_config.get("temporal_heads") or AUTHORS_TEMPORAL_HEADS
        dropout = train_config.get("temporal_dropout", 0.1)
        head = temporal_head_from_state_dict(state, int(heads), float(dropout), f"{source} (temporal head)")
    return head.to(device).eval()

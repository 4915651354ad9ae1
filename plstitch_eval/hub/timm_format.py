"""timm's Hub folder format: `config.json` + `model.safetensors`, loadable by plain `timm.create_model`.

`timm.create_model("local-dir:DIR", pretrained=True)` (or `"hf-hub:ORG/NAME"` once pushed) rebuilds the model
from `architecture` + `model_args` and loads the weights strictly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import timm
import torch
from safetensors.torch import save_file
from timm.layers import LayerScale, Mlp
from timm.models.convnext import ConvNeXt
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub.safe_load import check_safetensors_file
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.utils.io import atomic_path, write_json_atomic

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
DATA_CONFIG_KEY = "plstitch_data_config"  # exact resize side; timm ignores unknown top-level keys


def vit_model_args(model: VisionTransformer) -> dict[str, Any]:
    """Constructor arguments that rebuild `model` from timm's `vit_base_patch16_224` entry point."""
    block = model.blocks[0]
    embed_dim = model.embed_dim
    if type(block.mlp) is not Mlp:  # e.g. DINOv2 ViT-g's SwiGLU: config.json cannot name its layer class
        raise ConfigError(
            f"This ViT's MLP is a {type(block.mlp).__name__}; timm's config.json can only describe the plain "
            "Mlp, so it cannot be written in timm format (load its checkpoint file directly instead)."
        )
    args: dict[str, Any] = {
        "img_size": list(model.patch_embed.img_size),
        "patch_size": list(model.patch_embed.patch_size),
        "embed_dim": embed_dim,
        "depth": len(model.blocks),
        "num_heads": block.attn.num_heads,
        "mlp_ratio": block.mlp.fc1.out_features / embed_dim,
        "qkv_bias": block.attn.qkv.bias is not None,
        "class_token": model.cls_token is not None,
        "global_pool": model.global_pool,
        "no_embed_class": model.no_embed_class,
        "reg_tokens": model.num_reg_tokens,
    }
    if isinstance(block.ls1, LayerScale):
        args["init_values"] = 1e-5  # any value builds LayerScale; the weights overwrite it
    return args


def convnext_model_args(model: ConvNeXt) -> dict[str, Any]:
    """Constructor arguments (stage depths and widths) for timm's `convnext_large` entry point."""
    depths = [len(stage.blocks) for stage in model.stages]
    dims = [stage.blocks[0].conv_dw.out_channels for stage in model.stages]
    args: dict[str, Any] = {"depths": depths, "dims": dims}
    if getattr(model.stages[0].blocks[0], "gamma", None) is None:
        args["ls_init_value"] = None
    return args


def _architecture_and_args(model: nn.Module) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(architecture, model_args, extra pretrained_cfg fields) for a model we know how to describe."""
    if isinstance(model, VisionTransformer):
        extra = {"first_conv": "patch_embed.proj", "classifier": "head", "fixed_input_size": True}
        return "vit_base_patch16_224", vit_model_args(model), extra
    if isinstance(model, ConvNeXt):
        if not isinstance(model.head.norm, nn.LayerNorm | timm.layers.LayerNorm2d | timm.layers.LayerNorm):
            raise ConfigError("This ConvNeXt has no head norm and cannot be written in timm format.")
        return "convnext_large", convnext_model_args(model), {"first_conv": "stem.0", "classifier": "head.fc"}
    raise ConfigError(
        f"save_timm_dir supports timm VisionTransformer and ConvNeXt models, got {type(model).__name__}."
    )


def timm_config(model: nn.Module, data_config: DataConfig) -> dict[str, Any]:
    """timm's config.json dict for `model` with eval preprocessing `data_config`."""
    architecture, model_args, extra = _architecture_and_args(model)
    pretrained_cfg = {**data_config.to_pretrained_cfg(), **extra, "num_classes": model.num_classes}
    return {
        "architecture": architecture,
        "num_classes": model.num_classes,
        "num_features": model.num_features,
        "global_pool": getattr(model, "global_pool", "") if isinstance(model, VisionTransformer) else "avg",
        "model_args": model_args,
        "pretrained_cfg": pretrained_cfg,
        DATA_CONFIG_KEY: data_config.to_dict(),
    }


def save_timm_dir(
    model: nn.Module,
    out_dir: str | Path,
    data_config: DataConfig,
    extra_files: dict[str, str | Path] | None = None,
) -> Path:
    """Write `config.json` + `model.safetensors` atomically so `timm.create_model("local-dir:DIR")` loads it.

    `extra_files` maps a file name inside `out_dir` to a source path that is copied there (e.g. a model card).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = timm_config(model, data_config)
    state = {key: tensor.detach().to("cpu").contiguous() for key, tensor in model.state_dict().items()}
    with atomic_path(out_dir / WEIGHTS_NAME) as tmp:
        save_file(state, str(tmp), metadata={"format": "pt"})
    write_json_atomic(out_dir / CONFIG_NAME, config)
    for name, source in (extra_files or {}).items():
        with atomic_path(out_dir / name) as tmp:
            shutil.copyfile(source, tmp)
    return out_dir


def is_timm_dir(path: str | Path) -> bool:
    """True when `path` is a folder with timm's config.json and model.safetensors."""
    path = Path(path)
    return (path / CONFIG_NAME).is_file() and (path / WEIGHTS_NAME).is_file()


def read_data_config(path: str | Path) -> DataConfig:
    """The eval preprocessing stored in a timm folder's config.json."""
    config = _read_config(Path(path))
    if DATA_CONFIG_KEY in config:
        return DataConfig.from_dict(config[DATA_CONFIG_KEY])
    return DataConfig.from_pretrained_cfg(config.get("pretrained_cfg", config))


def load_timm_dir(path: str | Path, **model_overrides: Any) -> tuple[nn.Module, DataConfig]:
    """Build the model of a timm folder with plain timm (strict load) and return it with its `DataConfig`.

    `model_overrides` go to `timm.create_model` (e.g. `img_size=224` resamples the position embedding).
    The classifier is dropped (`num_classes=0`); the model is returned in eval mode on CPU.
    """
    path = Path(path).resolve()
    if not is_timm_dir(path):
        raise CheckpointError(
            f"{path} is not a timm-format folder: it needs {CONFIG_NAME} and {WEIGHTS_NAME}."
        )
    check_safetensors_file(path / WEIGHTS_NAME)  # timm would raise a bare SafetensorError on a cut-short file
    overrides = {"num_classes": 0, **model_overrides}
    try:
        model = timm.create_model(f"local-dir:{path}", pretrained=True, **overrides)
    except RuntimeError as exc:  # timm loads strictly; a mismatch surfaces here
        raise CheckpointError(f"{path / WEIGHTS_NAME} does not match {path / CONFIG_NAME}: {exc}") from exc
    return model.eval(), _overridden_data_config(read_data_config(path), model_overrides)


def has_timm_config(path: str | Path) -> bool:
    """True when `path` holds timm's config.json (weights or not): all `random_init_timm_dir` reads."""
    return (Path(path) / CONFIG_NAME).is_file()


def random_init_timm_dir(
    path: str | Path, seed: int = 0, **model_overrides: Any
) -> tuple[nn.Module, DataConfig]:
    """The architecture of a timm folder's config.json with freshly initialised weights, and its `DataConfig`.

    Why: the "no pretraining" reference of a model has its exact shape and preprocessing. Built by plain
    `timm.create_model(..., pretrained=False)` under `torch.manual_seed(seed)` (the global RNG is restored
    afterwards), so a seed gives the same weights every time; the weights file is never read.
    """
    path = Path(path).resolve()
    if not has_timm_config(path):
        raise CheckpointError(f"{path} is not a timm-format folder: it needs {CONFIG_NAME}.")
    overrides = {"num_classes": 0, **model_overrides}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            model = timm.create_model(f"local-dir:{path}", pretrained=False, **overrides)
        except (RuntimeError, KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"Cannot build the architecture of {path / CONFIG_NAME}: {exc}") from exc
    return model.eval(), _overridden_data_config(read_data_config(path), model_overrides)


def _overridden_data_config(data_config: DataConfig, model_overrides: dict[str, Any]) -> DataConfig:
    """`data_config` at the input size an `img_size` override asks for (same crop_pct), else unchanged."""
    if "img_size" not in model_overrides:
        return data_config
    size = model_overrides["img_size"]
    height, width = (size, size) if isinstance(size, int) else size
    return DataConfig(
        input_size=(3, height, width),
        resize_size=round(min(height, width) / data_config.crop_pct),
        crop_pct=data_config.crop_pct,
        interpolation=data_config.interpolation,
        mean=data_config.mean,
        std=data_config.std,
        crop_mode=data_config.crop_mode,
    )


def _read_config(path: Path) -> dict[str, Any]:
    config_file = path / CONFIG_NAME
    try:
        return json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"Cannot read {config_file}: {exc}") from exc

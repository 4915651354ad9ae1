"""Encoder hub: load PL-Stitch and baseline encoders (registry names, Hub repos, local files) safely."""

from plstitch_eval.hub.convert import convnext_from_state_dict, model_from_checkpoint, vit_from_state_dict
from plstitch_eval.hub.converter_registry import Converted, register_converter, unregister_converter
from plstitch_eval.hub.download import download_model
from plstitch_eval.hub.encoder import Encoder, load_encoder
from plstitch_eval.hub.ranking_head import TemporalHead, load_temporal_head
from plstitch_eval.hub.registry import (
    ModelEntry,
    get_model_entry,
    list_models,
    register,
    registered,
    unregister,
)
from plstitch_eval.hub.safe_load import load_checkpoint
from plstitch_eval.hub.spec import EncoderSpec, check_spec, parse_spec
from plstitch_eval.hub.timm_format import load_timm_dir, save_timm_dir
from plstitch_eval.preprocess import DataConfig, EvalTransform, preprocess_batch

__all__ = [
    "Converted",
    "DataConfig",
    "Encoder",
    "EncoderSpec",
    "EvalTransform",
    "ModelEntry",
    "TemporalHead",
    "check_spec",
    "convnext_from_state_dict",
    "download_model",
    "get_model_entry",
    "list_models",
    "load_checkpoint",
    "load_encoder",
    "load_temporal_head",
    "load_timm_dir",
    "model_from_checkpoint",
    "parse_spec",
    "preprocess_batch",
    "register",
    "register_converter",
    "registered",
    "save_timm_dir",
    "unregister",
    "unregister_converter",
    "vit_from_state_dict",
]

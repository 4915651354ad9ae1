"""The probe's encoder, loaded to turn new frames into the probe's features exactly as extraction did.

A probe records the features it was trained on (encoder spec + weights sha256, the store's preprocessing
record, fps); `load_probe_encoder` loads that encoder, rebuilds the frame plan and refuses (through
`probes.check_probe_matches`) an encoder or preprocessing that differs. `encode_crops` runs one batched
forward as extraction does (same normalisation on the device, same precision). The encoder's PL-Stitch
temporal head, when it has one, scores a progression per frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from plstitch_eval.analysis.progression import minmax_progress, score_frames
from plstitch_eval.data.decoders import DECODER_FIELDS
from plstitch_eval.errors import CheckpointError, ConfigError, ModelNotFoundError
from plstitch_eval.extract import preprocessing_record
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.ranking_head import load_temporal_head
from plstitch_eval.predict.options import PredictOptions
from plstitch_eval.preprocess import TRANSFORMS, FramePlan, frame_plan, normalize_crops
from plstitch_eval.probes import Probe, ProbeError, check_probe_matches
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.device import autocast, resolve_device, resolve_precision


@dataclass
class ProbeEncoder:
    """The probe's encoder, ready to turn frames into the probe's features: frame plan, device, precision,
    and the temporal head scoring progression (None without one)."""

    encoder: Any
    plan: FramePlan
    device: torch.device
    precision: str
    progression_head: Any = None
    runtime: str = "torch"  # what runs the encoder and the probe: torch, or onnxruntime (`predict.onnx`)

    @property
    def spec(self) -> str:
        return str(self.encoder.provenance.get("spec"))

    def encode(self, crops: torch.Tensor) -> torch.Tensor:
        """uint8 crops (or windows) -> float32 features on the device (see `encode_crops`)."""
        return encode_crops(self.encoder, crops, self.plan, self.device, self.precision)

    def progression(self, features: np.ndarray) -> np.ndarray | None:
        """Min-max normalised temporal-head progress of one video's features, or None without a head."""
        if self.progression_head is None or not len(features):
            return None
        return minmax_progress(score_frames(features, self.progression_head, device=self.device))


@torch.inference_mode()
def encode_crops(
    encoder: Any, crops: torch.Tensor, plan: FramePlan, device: torch.device, precision: str
) -> torch.Tensor:
    """One batched forward as extraction runs it: uint8 to the device (asynchronously from pinned memory),
    normalised there, under the precision's autocast; float32 features, left on the device."""
    x = normalize_crops(crops.to(device, non_blocking=True), plan)
    with autocast(device, precision):
        features = encoder(x)
    return features.float()


def load_probe_encoder(probe: Probe, options: PredictOptions) -> ProbeEncoder:
    """Load the encoder the probe records and rebuild extraction's frame plan at the probe's fps; refuse
    (`ProbeError`, one line naming both) weights or preprocessing other than the probe's.

    A store made with `--transform` recorded another crop mode than the model's own: the encoder is then
    loaded with the transform that gives the recorded preprocessing.
    """
    spec = probe.encoder.get("spec")
    if not spec:
        raise ProbeError(
            f"probe {probe.folder}: records no encoder spec; save it again from a feature store."
        )
    if not probe.fps or probe.fps <= 0:
        raise ProbeError(f"probe {probe.folder}: records no frame rate (fps); save it again.")
    device = resolve_device(options.device)
    precision = resolve_precision(options.precision, device)
    load = {"device": str(device), "which": options.which, "trust_pickle": options.trust_pickle}
    encoder = load_encoder(spec, **load)
    wanted = probe.preprocessing if isinstance(probe.preprocessing, dict) else {}
    transform = _transform_for(encoder.data_config, wanted)
    if transform is not None:
        encoder = load_encoder(spec, transform=transform, **load)
    resize_on_decode, crop_black_margin = bool(wanted.get("resize_on_decode")), "crop_black_margin" in wanted
    plan = frame_plan(encoder.data_config, probe.fps, resize_on_decode, encoder.clip, crop_black_margin)
    record = preprocessing_record(encoder.data_config, plan)
    # the decoder is not held against a probe: decoders give the same frames, pixels within rounding
    record.update({key: wanted[key] for key in DECODER_FIELDS if key in wanted})
    _check_matches(probe, spec, encoder, record)
    head = _progression_head(spec, encoder.feature_dim, device, options)
    return ProbeEncoder(encoder, plan, device, precision, head)


def _check_matches(probe: Probe, spec: str, encoder: Any, record: dict[str, Any]) -> None:
    """`check_probe_matches` with predict's fix: its own names `--model`, which predict does not take (it
    loads the probe's recorded spec), so the fix clause after the last `; ` is replaced."""
    try:
        check_probe_matches(probe, spec, encoder.provenance.get("sha256"), record)
    except ProbeError as exc:
        text = str(exc).rstrip(".")
        cut = text.rfind("; ")
        fix = (
            f"the encoder at {spec} is not the one the probe was trained with: restore its weights and "
            f"preprocessing (or point encoder.spec in {probe.folder}/probe.json at them), or save a new "
            "probe from features of this encoder"
        )
        raise ProbeError(f"{text[:cut] if cut > 0 else text}; {fix}.") from None


def _transform_for(data_config: Any, wanted: dict[str, Any]) -> str | None:
    """The `--transform` name that turns the model's preprocessing into the recorded one (other crop mode),
    or None when the crop modes agree (any other difference is left for `check_probe_matches`)."""
    mode = wanted.get("crop_mode")
    if mode is None or mode == data_config.crop_mode:
        return None
    for name, crop_mode in TRANSFORMS.items():
        if crop_mode == mode and data_config.with_transform(name).to_dict().items() <= wanted.items():
            return name
    return None


def _progression_head(spec: str, feature_dim: int, device: torch.device, options: PredictOptions) -> Any:
    """The encoder's PL-Stitch temporal head, if it has one (asked for: must have), else None."""
    if options.progression is False:
        return None
    try:
        head = load_temporal_head(spec, device, trust_pickle=options.trust_pickle)
    except (CheckpointError, ModelNotFoundError) as exc:
        if options.progression:
            raise ConfigError(f"--progression: {exc}") from exc
        logger.debug("no temporal head behind %s (%s): no progression column", spec, exc)
        return None
    if head.config["in_dim"] != feature_dim:
        raise ConfigError(
            f"{spec}: its temporal head takes {head.config['in_dim']}-d features but the encoder gives "
            f"{feature_dim}-d; pass --no-progression."
        )
    return head


def describe(probe: Probe, model: ProbeEncoder) -> str:
    """One line naming the probe, its classes, the encoder and the sampling."""
    return (
        f"{probe.kind} probe {probe.name} ({probe.num_classes} classes) on {model.spec} features, "
        f"{probe.fps:g} fps, {model.device.type} {model.precision}"
        + ("" if model.runtime == "torch" else f", {model.runtime}")
    )

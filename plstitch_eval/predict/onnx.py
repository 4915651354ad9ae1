"""A probe and its encoder as ONNX graphs, for deployment outside PyTorch (`plstitch export-onnx`), and run by
onnxruntime in `plstitch predict --runtime onnx` with the same decoding and preprocessing.

An export folder is the probe folder (`probe.json`, its weights: it still loads as a probe) plus:
- `recognizer.onnx`: prepared frames (uint8 [N, 3, H, W], resized and cropped as the probe's preprocessing
  says) -> `features` [N, D] and, for a linear probe, `probabilities` [N, C] (a multi-label probe's: the
  sigmoid per label; a regression probe's `minutes`): normalisation, encoder and head in one graph with a
  dynamic batch;
- `head.onnx`: one video's `features` [T, D] -> `logits` [T, C] (a temporal probe's causal head, T dynamic);
- `onnx.json`: what the graphs expect (frame plan, class names, fps, opset, the versions that wrote them),
  also stored in `recognizer.onnx`'s metadata, so the graph alone says how to feed it; plus the head it was
  made from and each graph's sha256, checked before a run (`probes.onnx_files.check_export`).
The probe may be a published one (``hf-hub:ORG/NAME``); a published export runs from the cache by name.
Needs the `onnx` extra (`pip install 'plstitch[onnx]'`: onnx, onnxruntime).
"""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.predict.encoder import ProbeEncoder, load_probe_encoder
from plstitch_eval.predict.options import PredictOptions
from plstitch_eval.preprocess import FramePlan, normalize_crops
from plstitch_eval.probes import Probe, load_probe
from plstitch_eval.probes.folder import PROBE_FILES
from plstitch_eval.probes.hub import fetch_hub_export, resolve_probe
from plstitch_eval.probes.onnx_files import (
    HEAD,
    ONNX_JSON,
    ONNX_SCHEMA,
    RECOGNIZER,
    check_export,
    graph_digests,
    read_onnx_record,
)
from plstitch_eval.probes.probe import PROBE_JSON, PROBE_WEIGHTS
from plstitch_eval.utils.io import temp_dir_beside, write_json_atomic
from plstitch_eval.utils.outputs import REPLACED_FOLDER, check_output_path

OPSET = 17
EXTRA_HINT = "install the onnx extra: pip install 'plstitch[onnx]'"
HEAD_OUTPUT = {False: "logits", True: "minutes"}  # head.onnx's output: a phase probe's, a regression probe's
PLAN_FIELDS = ("fps", "resize", "crop", "interpolation", "mean", "std", "resize_on_decode", "squash")


def require_onnxruntime():
    """The onnxruntime module, or one line saying which extra to install."""
    try:
        import onnxruntime
    except ImportError:
        raise ConfigError(f"--runtime onnx and export-onnx need onnxruntime; {EXTRA_HINT}.") from None
    return onnxruntime


class _Recognizer(nn.Module):
    """uint8 frames -> features (and a linear head's probabilities, or a linear regression head's minutes):
    the graph `recognizer.onnx` holds."""

    def __init__(self, encoder: nn.Module, plan: FramePlan, head: nn.Module | None, activation: str) -> None:
        super().__init__()
        self.encoder, self.plan, self.head, self.activation = encoder, plan, head, activation

    def forward(self, frames: torch.Tensor):
        features = self.encoder(normalize_crops(frames, self.plan)).float()
        if self.head is None:
            return features
        out = self.head(features)
        if self.activation == "softmax":
            return features, torch.softmax(out, dim=-1)
        return features, torch.sigmoid(out) if self.activation == "sigmoid" else out


def head_activation(probe: Probe) -> str:
    """What turns the head's outputs into the recognizer's: softmax over a phase probe's classes, a sigmoid
    per label of a multi-label probe, nothing for a regression probe's minutes."""
    if probe.is_regression:
        return "none"
    return "sigmoid" if probe.is_multilabel else "softmax"


def export_onnx(probe_spec: str | Path, out: str | Path, overwrite: bool = False, opset: int = OPSET) -> dict:
    """Write the export folder `out` for the probe `probe_spec` (a folder, or ``hf-hub:ORG/NAME[@REV]`` with
    its backbone verified; see the module docstring); returns its `onnx.json` record. The encoder is
    exported on the CPU in fp32; the folder appears whole or not at all (written beside it, then renamed)."""
    require_onnxruntime()
    try:
        import onnx  # noqa: F401 - _set_metadata writes the record into the graph with it
    except ImportError:
        raise ConfigError(f"export-onnx needs onnx; {EXTRA_HINT}.") from None
    out = check_output_path(out, "--out", REPLACED_FOLDER)
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} exists; pass --overwrite to replace it, or choose another --out.")
    if out.exists() and not (out / ONNX_JSON).is_file():
        raise ConfigError(f"{out} is not an ONNX export folder (no {ONNX_JSON}); choose another --out.")
    if out.exists():
        PROBE_FILES.check(out)  # --overwrite deletes the export's own files, never a user's
    probe = resolve_probe(probe_spec)
    options = PredictOptions(device="cpu", precision="fp32", num_workers=0, progression=False)
    model = load_probe_encoder(probe, options)
    if model.plan.clip is not None:
        raise ConfigError(f"{model.spec} is a clip encoder; export-onnx takes single-frame encoders only.")
    encoder = model.encoder.eval()
    extra = 1 if (probe.task or {}).get("elapsed") else 0  # the elapsed minutes: one more head input
    linear = probe.kind == "linear" and not extra  # a head of the frame alone joins the recognizer
    height, width = model.plan.crop
    frames = torch.zeros(2, 3, height, width, dtype=torch.uint8)
    dim = int(probe.encoder["feature_dim"])
    head_output = HEAD_OUTPUT[probe.is_regression]
    tmp = temp_dir_beside(out)
    try:
        _copy_probe(probe, tmp)
        recognizer = _Recognizer(encoder, model.plan, probe.head if linear else None, head_activation(probe))
        outputs = (
            ["features", "minutes" if probe.is_regression else "probabilities"] if linear else ["features"]
        )
        _export(
            recognizer.eval(), frames, tmp / RECOGNIZER, ["frames"], outputs, {"frames": {0: "batch"}}, opset
        )
        _export(
            probe.head,
            torch.zeros(3, dim + extra),
            tmp / HEAD,
            ["features"],
            [head_output],
            {"features": {0: "frames"}},
            opset,
        )
        record = {
            "schema": ONNX_SCHEMA,
            "kind": probe.kind,
            "class_names": list(probe.class_names),
            "fps": probe.fps,
            "causal": probe.causal,
            "encoder": dict(probe.encoder),
            "plan": {key: _jsonable(getattr(model.plan, key)) for key in PLAN_FIELDS},
            "crop_black_margin": model.plan.crop_black_margin,
            "inputs": {
                "frames": f"uint8 [N, 3, {height}, {width}] RGB, resized and cropped (not normalised)"
            },
            "outputs": outputs,
            "head_output": head_output,
            **({"task": dict(probe.task or {})} if probe.task else {}),
            "opset": opset,
            "versions": {name: version(name) for name in ("torch", "onnx", "onnxruntime")},
            "probe": probe.name,
            "probe_sha256": sha256_file(tmp / PROBE_WEIGHTS),  # the head the graphs were made from
        }
        _set_metadata(tmp / RECOGNIZER, record)
        record["sha256"] = graph_digests(tmp)  # after the metadata: it is part of the graph's bytes
        write_json_atomic(tmp / ONNX_JSON, record)
        load_probe(tmp)  # the export folder is still a probe folder
        if out.exists():
            shutil.rmtree(out)
        tmp.replace(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return record


def _copy_probe(probe: Probe, folder: Path) -> None:
    """The probe's head and record into `folder` as a probe folder (a published probe's config.json becomes
    probe.json, with the ``hf-hub:ORG/NAME@COMMIT`` it came from in ``source.hub``)."""
    shutil.copy2(probe.folder / PROBE_WEIGHTS, folder / PROBE_WEIGHTS)
    if (probe.folder / PROBE_JSON).is_file():
        shutil.copy2(probe.folder / PROBE_JSON, folder / PROBE_JSON)
        return
    from plstitch_eval.probes.publish import CONFIG_NAME

    record = json.loads((probe.folder / CONFIG_NAME).read_text(encoding="utf-8"))
    record["source"] = {**(record.get("source") or {}), "hub": probe.name}
    write_json_atomic(folder / PROBE_JSON, record)


def _export(module: nn.Module, example: torch.Tensor, path: Path, inputs, outputs, axes, opset: int) -> None:
    """torch.onnx.export by tracing (the TorchScript exporter: no onnxscript needed), dynamic first axis.

    The tracer's warnings are silenced: they flag Python values frozen into the graph (the normalisation
    constants, shape checks), which the parity tests check at other batch sizes and lengths.
    """
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Constant folding", category=UserWarning)
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export")
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="torch.onnx")
        torch.onnx.export(
            module, (example,), str(path), input_names=inputs, output_names=outputs, dynamic_axes=axes,
            opset_version=opset, dynamo=False,
        )  # fmt: skip


def _set_metadata(path: Path, record: dict) -> None:
    """Store the export record in the graph's metadata (key `plstitch`)."""
    import onnx

    model = onnx.load(str(path))
    entry = model.metadata_props.add()
    entry.key, entry.value = "plstitch", json.dumps(record)
    onnx.save(model, str(path))


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def read_export(folder: str | Path) -> dict:
    """An export folder's `onnx.json` (one line when the folder is a probe that was not exported)."""
    return read_onnx_record(folder)


class OnnxHead(nn.Module):
    """A probe head run by onnxruntime (`head.onnx`): features [T, D] -> logits [T, C] (a regression
    probe's: minutes [T, K], from features and, with ``--elapsed``, the elapsed minutes)."""

    def __init__(self, session: Any, output: str = "logits") -> None:
        super().__init__()
        self.session, self.output = session, output

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = np.ascontiguousarray(features.detach().cpu().numpy(), dtype=np.float32)
        return torch.from_numpy(self.session.run([self.output], {"features": x})[0])


class OnnxProbeEncoder(ProbeEncoder):
    """The probe's encoder as `recognizer.onnx` in onnxruntime: prepared uint8 crops -> features."""

    def __init__(self, session: Any, plan: FramePlan, spec: str) -> None:
        device = torch.device("cpu")
        super().__init__(encoder=session, plan=plan, device=device, precision="fp32", runtime="onnxruntime")
        self._spec = spec

    @property
    def spec(self) -> str:
        return self._spec

    def encode(self, crops: torch.Tensor) -> torch.Tensor:
        frames = np.ascontiguousarray(crops.cpu().numpy(), dtype=np.uint8)
        return torch.from_numpy(self.encoder.run(["features"], {"frames": frames})[0])


def load_onnx_runtime(probe: Probe, options: PredictOptions) -> tuple[Probe, OnnxProbeEncoder]:
    """The probe with its head and encoder run by onnxruntime from its export folder (the CUDA provider on a
    CUDA device when onnxruntime has it, else the CPU)."""
    ort = require_onnxruntime()
    if probe.source.get("hub") and not (probe.folder / ONNX_JSON).is_file():
        fetch_hub_export(probe)  # a published export: its graphs from the same commit
    record = check_export(probe.folder, sha256_file(probe.folder / PROBE_WEIGHTS), probe.name)
    providers = ["CPUExecutionProvider"]
    if (
        str(options.device or "").startswith("cuda")
        and "CUDAExecutionProvider" in ort.get_available_providers()
    ):
        providers.insert(0, "CUDAExecutionProvider")
    session = ort.InferenceSession(str(probe.folder / RECOGNIZER), providers=providers)
    head = ort.InferenceSession(str(probe.folder / HEAD), providers=providers)
    values = dict(record["plan"])
    values["crop"] = tuple(values["crop"])
    values["mean"], values["std"] = tuple(values["mean"]), tuple(values["std"])
    plan = FramePlan(**values, crop_black_margin=bool(record.get("crop_black_margin")))
    model = OnnxProbeEncoder(session, plan, str(probe.encoder.get("spec")))
    return replace(probe, head=OnnxHead(head, record.get("head_output", "logits"))), model

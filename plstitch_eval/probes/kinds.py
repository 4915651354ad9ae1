"""Probe kinds: a registry mapping a kind's name to the builder of its empty head, and the heads shipped.

A *kind* names a builder in a registry (`register_probe_kind`): ``builder(settings, feature_dim,
num_classes)`` returns an empty head that the weights fill strictly (`fill_head`). Kinds shipped: ``linear``
(`LinearProbeHead`, the chosen head of a linear-probe grid) and ``temporal`` (`TemporalProbeHead` around an
MS-TCN). Every head maps one video's features ``[T, D]`` to logits ``[T, C]``. A regression task's probe
(`RegressionHead`, `build_head`) wraps such a head: its outputs times the target scale, within the task's
bounds, in minutes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from plstitch_eval.hub.convert import state_dict_mismatch
from plstitch_eval.linear_grid import LinearProbeResult
from plstitch_eval.probes.probe import RESAVE_FIX, ProbeError

Builder = Callable[[dict, int, int], nn.Module]
Wrapper = Callable[[nn.Module], nn.Module]


@dataclass(frozen=True)
class ProbeKind:
    builder: Builder
    wrap: Wrapper | None = None


_KINDS: dict[str, ProbeKind] = {}


def register_probe_kind(kind: str, builder: Builder, wrap: Wrapper | None = None) -> None:
    """Register `builder(settings, feature_dim, num_classes) -> head` under `kind` (the dispatch of load).

    Why: a new head type adds a builder, not a branch in `save_probe` / `load_probe`. `wrap`, if given, turns
    a bare model handed to `save_probe` into the head (e.g. an MS-TCN into a `TemporalProbeHead`).
    Re-registering a kind with the same builder is a no-op; another builder is refused.
    """
    known = _KINDS.get(kind)
    if known is not None and (known.builder is not builder or known.wrap is not wrap):
        raise ProbeError(
            f"probe kind {kind!r} is already registered with another builder; pick another name."
        )
    _KINDS[kind] = ProbeKind(builder, wrap)


def probe_kinds() -> list[str]:
    """Names of the registered probe kinds."""
    return sorted(_KINDS)


def registered_kind(kind: str, where: str) -> ProbeKind:
    if kind not in _KINDS:
        raise ProbeError(
            f"{where}: probe kind {kind!r} is unknown; known kinds: {', '.join(probe_kinds())} "
            "(a newer plstitch may know it)."
        )
    return _KINDS[kind]


# ------------------------------------------------------------------------------------------------- heads
class LinearProbeHead(nn.Module):
    """The chosen head of a linear-probe grid: ``logits = ((x - mean) / std) @ weight + bias``.

    Same arithmetic, in the same order, as `LinearGrid.logits(head=...)`, so the logits are equal.
    """

    causal = True  # frame t's logits depend on frame t only

    def __init__(self, mean: torch.Tensor, std: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", mean.detach().float().cpu().clone())
        self.register_buffer("std", std.detach().float().cpu().clone())
        self.weight = nn.Parameter(weight.detach().float().cpu().clone(), requires_grad=False)
        self.bias = nn.Parameter(bias.detach().float().cpu().clone(), requires_grad=False)

    @classmethod
    def empty(cls, feature_dim: int, num_classes: int) -> LinearProbeHead:
        """A zero head of the right shapes, to be filled by a strict state-dict load."""
        d, c = int(feature_dim), int(num_classes)
        return cls(torch.zeros(d), torch.ones(d), torch.zeros(d, c), torch.zeros(c))

    @classmethod
    def from_result(cls, result: LinearProbeResult) -> LinearProbeHead:
        """The head `result` chose (`best_head`) out of its grid, with the grid's standardisation."""
        grid, best = result.grid, result.best_head
        return cls(grid.mean, grid.std, grid.weight[:, best], grid.bias[best])

    @property
    def feature_dim(self) -> int:
        return int(self.weight.shape[0])

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return ((features - self.mean) / self.std) @ self.weight + self.bias


class TemporalProbeHead(nn.Module):
    """One video's features ``[T, D]`` -> the last stage's logits ``[T, C]`` of a multi-stage TCN.

    The wrapped model takes ``[B, D, T]`` (and a mask, None here) and returns stage logits ``[S, B, C, T]``.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    @property
    def causal(self) -> bool | None:
        value = getattr(self.model, "causal", None)
        return None if value is None else bool(value)

    @property
    def feature_dim(self) -> int | None:
        value = getattr(self.model, "in_dim", None)
        if value is not None:
            return int(value)
        conv = next((m for m in self.model.modules() if isinstance(m, nn.Conv1d)), None)
        return None if conv is None else int(conv.in_channels)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        stages = self.model(features.T[None], None)
        return stages[-1][0].T


def _build_linear(settings: dict, feature_dim: int, num_classes: int) -> nn.Module:
    return LinearProbeHead.empty(feature_dim, num_classes)


class RegressionHead(nn.Module):
    """A regression probe's head: ``clamp(inner(x) * scale, low, high)``, minutes within the task's bounds.

    Why: heads train on targets divided by a scale (`protocols.regression.target_scale`); the probe gives
    minutes, as the protocol scored them. `extra_inputs` columns (the elapsed minutes with ``--elapsed``)
    follow the encoder's features in the inner head's input.
    """

    def __init__(self, inner: nn.Module, scale: float, low: float | None, high: float | None, extra: int = 0):
        super().__init__()
        self.inner = inner
        self.extra_inputs = int(extra)
        self.register_buffer("scale", torch.tensor(float(scale)))
        self.register_buffer("low", torch.tensor(-math.inf if low is None else float(low)))
        self.register_buffer("high", torch.tensor(math.inf if high is None else float(high)))

    @property
    def causal(self) -> bool | None:
        return getattr(self.inner, "causal", None)

    @property
    def feature_dim(self) -> int | None:
        """The encoder's feature dim D (the inner head takes D + `extra_inputs` columns)."""
        value = getattr(self.inner, "feature_dim", None)
        return None if value is None else int(value) - self.extra_inputs

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.clamp(self.inner(inputs) * self.scale, self.low, self.high)


def _build_temporal(settings: dict, feature_dim: int, num_classes: int) -> nn.Module:
    # Imported here: the temporal package imports this module to save its probes (a real cycle).
    from plstitch_eval.temporal.mstcn import MultiStageTCN

    keys = ("stages", "layers", "channels", "dropout", "causal")
    missing = [k for k in keys if k not in settings]
    if missing:
        raise ProbeError(f"temporal probe settings lack {', '.join(missing)}; pass asdict(TemporalConfig).")
    sizes = {k: settings[k] for k in keys}
    model = MultiStageTCN(feature_dim, num_classes, **sizes, refine=settings.get("refine", "softmax"))
    return TemporalProbeHead(model)


def _wrap_temporal(head: nn.Module) -> nn.Module:
    return head if isinstance(head, TemporalProbeHead) else TemporalProbeHead(head)


def is_regression(task: Mapping | None) -> bool:
    """Whether a probe's task block names a regression head (absent: the phase classifier)."""
    return bool(task) and task.get("head") == "regression"


def build_head(kind: str, settings: dict, feature_dim: int, outputs: int, task: Mapping | None, where: str):
    """The empty head of a probe: `kind`'s builder, wrapped in a `RegressionHead` for a regression task
    (scale and bounds are buffers, filled by the strict load like the weights)."""
    entry = registered_kind(kind, where)
    if not is_regression(task):
        return entry.builder(settings, feature_dim, outputs)
    extra = 1 if task.get("elapsed") else 0
    return RegressionHead(entry.builder(settings, feature_dim + extra, outputs), 1.0, None, None, extra)


register_probe_kind("linear", _build_linear)
register_probe_kind("temporal", _build_temporal, wrap=_wrap_temporal)


def fill_head(head: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Strict state-dict load; one-line `ProbeError` listing missing / unexpected / mis-shaped keys."""
    expected = head.state_dict()
    missing, unexpected, wrong_keys = state_dict_mismatch(expected, state)
    wrong = [f"{k} {list(state[k].shape)} != {list(expected[k].shape)}" for k in wrong_keys]
    if missing or unexpected or wrong:
        parts = [
            f"{name} {', '.join(keys[:10])}{' …' if len(keys) > 10 else ''}"
            for name, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong))
            if keys
        ]
        raise ProbeError(
            f"{source} does not fill the {type(head).__name__} exactly ({'; '.join(parts)}); {RESAVE_FIX}."
        )
    try:
        head.load_state_dict(state, strict=True)
    except RuntimeError as exc:  # keys and shapes were checked above; what is left is e.g. a dtype
        raise ProbeError(f"{source} does not load into the {type(head).__name__}; {RESAVE_FIX}.") from exc

"""Train an MS-TCN on per-video feature sequences and keep the epoch that scores best on validation videos.

Training is MS-TCN's (yabufarha/ms-tcn ``main.py`` / ``model.py``): Adam (PyTorch defaults, lr 5e-4), one
video per step, the videos shuffled every epoch, loss ``mstcn_loss`` (cross-entropy + 0.15 x truncated MSE,
summed over stages). After every epoch the model predicts the validation videos (last stage, argmax) and is
scored with ``select_metric``; the weights of the best epoch are kept (ties: the earliest). The run is
deterministic given ``seed``, the device and the CPU thread count: the initialisation and dropout draw from
torch's global generator seeded inside ``torch.random.fork_rng`` (the caller's generator state is left as it
was; the same seed builds the same initial weights as MS-TCN's code after ``torch.manual_seed(seed)``), and
the video order from its own ``torch.Generator``. The thread count changes the float rounding of the
convolutions, so it is fixed by default (``num_threads=1``, ``DEFAULT_THREADS``) rather than taken from the
machine's cores, and every fit records the threads and device it ran on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from rich.progress import TextColumn

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.metrics.frames import frame_accuracy, macro_f1
from plstitch_eval.metrics.segments import edit_score
from plstitch_eval.store.features import VideoFeatures
from plstitch_eval.temporal.mstcn import MultiStageTCN, mstcn_loss
from plstitch_eval.utils.console import progress_bar
from plstitch_eval.utils.device import autocast, resolve_device, resolve_precision, torch_threads

SELECT_METRICS = ("accuracy", "macro_f1", "edit")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DEFAULT_THREADS = 1  # CPU threads of a fit: fixed, so results do not follow the machine's core count
IGNORE_INDEX = -100  # MS-TCN's padding label; our unlabelled frames (-1) are mapped to it


@dataclass
class TemporalConfig:
    """MS-TCN probe settings (defaults: MS-TCN as published), checked on construction.

    TeCNO's settings: ``causal=True, stages=2, layers=9, channels=45, lr=7e-5, epochs=12`` (docs/temporal.md).
    """

    stages: int = 4
    layers: int = 10
    channels: int = 64
    dropout: float = 0.5
    causal: bool = False
    lr: float = 5e-4
    epochs: int = 50
    batch_size: int = 1  # videos per step (MS-TCN: 1)
    smooth_weight: float = 0.15  # weight of the truncated MSE smoothing loss
    tau: float = 4.0  # truncation of the smoothing loss: clamp(squared log-prob difference, 0, tau^2)
    weight_decay: float = 0.0  # Adam's (L2) weight decay; MS-TCN uses none
    # on the validation videos; macro_f1 frame-pooled
    select_metric: str = field(default="accuracy", metadata={"choices": SELECT_METRICS})
    seed: int = 0
    device: str = "cpu"  # cpu | cuda[:N] | auto
    # bf16 / fp16: autocast on CUDA; auto: bf16 on CUDA, fp32 elsewhere
    precision: str = field(default="fp32", metadata={"choices": PRECISIONS})
    # CPU threads (they change the float rounding, so the results): a fixed default, not the machine's cores;
    # None = torch's current setting (its default: the physical cores, or OMP_NUM_THREADS)
    num_threads: int | None = DEFAULT_THREADS

    def __post_init__(self) -> None:
        for name in ("stages", "layers", "channels", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"temporal {name} must be >= 1 (got {getattr(self, name)}).")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"temporal dropout must be in [0, 1) (got {self.dropout}).")
        if self.lr <= 0 or self.weight_decay < 0 or self.smooth_weight < 0 or self.tau <= 0:
            raise ConfigError(
                f"temporal lr and tau must be > 0, weight_decay and smooth_weight >= 0 (got lr={self.lr}, "
                f"tau={self.tau}, weight_decay={self.weight_decay}, smooth_weight={self.smooth_weight})."
            )
        if self.select_metric not in SELECT_METRICS:
            raise ConfigError(
                f"temporal select_metric {self.select_metric!r} unknown; choose one of "
                f"{', '.join(SELECT_METRICS)}."
            )
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"temporal precision {self.precision!r} unknown; choose one of auto, fp32, bf16, fp16."
            )
        if self.num_threads is not None and self.num_threads < 1:
            raise ConfigError(f"temporal num_threads must be >= 1 or unset (got {self.num_threads}).")

    def build_model(self, in_dim: int, num_classes: int) -> MultiStageTCN:
        """The MS-TCN these settings describe (PyTorch-default init from torch's global generator)."""
        return MultiStageTCN(
            in_dim, num_classes, self.stages, self.layers, self.channels, self.dropout, self.causal
        )


@dataclass
class TemporalProbeResult:
    """The model at its best validation epoch (eval mode), that epoch (1-based), the per-epoch curves, and
    what else changes the numbers: the CPU threads torch used and the device trained on."""

    model: MultiStageTCN
    best_epoch: int
    val_scores: list[float]  # select_metric on the validation videos after epoch 1, 2, ...
    train_losses: list[float] = field(default_factory=list)  # mean loss per step of each epoch
    threads: int = 0  # torch.get_num_threads() during the fit
    device: str = ""  # e.g. "cpu", "cuda:0"

    def predict(self, features: np.ndarray | torch.Tensor) -> np.ndarray:
        """Class ids [T] of one video's features [T, D] (last stage, argmax)."""
        return predict_video(self.model, features)


# ------------------------------------------------------------------------------------------- prediction
def video_logits(model: MultiStageTCN, features: np.ndarray | torch.Tensor) -> torch.Tensor:
    """Last-stage logits [C, T] (float32, CPU) of one video's features [T, D]; the model runs in eval mode.

    Why: MS-TCN predicts each test video whole, with every frame unmasked.
    """
    device = next(model.parameters()).device
    x = torch.as_tensor(np.asarray(features, np.float32) if isinstance(features, np.ndarray) else features)
    if x.ndim != 2:
        raise EvaluationError(f"Video features must be [T, D], got {list(x.shape)}.")
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            logits = model(x.float().T.unsqueeze(0).to(device, non_blocking=True))[-1, 0]
    finally:
        model.train(was_training)
    return logits.float().cpu()


def predict_video(model: MultiStageTCN, features: np.ndarray | torch.Tensor) -> np.ndarray:
    """Class ids [T] (int64) of one video's features [T, D]: argmax of the last stage (ties: lowest id)."""
    return video_logits(model, features).argmax(0).numpy()


# --------------------------------------------------------------------------------------------- training
@dataclass
class _Video:
    features: torch.Tensor  # [D, T] on the training device
    labels: torch.Tensor  # [T], unlabelled = IGNORE_INDEX


def _to_device(items: Sequence[VideoFeatures], device: torch.device) -> list[_Video]:
    out = []
    for item in items:
        x = torch.from_numpy(np.ascontiguousarray(np.asarray(item.features, np.float32).T))
        y = torch.from_numpy(np.asarray(item.labels, np.int64)).masked_fill(
            torch.from_numpy(np.asarray(item.labels) < 0), IGNORE_INDEX
        )
        if device.type == "cuda":
            x, y = x.pin_memory(), y.pin_memory()
        out.append(_Video(x.to(device, non_blocking=True), y.to(device, non_blocking=True)))
    return out


def _pad_batch(videos: Sequence[_Video]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Videos as MS-TCN's batch: features [B, D, T_max] zero-padded, labels [B, T_max] padded with
    IGNORE_INDEX, mask [B, 1, T_max] (1 = a frame of the video)."""
    longest = max(v.features.shape[1] for v in videos)
    first = videos[0].features
    x = first.new_zeros(len(videos), first.shape[0], longest)
    y = torch.full((len(videos), longest), IGNORE_INDEX, dtype=torch.long, device=first.device)
    mask = first.new_zeros(len(videos), 1, longest)
    for i, v in enumerate(videos):
        frames = v.features.shape[1]
        x[i, :, :frames], y[i, :frames], mask[i, :, :frames] = v.features, v.labels, 1.0
    return x, y, mask


def _check_inputs(train: Sequence[VideoFeatures], val: Sequence[VideoFeatures], num_classes: int) -> int:
    if not train:
        raise EvaluationError("No training videos for the temporal probe; the training split is empty.")
    if not val:
        raise EvaluationError(
            "No validation videos to choose the temporal probe's epoch on; pass videos for `val` (a store's "
            "'val' split, or training videos held out with plstitch_eval.splits.holdout_by_video)."
        )
    dims = {np.shape(it.features)[1] for it in (*train, *val)}
    if len(dims) != 1:
        raise EvaluationError(f"Videos have features of different sizes {sorted(dims)}; use one store.")
    for item in (*train, *val):
        labels = np.asarray(item.labels)
        if labels.max(initial=-1) >= num_classes:
            raise EvaluationError(
                f"Video {item.video!r} has label {int(labels.max())} but the probe has {num_classes} classes."
            )
        if len(labels) == 0 or not (labels >= 0).any():
            raise EvaluationError(
                f"Video {item.video!r} has no labelled frames (empty ground truth); remove it from the split."
            )
    return dims.pop()


def _cuda_index(device: torch.device) -> int:
    return torch.cuda.current_device() if device.index is None else device.index


def _val_score(
    model: MultiStageTCN,
    val: Sequence[VideoFeatures],
    metric: str,
    num_classes: int,
    background: Sequence[int],
) -> float:
    preds = [predict_video(model, it.features) for it in val]
    gts = [np.asarray(it.labels, np.int64) for it in val]
    if metric == "accuracy":
        return frame_accuracy(preds, gts)
    if metric == "macro_f1":
        return macro_f1(preds, gts, "pooled", num_classes)
    return edit_score(preds, gts, background)


def fit_temporal(
    train: Sequence[VideoFeatures],
    val: Sequence[VideoFeatures],
    num_classes: int,
    config: TemporalConfig | None = None,
    progress: bool = True,
    background: Sequence[int] = (),
) -> TemporalProbeResult:
    """Train an MS-TCN on the training videos and keep the epoch best on the validation videos.

    Frames labelled -1 are ignored by the loss but still fed to the network (they are real frames).
    `background`: class ids dropped from segments when `select_metric` is ``edit``. `progress`: a bar per
    epoch on stderr (plain lines when stderr is a file; muted by --quiet). The result records the threads
    and device the fit ran on.
    """
    config = config or TemporalConfig()
    in_dim = _check_inputs(train, val, num_classes)
    device = resolve_device(config.device)
    precision = resolve_precision(config.precision, device)
    rng_devices = [] if device.type != "cuda" else [_cuda_index(device)]
    with torch_threads(config.num_threads), torch.random.fork_rng(devices=rng_devices):
        torch.manual_seed(config.seed)
        model = config.build_model(in_dim, num_classes).to(device)
        fit = _train(
            model, _to_device(train, device), val, num_classes, config, precision, progress, background
        )
        fit.threads = torch.get_num_threads()
    fit.device = str(device if device.type != "cuda" else torch.device("cuda", _cuda_index(device)))
    return fit


def _train(
    model: MultiStageTCN,
    videos: list[_Video],
    val: Sequence[VideoFeatures],
    num_classes: int,
    config: TemporalConfig,
    precision: str,
    progress: bool,
    background: Sequence[int],
) -> TemporalProbeResult:
    device = next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    order_gen = torch.Generator().manual_seed(config.seed)
    best_state, best_epoch, val_scores, losses = None, 0, [], []
    with progress_bar(TextColumn("{task.fields[status]}"), disable=not progress) as bar:
        task = bar.add_task(
            f"MS-TCN seed {config.seed} ({config.select_metric})", total=config.epochs, status=""
        )
        for epoch in range(1, config.epochs + 1):
            model.train()
            order = torch.randperm(len(videos), generator=order_gen).tolist()
            epoch_loss = 0.0
            for start in range(0, len(order), config.batch_size):
                x, y, mask = _pad_batch([videos[i] for i in order[start : start + config.batch_size]])
                optimizer.zero_grad()
                with autocast(device, precision):
                    stage_logits = model(x, mask)
                loss = mstcn_loss(
                    stage_logits.float(), y, mask, config.smooth_weight, config.tau, IGNORE_INDEX
                )
                loss.backward()
                optimizer.step()
                epoch_loss += loss.item()
            if not np.isfinite(epoch_loss):
                raise EvaluationError(
                    f"MS-TCN loss became {epoch_loss} in epoch {epoch}; lower --lr or check the features."
                )
            losses.append(epoch_loss / -(-len(order) // config.batch_size))
            val_scores.append(_val_score(model, val, config.select_metric, num_classes, background))
            if best_state is None or val_scores[-1] > val_scores[best_epoch - 1]:
                best_epoch = epoch
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            bar.update(
                task,
                advance=1,
                status=f"val {val_scores[-1]:.1f}, best {val_scores[best_epoch - 1]:.1f} @{best_epoch}",
            )
    model.load_state_dict(best_state)
    model.eval()
    return TemporalProbeResult(model, best_epoch, val_scores, losses)

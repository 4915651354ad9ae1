"""Linear probes on cached frozen features: a grid of heads trained together in one pass (DINOv2 style).

All heads (learning rate x weight decay) are stacked into one ``D -> H*C`` linear map, so every batch costs
one matmul forward and one backward for the whole grid. Gradients of the (optionally class-weighted)
softmax cross-entropy are computed in closed form, ``dL/dlogits = w_i * (softmax - onehot) / sum(w)``, and
each head is stepped with its own lr/wd (SGD with momentum, or AdamW) under a cosine schedule to 0.
Every head starts from the same seeded initialisation and sees the same batches, so a head of the grid
equals that head trained alone (up to float rounding). The best head is chosen on a validation set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from rich.progress import TextColumn

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.metrics.frames import macro_scores
from plstitch_eval.utils.console import progress_bar
from plstitch_eval.utils.device import resolve_device, torch_threads

OPTIMIZERS = ("sgd", "adamw")
SELECT_METRICS = ("accuracy", "macro_f1")


@dataclass
class LinearConfig:
    """Settings of the linear-probe grid, checked on construction (ConfigError names field and choices)."""

    lrs: Sequence[float] = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
    weight_decays: Sequence[float] = (0.0, 1e-4, 1e-3)
    optimizer: str = field(default="sgd", metadata={"choices": OPTIMIZERS})  # sgd: momentum 0.9 (DINOv2)
    momentum: float = 0.9
    epochs: int = 20
    batch_size: int = 1024
    standardize: bool = True
    balance_classes: bool = False
    # on the validation set; macro_f1 frame-pooled
    select_metric: str = field(default="accuracy", metadata={"choices": SELECT_METRICS})
    seed: int = 0
    device: str = "auto"
    num_threads: int | None = None  # CPU threads; None = 1 for small steps (OpenMP overhead), else torch's

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(
                f"linear-probe optimizer {self.optimizer!r} unknown; choose one of {', '.join(OPTIMIZERS)}."
            )
        if self.select_metric not in SELECT_METRICS:
            raise ConfigError(
                f"linear-probe select_metric {self.select_metric!r} unknown; choose one of "
                f"{', '.join(SELECT_METRICS)}."
            )
        if not self.lrs or not self.weight_decays:
            raise ConfigError("linear-probe lrs and weight_decays need at least one value each.")
        if min(self.lrs) <= 0 or min(self.weight_decays) < 0:
            raise ConfigError(
                f"linear-probe lrs must be > 0 and weight_decays >= 0 (got {list(self.lrs)}, "
                f"{list(self.weight_decays)})."
            )
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError(
                f"linear-probe epochs and batch_size must be >= 1 (got {self.epochs}, {self.batch_size})."
            )
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"linear-probe momentum must be in [0, 1) (got {self.momentum}).")
        if self.num_threads is not None and self.num_threads < 1:
            raise ConfigError(f"linear-probe num_threads must be >= 1 or unset (got {self.num_threads}).")


@dataclass
class LinearGrid:
    """Trained heads: weights [D, H, C], biases [H, C], the feature standardisation and each head's lr/wd."""

    weight: torch.Tensor
    bias: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    heads: list[tuple[float, float]]
    train_loss: list[float] = field(default_factory=list)

    @property
    def num_heads(self) -> int:
        return len(self.heads)

    def logits(self, features: np.ndarray, head: int | None = None, batch_size: int = 65536) -> np.ndarray:
        """Logits [H, N, C] of every head (or [N, C] of one head) for features [N, D]."""
        dev = self.weight.device
        out = []
        with torch.no_grad():
            for start in range(0, len(features), batch_size):
                x = torch.as_tensor(np.asarray(features[start : start + batch_size], np.float32)).to(dev)
                x = (x - self.mean) / self.std
                if head is None:
                    z = (x @ self.weight.flatten(1)).view(len(x), self.num_heads, -1) + self.bias
                    out.append(z.transpose(0, 1).cpu().numpy())
                else:
                    out.append((x @ self.weight[:, head] + self.bias[head]).cpu().numpy())
        axis = 1 if head is None else 0
        if not out:
            c = self.bias.shape[-1]
            return np.zeros((self.num_heads, 0, c) if head is None else (0, c), np.float32)
        return np.concatenate(out, axis=axis)

    def predict(self, features: np.ndarray, head: int | None = None) -> np.ndarray:
        """Predicted class ids [H, N] (or [N] for one head); ties go to the lowest class id."""
        return self.logits(features, head).argmax(-1)


def class_weights(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Inverse-frequency weights N / (C_present * n_c); 0 for classes absent from training."""
    counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
    present = counts > 0
    weights = np.zeros(num_classes)
    weights[present] = counts.sum() / (present.sum() * counts[present])
    return weights


def check_training_rows(features: np.ndarray, targets: np.ndarray, what: str) -> None:
    """Refuse in one line a probe's training set without frames, with a target row count other than the
    frames', or with non-finite features (`what` names the probe: `tool`, `regression`)."""
    if len(features) == 0 or len(features) != len(targets):
        raise EvaluationError(
            f"The {what} probe needs one target row per training frame and at least one frame "
            f"(got {len(features)} frames, {len(targets)} target rows)."
        )
    if not np.isfinite(features).all():
        raise EvaluationError("Training features contain NaN or inf; re-extract them.")


def train_linear_grid(
    features: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    config: LinearConfig | None = None,
    progress: bool = False,
) -> LinearGrid:
    """Train all (lr, wd) heads of `config` together on features [N, D] and labels [N].

    `progress`: a bar over the steps on stderr (plain lines every few seconds when stderr is a file; muted
    by --quiet).
    """
    config = config or LinearConfig()
    threads = config.num_threads
    if threads is None and resolve_device(config.device).type == "cpu":
        step_flops = config.batch_size * np.shape(features)[-1] * num_classes * len(config.lrs)
        threads = 1 if step_flops * len(config.weight_decays) < 5e7 else None
    with torch_threads(threads):
        return _train_grid(features, labels, num_classes, config, progress)


def _train_grid(
    features: np.ndarray, labels: np.ndarray, num_classes: int, config: LinearConfig, progress: bool = False
) -> LinearGrid:
    features = np.asarray(features, dtype=np.float32)
    labels = np.asarray(labels, dtype=np.int64)
    if len(features) != len(labels):
        raise EvaluationError(f"{len(features)} feature rows but {len(labels)} labels; one label per frame.")
    if len(labels) == 0:
        raise EvaluationError("No training frames for the linear probe; the training split is empty.")
    if labels.min() < 0 or labels.max() >= num_classes:
        raise EvaluationError(
            f"Training labels must lie in [0, {num_classes}); drop unlabelled frames first."
        )
    if not np.isfinite(features).all():
        raise EvaluationError("Training features contain NaN or inf; re-extract them.")
    device = resolve_device(config.device)
    run = GridTraining.start(features, num_classes, config, device)
    y_all = torch.from_numpy(labels).to(device)
    sample_w = torch.ones(num_classes, device=device, dtype=torch.float32)
    if config.balance_classes:
        sample_w = torch.from_numpy(class_weights(labels, num_classes)).float().to(device)
    epoch_loss = torch.zeros(run.num_heads, device=device)
    steps = config.epochs * run.steps_per_epoch
    label = f"linear probe ({run.num_heads} heads)"
    with progress_bar(TextColumn("{task.fields[epoch]}"), disable=not progress) as bar:
        task = bar.add_task(label, total=steps, epoch=f"epoch 1/{config.epochs}")
        for epoch in range(1, config.epochs + 1):
            epoch_loss.zero_()
            for idx in run.batches():
                x, y = run.x[idx], y_all[idx]
                w = sample_w[y]
                rows = torch.arange(len(x), device=device)
                logp = torch.log_softmax(run.logits(x), dim=-1)
                grad = logp.exp()
                grad[rows, :, y] -= 1.0
                norm = w.sum().clamp_min(1e-12)
                grad *= (w / norm).view(-1, 1, 1)
                epoch_loss -= (logp[rows, :, y] * (w / norm).view(-1, 1)).sum(0)
                run.update(x, grad)
                if progress:  # not even the bookkeeping of a disabled bar in the tight loop
                    bar.update(task, advance=1, epoch=f"epoch {epoch}/{config.epochs}")
    losses = (epoch_loss / run.steps_per_epoch).cpu().tolist()
    return run.grid(losses)


@dataclass
class GridTraining:
    """Every (lr, wd) head of a grid training together towards K outputs per head; shared by the phase probe
    (softmax over classes, above) and the tool probe (one logistic per tool, `tool_presence`).

    Holds the standardised training features on the device, the weights [D, H, K] (one seeded
    initialisation repeated for every head), the biases [H, K], each head's lr and wd [1, H, 1], the
    optimiser states and the seeded generator, which then orders the batches.
    """

    config: LinearConfig
    heads: list[tuple[float, float]]
    generator: torch.Generator
    x: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor
    lr0: torch.Tensor
    wd: torch.Tensor
    state_w: list[torch.Tensor]
    state_b: list[torch.Tensor]
    step: int = 0

    @classmethod
    def start(
        cls, features: np.ndarray, outputs: int, config: LinearConfig, device: torch.device
    ) -> GridTraining:
        """Set up the grid of `config` on float32 features [N, D] for `outputs` logits per head."""
        gen = torch.Generator().manual_seed(config.seed)
        heads = [(float(lr), float(wd)) for lr in config.lrs for wd in config.weight_decays]
        n_heads, dim = len(heads), features.shape[1]
        x = torch.from_numpy(features)
        if device.type == "cuda":
            x = x.pin_memory()
        x = x.to(device, non_blocking=True)
        if config.standardize:
            mean, std = x.mean(0), x.std(0, unbiased=False).clamp_min(1e-6)
        else:
            mean, std = torch.zeros(dim, device=device), torch.ones(dim, device=device)
        weight = (torch.randn(dim, 1, outputs, generator=gen) * 0.01).repeat(1, n_heads, 1).to(device)
        bias = torch.zeros(n_heads, outputs, device=device)
        lr0 = torch.tensor([h[0] for h in heads], device=device).view(1, n_heads, 1)
        wd = torch.tensor([h[1] for h in heads], device=device).view(1, n_heads, 1)
        state_w = [torch.zeros_like(weight), torch.zeros_like(weight)]
        state_b = [torch.zeros_like(bias), torch.zeros_like(bias)]
        return cls(config, heads, gen, (x - mean) / std, mean, std, weight, bias, lr0, wd, state_w, state_b)

    @property
    def num_heads(self) -> int:
        return len(self.heads)

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(len(self.x) / self.config.batch_size)

    def batches(self) -> Iterator[torch.Tensor]:
        """One epoch's batches of row indices, in a fresh order drawn from the generator."""
        n, size = len(self.x), self.config.batch_size
        order = torch.randperm(n, generator=self.generator).to(self.x.device)
        for start in range(0, n, size):
            yield order[start : start + size]

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Every head's logits [B, H, K] of standardised rows [B, D]: one matmul for the whole grid."""
        return (x @ self.weight.flatten(1)).view(len(x), self.num_heads, self.bias.shape[-1]) + self.bias

    def update(self, x: torch.Tensor, grad: torch.Tensor) -> None:
        """Step every head with its own lr (cosine schedule to 0 over the run) and wd, from the loss gradient
        with respect to the logits [B, H, K] of the rows `x`; biases are not decayed."""
        dim, n_heads, k = self.weight.shape
        g_w = (x.T @ grad.flatten(1)).view(dim, n_heads, k)
        total = self.config.epochs * self.steps_per_epoch
        lr = self.lr0 * 0.5 * (1.0 + math.cos(math.pi * self.step / total))
        step_heads(self.config, self.weight, g_w, self.state_w, lr, self.wd, self.step)
        step_heads(self.config, self.bias, grad.sum(0), self.state_b, lr[0], self.wd[0] * 0.0, self.step)
        self.step += 1

    def train(
        self, grad: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], label: str, progress: bool = False
    ) -> LinearGrid:
        """Every epoch's batches, each step from `grad(logits [B, H, K], row indices)`, a bar on stderr;
        the trained heads. Why here: the tool probe and the regression probe differ only in that gradient."""
        epochs = self.config.epochs
        with progress_bar(TextColumn("{task.fields[epoch]}"), disable=not progress) as bar:
            task = bar.add_task(label, total=epochs * self.steps_per_epoch, epoch=f"epoch 1/{epochs}")
            for epoch in range(1, epochs + 1):
                for idx in self.batches():
                    x = self.x[idx]
                    self.update(x, grad(self.logits(x), idx))
                    if progress:
                        bar.update(task, advance=1, epoch=f"epoch {epoch}/{epochs}")
        return self.grid()

    def grid(self, train_loss: Sequence[float] = ()) -> LinearGrid:
        """The trained heads."""
        return LinearGrid(self.weight, self.bias, self.mean, self.std, self.heads, list(train_loss))


def step_heads(
    config: LinearConfig,
    param: torch.Tensor,
    grad: torch.Tensor,
    state: list[torch.Tensor],
    lr: torch.Tensor,
    wd: torch.Tensor,
    step: int,
) -> None:
    """One in-place SGD-momentum (coupled wd) or AdamW (decoupled wd) update with per-head lr/wd."""
    if config.optimizer == "sgd":
        buf = state[0]
        buf.mul_(config.momentum).add_(grad + wd * param)
        param.sub_(lr * buf)
        return
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    m, v = state
    m.mul_(beta1).add_(grad, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    m_hat = m / (1 - beta1 ** (step + 1))
    v_hat = v / (1 - beta2 ** (step + 1))
    param.mul_(1 - lr * wd)
    param.sub_(lr * m_hat / (v_hat.sqrt() + eps))


@dataclass
class LinearProbeResult:
    """The trained grid, the chosen head and every head's validation score."""

    grid: LinearGrid
    best_head: int
    val_scores: list[float]

    @property
    def best_lr(self) -> float:
        return self.grid.heads[self.best_head][0]

    @property
    def best_weight_decay(self) -> float:
        return self.grid.heads[self.best_head][1]

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Class ids predicted by the chosen head."""
        return self.grid.predict(features, self.best_head)


def _score(preds: np.ndarray, labels: np.ndarray, metric: str, num_classes: int) -> float:
    if metric == "accuracy":
        return float((preds == labels).mean() * 100.0)
    if metric == "macro_f1":
        return macro_scores(preds, labels, num_classes)["macro_f1_pooled"]
    raise ConfigError(f"Unknown selection metric {metric!r}; use accuracy or macro_f1.")


def fit_linear_probe(
    train_features: np.ndarray,
    train_labels: np.ndarray,
    val_features: np.ndarray,
    val_labels: np.ndarray,
    num_classes: int,
    config: LinearConfig | None = None,
    progress: bool = False,
) -> LinearProbeResult:
    """Train the grid on the training frames and keep the head that scores best on validation frames.

    Ties keep the earliest head in grid order (lr-major, then weight decay). `progress`: as in
    `train_linear_grid`.
    """
    config = config or LinearConfig()
    grid = train_linear_grid(train_features, train_labels, num_classes, config, progress)
    val_labels = np.asarray(val_labels, dtype=np.int64)
    if len(val_labels) == 0:
        raise EvaluationError("The validation split has no labelled frames; cannot choose a linear head.")
    preds = grid.predict(val_features)
    scores = [_score(p, val_labels, config.select_metric, num_classes) for p in preds]
    return LinearProbeResult(grid, int(np.argmax(scores)), scores)

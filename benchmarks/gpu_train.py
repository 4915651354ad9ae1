"""The training part of `benchmarks/gpu.py` (issue 45): the step before and after, side by side; a profile.

Variants, each from the same initial weights and RNG state on the same batches (already on the device):
- `before`: the trainer's step as it was before issue 45, written out here - torch's default AdamW, a host
  sync per micro-batch (the loss check), gradient clipping and the teacher EMA as per-parameter loops;
- `after`: the trainer's own step (`plstitch_train.trainer._LoopState`): fused AdamW on a GPU, foreach
  clipping and EMA, one host sync per step;
- `after+compile`: the same with `--compile` (torch.compile of the student and teacher modules).
Each runs `steps` steps; the first `warmup` are not timed. The losses of every step are kept, so `after`
is compared with `before` step by step (same losses within bf16 tolerance). `profile_step` runs
`torch.profiler` over steps of a variant and says where the time goes: per phase (the trainer's
`plstitch:*` ranges: each branch's forward, backward, clipping, optimizer, EMA, the loss sync) and per kernel
class (GEMM, attention, normalisation, softmax, element-wise, optimizer, copies), and the GPU's busy share.

Device-generic: the CPU runs it on a tiny config in tests/benchmarks/test_gpu_train.py.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from plstitch_eval.utils.device import autocast
from plstitch_eval.utils.distributed import DistInfo
from plstitch_train.config import TrainConfig
from plstitch_train.model import PLStitchModel
from plstitch_train.run.progress import LOSS_KEYS
from plstitch_train.schedules import Schedules, ramp_weight
from plstitch_train.trainer import _LoopState, adamw_kernels, compile_modules

VARIANTS = ("before", "after", "after+compile")
KERNEL_CLASSES = (  # (class, pattern on the kernel name), first match wins
    ("attention", r"flash|fmha|attention|sdpa|efficient_attention"),
    ("GEMM", r"gemm|sm90_xmma|cutlass|cublas|matmul|nvjet"),
    ("normalisation", r"layer_norm|LayerNorm|norm_kernel|batch_norm|welford"),
    ("softmax / log-softmax", r"softmax"),
    ("optimizer", r"adam|foreach|multi_tensor"),
    ("copies", r"copy|Memcpy|memcpy|Memset|cat|fill"),
    ("reductions", r"reduce|sum_|norm|topk|sort"),
    ("element-wise", r"elementwise|vectorized|unrolled|gelu|triton"),
)


@dataclass
class Bench:
    """What every variant starts from: the config, initial weights and RNG state, batches on the device."""

    config: TrainConfig
    state: dict[str, torch.Tensor]
    batches: list[dict[str, torch.Tensor]]
    device: torch.device
    precision: str
    epoch: float  # every branch on at full weight

    @classmethod
    def build(cls, config: TrainConfig, batches: list[dict], device: torch.device, precision: str) -> Bench:
        torch.manual_seed(0)
        model = PLStitchModel(config)
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        on_device = [{k: v.to(device, non_blocking=True) for k, v in b.items()} for b in batches]
        loss, optim = config.loss, config.optim
        epoch = float(loss.jigsaw_start_epoch + loss.jigsaw_ramp_epochs + optim.freeze_last_layer_epochs)
        return cls(config, state, on_device, device, precision, epoch + 1.0)

    def fresh_model(self) -> PLStitchModel:
        torch.manual_seed(0)
        model = PLStitchModel(self.config)
        model.load_state_dict(self.state, strict=True)
        return model.to(self.device).train()

    @property
    def base_step(self) -> int:
        """The schedules' step every variant uses (one step per epoch, so at `epoch`)."""
        return int(self.epoch)

    def schedules(self) -> Schedules:
        """lr, weight decay and momentum with one step per epoch, long enough for `base_step`."""
        return Schedules.from_settings(self.config.optim, self.base_step + 2, 1)


def legacy_step(bench: Bench, model: PLStitchModel, optimizer: torch.optim.Optimizer) -> Callable:
    """The step before issue 45: one host sync per micro-batch, per-parameter clip and EMA loops."""
    config, schedules = bench.config, bench.schedules()
    optim, clipped, base = config.optim, model.clipped_parameters(), bench.base_step

    def step(i: int, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        for group in optimizer.param_groups:
            group["lr"] = float(schedules.lr[base])
            group["weight_decay"] = float(schedules.weight_decay[base]) if group["apply_wd"] else 0.0
        weight = ramp_weight(config.loss.lambda_jigsaw, bench.epoch, config.loss.jigsaw_start_epoch,
                             config.loss.jigsaw_ramp_epochs)  # fmt: skip
        with autocast(bench.device, bench.precision):
            out = model(batch, int(bench.epoch), weight)
        keys = [k for k in LOSS_KEYS if k in out]
        values = dict(zip(keys, torch.stack([out[k].detach().float() for k in keys]).tolist(), strict=True))
        if not all(math.isfinite(v) for v in values.values()):
            raise RuntimeError(f"non-finite loss {values}")
        out["loss"].backward()
        if optim.clip_grad > 0:
            for grad in (p.grad for p in clipped if p.grad is not None):
                grad.mul_((optim.clip_grad / (grad.norm(2) + 1e-6)).clamp(max=1.0))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        momentum = float(schedules.momentum[base])
        student = dict(model.student.named_parameters())
        with torch.no_grad():
            for name, teacher_param in model.teacher.named_parameters():
                if name in student:
                    teacher_param.mul_(momentum).add_(student[name].detach(), alpha=1 - momentum)
        return values

    return step


def variant_step(bench: Bench, name: str) -> tuple[PLStitchModel, Callable]:
    """A fresh model and the step function of variant `name`."""
    model = bench.fresh_model()
    if name == "before":
        optimizer = torch.optim.AdamW(model.param_groups(), lr=0.0)
        return model, legacy_step(bench, model, optimizer)
    if name == "after+compile":
        compile_modules(model)
    optimizer = torch.optim.AdamW(model.param_groups(), lr=0.0, **adamw_kernels(bench.device))
    scaler = torch.amp.GradScaler(bench.device.type, enabled=bench.precision == "fp16")
    schedules = bench.schedules()
    loop = _LoopState(bench.config, model, None, optimizer, scaler, schedules, bench.device, bench.precision,
                      DistInfo())  # fmt: skip
    base, clipped = bench.base_step, model.clipped_parameters()
    return model, lambda i, batch: loop.step(base, [batch], bench.epoch, clipped)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_variant(bench: Bench, name: str, steps: int, warmup: int) -> dict:
    """`steps` steps of variant `name`: seconds per timed step, peak memory, every step's losses."""
    model, step = variant_step(bench, name)
    torch.manual_seed(1)
    losses, first = [], time.perf_counter()
    for i in range(warmup):
        losses.append(step(i, bench.batches[i % len(bench.batches)]))
    synchronize(bench.device)
    warm_s = time.perf_counter() - first
    if bench.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(bench.device)
    start = time.perf_counter()
    for i in range(warmup, steps):
        losses.append(step(i, bench.batches[i % len(bench.batches)]))
    synchronize(bench.device)
    timed = max(1, steps - warmup)
    peak = torch.cuda.max_memory_allocated(bench.device) / 2**30 if bench.device.type == "cuda" else None
    del model, step
    return {"variant": name, "s_per_step": (time.perf_counter() - start) / timed, "warmup_s": warm_s,
            "peak_memory_gib": peak, "losses": losses}  # fmt: skip


def loss_agreement(reference: list[dict], other: list[dict]) -> dict:
    """Largest relative difference of each loss between two runs, step by step."""
    out = {}
    for key in reference[0]:
        diffs = [abs(b[key] - a[key]) / max(abs(a[key]), 1e-6) for a, b in zip(reference, other, strict=True)]
        out[key] = max(diffs)
    return out


def kernel_class(name: str) -> str:
    """The class of a GPU kernel by its name (KERNEL_CLASSES)."""
    return next((cls for cls, pattern in KERNEL_CLASSES if re.search(pattern, name, re.I)), "other")


def _device_time(event) -> float:
    """An event's device time in microseconds (the attribute's name changed across torch versions)."""
    for attr in ("device_time_total", "cuda_time_total"):
        if hasattr(event, attr):
            return float(getattr(event, attr))
    return 0.0


def _self_device_time(event) -> float:
    for attr in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, attr):
            return float(getattr(event, attr))
    return 0.0


def profile_step(bench: Bench, name: str, steps: int = 2, warmup: int = 3) -> tuple[dict, str]:
    """Profile `steps` steps of variant `name` after `warmup`: phases, kernel classes, GPU busy fraction.

    Returns the summary and the profiler's table (top ops by device time, or CPU time without a GPU).
    """
    model, step = variant_step(bench, name)
    for i in range(warmup):
        step(i, bench.batches[i % len(bench.batches)])
    synchronize(bench.device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if bench.device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for i in range(steps):
            step(i, bench.batches[i % len(bench.batches)])
        synchronize(bench.device)
        wall_us = (time.perf_counter() - start) * 1e6
    del model, step
    events = prof.events()
    phases: dict[str, dict[str, float]] = {}
    for event in events:
        if event.name.startswith("plstitch:"):
            row = phases.setdefault(event.name[len("plstitch:") :], {"cpu_ms": 0.0, "device_ms": 0.0})
            row["cpu_ms"] += event.cpu_time_total / 1e3 / steps
            row["device_ms"] += _device_time(event) / 1e3 / steps
    classes: dict[str, float] = {}
    kernels_us = 0.0
    for avg in prof.key_averages():
        own = _self_device_time(avg)
        if own > 0 and not avg.key.startswith(("plstitch:", "ProfilerStep")):
            classes[kernel_class(avg.key)] = classes.get(kernel_class(avg.key), 0.0) + own / 1e3 / steps
            kernels_us += own
    sort_by = "self_cuda_time_total" if bench.device.type == "cuda" else "self_cpu_time_total"
    try:
        table = prof.key_averages().table(sort_by=sort_by, row_limit=45)
    except (AttributeError, KeyError, ValueError):
        table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=45)
    summary = {
        "variant": name,
        "steps": steps,
        "wall_ms_per_step": wall_us / 1e3 / steps,
        "kernel_ms_per_step": kernels_us / 1e3 / steps,
        "gpu_busy_fraction": kernels_us / wall_us if bench.device.type == "cuda" else None,
        "phases_ms_per_step": phases,
        "kernel_classes_ms_per_step": dict(sorted(classes.items(), key=lambda kv: -kv[1])),
    }
    return summary, table


def print_profile(summary: dict) -> None:
    busy = summary["gpu_busy_fraction"]
    busy_text = "" if busy is None else f", GPU busy {100 * busy:.0f} % of the wall time"
    print(
        f"profile of '{summary['variant']}' ({summary['steps']} steps): {summary['wall_ms_per_step']:.1f} ms "
        f"per step, kernels {summary['kernel_ms_per_step']:.1f} ms{busy_text}"
    )
    for phase, row in summary["phases_ms_per_step"].items():
        print(f"  phase {phase:<18} device {row['device_ms']:8.1f} ms   host {row['cpu_ms']:8.1f} ms")
    for cls, ms in summary["kernel_classes_ms_per_step"].items():
        print(f"  kernels {cls:<22} {ms:8.1f} ms")

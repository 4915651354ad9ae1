"""The training step's GPU-minded pieces (issue 45) against the loops they replaced, on the CPU.

foreach EMA and per-parameter clipping bit for bit against the plain per-tensor loops (written here), the
optimizer kernel choice, and `--compile` training a step on the CPU to the same losses as eager.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from plstitch_train.model import PLStitchModel
from plstitch_train.trainer import adamw_kernels, clip_gradients, compile_modules, train
from tests.train.conftest import tiny_config


def _loop_ema(teacher: dict[str, torch.Tensor], student: dict[str, torch.Tensor], m: float) -> None:
    """The EMA as it was written before: one mul_ and one add_ per common name."""
    for name, t in teacher.items():
        if name in student:
            t.mul_(m).add_(student[name], alpha=1 - m)


def _loop_clip(grads: list[torch.Tensor], max_norm: float) -> None:
    """Per-parameter clipping as DINO/iBOT write it: each gradient scaled to at most `max_norm`."""
    for grad in grads:
        scale = max_norm / (grad.norm(2) + 1e-6)
        grad.mul_(scale.clamp(max=1.0))


def test_foreach_ema_equals_the_per_tensor_loop_bit_for_bit(video_dir: Path, frame_cache: Path) -> None:
    model = PLStitchModel(tiny_config(video_dir, frame_cache))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.student.parameters():
            param.add_(torch.randn(param.shape, generator=gen))
    student = {k: v.detach().clone() for k, v in model.student.named_parameters()}
    expected = {k: v.detach().clone() for k, v in model.teacher.named_parameters()}
    for momentum in (0.996, 0.5):
        model.update_teacher(momentum)
        _loop_ema(expected, student, momentum)
    for name, param in model.teacher.named_parameters():
        assert torch.equal(param, expected[name]), name


def test_foreach_clipping_equals_the_per_parameter_loop_bit_for_bit() -> None:
    gen = torch.Generator().manual_seed(1)
    shapes = [(7, 5), (3,), (64, 32), (1,), (2, 3, 4)]
    scales = (10, 0.01, 3, 0.5, 100)
    grads = [torch.randn(s, generator=gen) * scale for s, scale in zip(shapes, scales, strict=True)]
    params = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for param, grad in zip(params, grads, strict=True):
        param.grad = grad.clone()
    params.append(torch.nn.Parameter(torch.zeros(2)))  # no gradient: skipped
    expected = [g.clone() for g in grads]
    _loop_clip(expected, 1.0)
    clip_gradients(params, 1.0)
    for param, want in zip(params[:-1], expected, strict=True):
        assert torch.equal(param.grad, want)
    assert any(g.norm() > 1.0 for g in grads) and any(g.norm() < 1.0 for g in grads)  # both branches ran
    clip_gradients([torch.nn.Parameter(torch.zeros(1))], 1.0)  # no gradients at all: nothing to do


def test_adamw_is_fused_on_a_gpu_and_the_default_elsewhere() -> None:
    assert adamw_kernels(torch.device("cpu")) == {}
    assert adamw_kernels(torch.device("cuda", 0)) == {"fused": True}


def test_compiled_modules_keep_their_state_dict_keys(video_dir: Path, frame_cache: Path) -> None:
    model = PLStitchModel(tiny_config(video_dir, frame_cache))
    keys = list(model.state_dict())
    compile_modules(model)
    assert list(model.state_dict()) == keys  # checkpoints and exports do not change


@pytest.mark.slow
def test_compile_trains_a_step_on_the_cpu_to_the_eager_losses(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("torch.compile on the CPU needs a C compiler (none on PATH)")
    config = tiny_config(video_dir, frame_cache, max_steps=2, lambda_jigsaw=0.0)
    eager = train(config, tmp_path / "eager")
    compiled = train(config.replace(compile=True), tmp_path / "compiled")
    assert compiled.step == eager.step == 2
    for a, b in zip(eager.history, compiled.history, strict=True):
        for key in ("loss", "vid", "mim"):
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-5), key
    saved = json.loads((tmp_path / "compiled" / "train_config.json").read_text())
    assert saved["run"]["compile"] is True


def test_backbone_attention_is_fused_and_equals_the_explicit_softmax(
    video_dir: Path, frame_cache: Path
) -> None:
    """timm's ViT runs `scaled_dot_product_attention`; its explicit softmax path gives the same tokens."""
    model = PLStitchModel(tiny_config(video_dir, frame_cache)).eval()
    backbone = model.student["backbone"]
    attns = [block.attn for block in backbone.vit.blocks]
    assert all(attn.fused_attn for attn in attns)
    images = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        fused = backbone(images)
        for attn in attns:
            attn.fused_attn = False
        explicit = backbone(images)
    torch.testing.assert_close(fused, explicit, rtol=1e-6, atol=1e-6)

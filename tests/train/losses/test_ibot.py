"""The iBOT loss and its teacher temperature schedule against a per-pair, per-patch loop written here."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from plstitch_eval.errors import ConfigError
from plstitch_train.losses import IBOTLoss, teacher_temperature_schedule


def loop_ibot(s_cls, s_patch, t_cls, t_patch, masks, center, center2, n_views, s_temp, t_temp, t_patch_temp):
    """Straightforward per-view-pair, per-image, per-patch version of the iBOT objective."""
    batch = s_cls.shape[0] // n_views
    cls_terms, patch_terms = [], []
    for a in range(n_views):  # teacher view
        for b in range(n_views):  # student view
            if a == b:
                per_image = []
                for i in range(batch):
                    row_t, row_s = a * batch + i, b * batch + i
                    masked = [p for p in range(s_patch.shape[1]) if masks[row_s, p]]
                    losses = []
                    for p in masked:
                        teacher = F.softmax((t_patch[row_t, p] - center2[0, 0]) / t_patch_temp, dim=-1)
                        student = F.log_softmax(s_patch[row_s, p] / s_temp, dim=-1)
                        losses.append(-(teacher * student).sum())
                    per_image.append(sum(losses) / max(len(masked), 1) if losses else torch.tensor(0.0))
                patch_terms.append(torch.stack([torch.as_tensor(x) for x in per_image]).mean())
            else:
                per_image = []
                for i in range(batch):
                    teacher = F.softmax((t_cls[a * batch + i] - center[0]) / t_temp, dim=-1)
                    student = F.log_softmax(s_cls[b * batch + i] / s_temp, dim=-1)
                    per_image.append(-(teacher * student).sum())
                cls_terms.append(torch.stack(per_image).mean())
    return torch.stack(cls_terms).mean(), torch.stack(patch_terms).mean()


def make_ibot_inputs(n_views=2, batch=3, n_patches=6, out_dim=5, patch_dim=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = n_views * batch
    s_cls = torch.randn(rows, out_dim, generator=g)
    s_patch = torch.randn(rows, n_patches, patch_dim, generator=g)
    t_cls = torch.randn(rows, out_dim, generator=g)
    t_patch = torch.randn(rows, n_patches, patch_dim, generator=g)
    masks = torch.rand(rows, n_patches, generator=g) > 0.5
    masks[0] = False  # an image without masked patches contributes 0
    return s_cls, s_patch, t_cls, t_patch, masks


@pytest.mark.parametrize("n_views", [2, 3])
def test_ibot_loss_matches_loop_and_updates_centres(n_views: int) -> None:
    s_cls, s_patch, t_cls, t_patch, masks = make_ibot_inputs(n_views=n_views)
    loss_fn = IBOTLoss(5, 7, n_global_crops=n_views, warmup_epochs=4, n_epochs=10, lambda1=1.0, lambda2=0.5)
    loss_fn.center.copy_(torch.randn(1, 5))
    loss_fn.center2.copy_(torch.randn(1, 1, 7))
    center, center2 = loss_fn.center.clone(), loss_fn.center2.clone()
    epoch = 2
    t_patch_temp = 0.04 + (0.07 - 0.04) * epoch / 3  # linspace(0.04, 0.07, 4)[2]
    out = loss_fn(s_cls, s_patch, t_cls, t_patch, masks, epoch=epoch)
    cls_ref, patch_ref = loop_ibot(
        s_cls, s_patch, t_cls, t_patch, masks, center, center2, n_views, 0.1, 0.04, t_patch_temp
    )
    torch.testing.assert_close(out["cls"], cls_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out["patch"], 0.5 * patch_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out["total"], out["cls"] + out["patch"])
    torch.testing.assert_close(loss_fn.center, 0.9 * center + 0.1 * t_cls.mean(0, keepdim=True))
    torch.testing.assert_close(loss_fn.center2, 0.9 * center2 + 0.1 * t_patch.mean(1).mean(0).view(1, 1, -1))


def test_ibot_local_crops_add_cls_terms() -> None:
    s_cls, s_patch, t_cls, t_patch, masks = make_ibot_inputs(batch=3)
    local = torch.randn(2 * 3, 5)
    out = IBOTLoss(5, 7)(s_cls, s_patch, t_cls, t_patch, masks, epoch=0, student_local_cls=local)
    teacher = F.softmax(t_cls / 0.04, dim=-1).chunk(2)
    students = list((s_cls / 0.1).chunk(2)) + list((local / 0.1).chunk(2))
    terms = [
        (-(teacher[a] * F.log_softmax(students[b], dim=-1)).sum(-1)).mean()
        for a in range(2)
        for b in range(4)
        if a != b
    ]
    torch.testing.assert_close(out["cls"], torch.stack(terms).mean())
    with pytest.raises(ConfigError, match="masks"):
        IBOTLoss(5, 7)(s_cls, s_patch, t_cls, t_patch, masks[:, :4], epoch=0)


def test_ibot_gradients_reach_student_only() -> None:
    s_cls, s_patch, t_cls, t_patch, masks = make_ibot_inputs()
    s_cls.requires_grad_(True)
    s_patch.requires_grad_(True)
    t_cls.requires_grad_(True)
    IBOTLoss(5, 7)(s_cls, s_patch, t_cls, t_patch, masks, epoch=0)["total"].backward()
    assert s_cls.grad.abs().sum() > 0 and s_patch.grad.abs().sum() > 0
    assert t_cls.grad is None
    assert (s_patch.grad[~masks] == 0).all()  # only masked patches are distilled


def test_ibot_gradcheck_float64() -> None:
    s_cls, s_patch, t_cls, t_patch, masks = (
        x.double() if x.is_floating_point() else x
        for x in make_ibot_inputs(batch=2, n_patches=3, patch_dim=4)
    )
    s_cls.requires_grad_(True)
    s_patch.requires_grad_(True)
    loss_fn = IBOTLoss(5, 4)
    assert torch.autograd.gradcheck(
        lambda a, b: loss_fn(a, b, t_cls, t_patch, masks, epoch=0, update_center=False)["total"],
        (s_cls, s_patch),
    )


def test_ibot_accepts_2d_masks_and_skips_center_update() -> None:
    s_cls, s_patch, t_cls, t_patch, masks = make_ibot_inputs(n_patches=6)
    loss_fn = IBOTLoss(5, 7)
    flat = loss_fn(s_cls, s_patch, t_cls, t_patch, masks, epoch=0, update_center=False)
    grid = loss_fn(s_cls, s_patch, t_cls, t_patch, masks.view(-1, 2, 3), epoch=0, update_center=False)
    torch.testing.assert_close(flat["total"], grid["total"])
    assert loss_fn.center.abs().sum() == 0


def test_teacher_temperature_schedule() -> None:
    schedule = teacher_temperature_schedule(0.04, 0.07, 3, 6)
    torch.testing.assert_close(
        schedule, torch.tensor([0.04, 0.055, 0.07, 0.07, 0.07, 0.07], dtype=torch.float64)
    )
    loss_fn = IBOTLoss(4, 4, warmup_epochs=3, n_epochs=6)
    assert loss_fn.temperatures(1) == pytest.approx((0.04, 0.055))
    assert loss_fn.temperatures(50) == pytest.approx((0.04, 0.07))  # past the end: last value
    assert "center" in loss_fn.state_dict() and "center2" in loss_fn.state_dict()


def _ddp_center_worker(rank: int, world: int, init_file: str, result_file: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        s_cls, s_patch, t_cls, t_patch, masks = make_ibot_inputs(seed=rank)
        loss_fn = IBOTLoss(5, 7)
        loss_fn(s_cls, s_patch, t_cls, t_patch, masks, epoch=0)
        if rank == 0:
            torch.save({"center": loss_fn.center, "center2": loss_fn.center2}, result_file)
    finally:
        dist.destroy_process_group()


def test_ibot_centre_is_all_reduced_under_ddp(tmp_path) -> None:
    import torch.multiprocessing as mp

    world = 2
    result_file = tmp_path / "centres.pt"
    mp.spawn(_ddp_center_worker, args=(world, str(tmp_path / "init"), str(result_file)), nprocs=world)
    got = torch.load(result_file)
    inputs = [make_ibot_inputs(seed=rank) for rank in range(world)]
    all_cls = torch.cat([x[2] for x in inputs])
    all_patch = torch.cat([x[3] for x in inputs])
    torch.testing.assert_close(got["center"], 0.1 * all_cls.mean(0, keepdim=True))
    torch.testing.assert_close(got["center2"], 0.1 * all_patch.mean(1).mean(0).view(1, 1, -1))

"""Ranking losses and the iBOT loss against textbook / brute-force versions written here."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from plstitch_eval.errors import ConfigError
from plstitch_train.losses import (
    IBOTLoss,
    all_permutations,
    apply_permutation,
    pairwise_ranking_loss,
    permutation_classification_loss,
    permutation_logits_from_scores,
    plackett_luce_loss,
    sample_permutation_indices,
    teacher_temperature_schedule,
)

# --- Plackett-Luce ---


def textbook_pl_probability(scores: list[float], order: tuple[int, ...]) -> float:
    """P(order | s) = prod_i exp(s_order[i]) / sum_{j >= i} exp(s_order[j])."""
    prob = 1.0
    for i in range(len(order)):
        prob *= math.exp(scores[order[i]]) / sum(math.exp(scores[order[j]]) for j in range(i, len(order)))
    return prob


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_pl_enumerated_probabilities_sum_to_one_and_match_textbook(k: int) -> None:
    scores = torch.randn(k, dtype=torch.float64) * 2
    perms = torch.tensor(list(itertools.permutations(range(k))), dtype=torch.long)
    losses = plackett_luce_loss(scores.expand(len(perms), k), order=perms, reduction="none")
    probs = torch.exp(-losses)
    assert probs.sum().item() == pytest.approx(1.0, abs=1e-10)
    expected = torch.tensor(
        [textbook_pl_probability(scores.tolist(), tuple(p)) for p in perms.tolist()], dtype=torch.float64
    )
    torch.testing.assert_close(losses, -torch.log(expected), rtol=1e-9, atol=1e-9)


def test_pl_default_order_is_identity_and_order_gathers() -> None:
    scores = torch.randn(4, 6, dtype=torch.float64)
    order = torch.stack([torch.randperm(6) for _ in range(4)])
    reordered = scores.gather(1, order)
    torch.testing.assert_close(
        plackett_luce_loss(scores, order=order, reduction="none"),
        plackett_luce_loss(reordered, reduction="none"),
    )
    identity = torch.arange(6).expand(4, 6)
    torch.testing.assert_close(plackett_luce_loss(scores), plackett_luce_loss(scores, order=identity))


def test_pl_correct_order_beats_reversed() -> None:
    scores = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    assert plackett_luce_loss(scores) < plackett_luce_loss(scores.flip(1))


def test_pl_reductions() -> None:
    scores = torch.randn(5, 7, dtype=torch.float64)
    per_list = plackett_luce_loss(scores, reduction="none")
    assert per_list.shape == (5,)
    torch.testing.assert_close(plackett_luce_loss(scores, reduction="sum"), per_list.sum())
    torch.testing.assert_close(plackett_luce_loss(scores, reduction="mean"), per_list.mean())
    torch.testing.assert_close(plackett_luce_loss(scores, reduction="mean_items"), per_list.sum() / (5 * 7))
    with pytest.raises(ConfigError, match="reduction"):
        plackett_luce_loss(scores, reduction="avg")


def test_pl_masked_lists_equal_unpadded_lists() -> None:
    generator = torch.Generator().manual_seed(1)
    k, batch = 8, 6
    scores = torch.randn(batch, k, dtype=torch.float64, generator=generator)
    order = torch.stack([torch.randperm(k, generator=generator) for _ in range(batch)])
    mask = torch.rand(batch, k, generator=generator) > 0.4
    mask[:, 0] = True
    padded = plackett_luce_loss(scores, order=order, mask=mask, reduction="none")
    for b in range(batch):
        kept = [j for j in order[b].tolist() if mask[b, j]]  # true order of the valid items only
        unpadded = plackett_luce_loss(scores[b, kept].unsqueeze(0), reduction="none")[0]
        torch.testing.assert_close(padded[b], unpadded)
    n_valid = mask.sum()
    torch.testing.assert_close(
        plackett_luce_loss(scores, order=order, mask=mask, reduction="mean_items"), padded.sum() / n_valid
    )


def test_pl_masked_gradients_are_finite_and_zero_on_padding() -> None:
    scores = torch.randn(3, 5, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 0, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
    plackett_luce_loss(scores, mask=mask).backward()
    assert torch.isfinite(scores.grad).all()
    assert (scores.grad[~mask] == 0).all()


def test_pl_gradcheck_float64() -> None:
    scores = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    order = torch.stack([torch.randperm(5) for _ in range(3)])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 1, 0], [0, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.autograd.gradcheck(
        lambda s: plackett_luce_loss(s, order=order, mask=mask, reduction="sum"), scores
    )
    assert torch.autograd.gradcheck(lambda s: plackett_luce_loss(s, reduction="none"), scores)


def test_pl_is_stable_for_large_scores_and_half_inputs() -> None:
    scores = torch.tensor([[1e4, -1e4, 5e3, 0.0]])
    loss = plackett_luce_loss(scores)
    # terms: lse(all) - 1e4 ~ 0; lse(-1e4, 5e3, 0) + 1e4 ~ 1.5e4; lse(5e3, 0) - 5e3 ~ 0; last = 0
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(1.5e4, abs=1e-2)
    half = plackett_luce_loss(torch.randn(2, 8).half())
    assert half.dtype == torch.float32 and torch.isfinite(half)


def test_pl_single_item_is_zero() -> None:
    assert plackett_luce_loss(torch.randn(4, 1)).item() == 0.0


# --- pairwise hinge ---


def brute_pairwise(scores, order, mask, margin):
    per_list = []
    for b in range(scores.shape[0]):
        ranked = [j for j in order[b].tolist() if mask[b, j]]
        terms = [
            max(0.0, margin - (scores[b, ranked[i]].item() - scores[b, ranked[j]].item()))
            for i in range(len(ranked))
            for j in range(i + 1, len(ranked))
        ]
        per_list.append(sum(terms) / max(len(terms), 1))
    return torch.tensor(per_list, dtype=scores.dtype)


@pytest.mark.parametrize("margin", [1.0, 0.5])
def test_pairwise_matches_double_loop(margin: float) -> None:
    generator = torch.Generator().manual_seed(3)
    scores = torch.randn(5, 6, dtype=torch.float64, generator=generator)
    order = torch.stack([torch.randperm(6, generator=generator) for _ in range(5)])
    mask = torch.rand(5, 6, generator=generator) > 0.3
    expected = brute_pairwise(scores, order, mask, margin)
    got = pairwise_ranking_loss(scores, order=order, mask=mask, margin=margin, reduction="none")
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(pairwise_ranking_loss(scores, order, mask, margin), expected.mean())
    torch.testing.assert_close(
        pairwise_ranking_loss(scores, order, mask, margin, reduction="sum"), expected.sum()
    )
    full = brute_pairwise(scores, torch.arange(6).expand(5, 6), torch.ones(5, 6, dtype=torch.bool), margin)
    torch.testing.assert_close(pairwise_ranking_loss(scores, margin=margin, reduction="none"), full)


def test_padding_values_never_leak() -> None:
    scores = torch.tensor([[2.0, float("nan"), 0.5, float("inf")]], requires_grad=True)
    mask = torch.tensor([[True, False, True, False]])
    for loss_fn in (plackett_luce_loss, pairwise_ranking_loss):
        loss = loss_fn(scores, mask=mask)
        assert torch.isfinite(loss)
        torch.testing.assert_close(loss, loss_fn(scores.detach()[:, [0, 2]]))
        (grad,) = torch.autograd.grad(loss, scores)
        assert torch.isfinite(grad).all() and (grad[~mask] == 0).all()


def test_pairwise_zero_when_ordered_with_margin() -> None:
    scores = torch.tensor([[4.0, 2.5, 1.0, -1.0]])
    assert pairwise_ranking_loss(scores).item() == 0.0
    assert pairwise_ranking_loss(scores.flip(1)).item() > 0


# --- permutation classification ---


def test_all_permutations_lexicographic_and_limits() -> None:
    assert all_permutations(3).tolist() == [list(p) for p in itertools.permutations(range(3))]
    assert all_permutations(5).shape == (120, 5)
    with pytest.raises(ConfigError, match="clip_len"):
        all_permutations(9)


def test_apply_permutation_and_sampling() -> None:
    frames = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    index = torch.tensor([5, 23])
    perms = list(itertools.permutations(range(4)))
    out = apply_permutation(frames, index)
    for b in range(2):
        for i in range(4):
            torch.testing.assert_close(out[b, i], frames[b, perms[index[b]][i]])
    drawn = sample_permutation_indices(1000, 3, generator=torch.Generator().manual_seed(0))
    assert drawn.min() >= 0 and drawn.max() <= 5 and len(drawn.unique()) == 6


def test_permutation_loss_matches_manual_cross_entropy() -> None:
    logits = torch.randn(4, 24, dtype=torch.float64)
    target = torch.tensor([0, 7, 23, 11])
    manual = torch.stack([-(logits[b, target[b]] - torch.logsumexp(logits[b], 0)) for b in range(4)])
    torch.testing.assert_close(
        permutation_classification_loss(logits, target, reduction="none").double(), manual
    )
    assert permutation_classification_loss(logits, target).item() == pytest.approx(
        manual.mean().item(), rel=1e-6
    )
    with pytest.raises(ConfigError, match="k!"):
        permutation_classification_loss(torch.randn(2, 10), torch.tensor([0, 1]))


def test_permutation_logits_from_scores_are_pl_likelihoods_of_the_shuffle() -> None:
    scores = torch.randn(3, 4, dtype=torch.float64)
    logits = permutation_logits_from_scores(scores)
    assert logits.shape == (3, 24)
    torch.testing.assert_close(torch.logsumexp(logits, dim=1), torch.zeros(3, dtype=torch.float64))
    perms = list(itertools.permutations(range(4)))
    frames_order = torch.arange(4.0).view(1, 4, 1).expand(3, 4, 1)
    for b, p in enumerate([0, 9, 23]):
        shuffled = apply_permutation(frames_order, torch.tensor([p] * 3))[
            b, :, 0
        ]  # original frame at each position
        assert shuffled.tolist() == list(perms[p])
        # true order of the shuffled positions: the position holding frame 0, then frame 1, ...
        true_order = tuple(int(i) for i in shuffled.argsort())
        expected = math.log(textbook_pl_probability(scores[b].tolist(), true_order))
        assert logits[b, p].item() == pytest.approx(expected, rel=1e-9)


# --- iBOT loss ---


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

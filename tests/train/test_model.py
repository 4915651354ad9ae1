"""Model branches, backbone variants, the jigsaw inputs, iBOT heads and EMA, data items, overfitting."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

from plstitch_train.data import FrameStore, TrainDataset, discover_videos
from plstitch_train.losses import pl_chance_level
from plstitch_train.model import PLStitchModel, ViTBackbone, build_vit
from plstitch_train.sampling import SampleSpec, TrainSampler
from plstitch_train.schedules import cosine_schedule, ramp_weight
from tests.train.conftest import tiny_config


@pytest.fixture(scope="module")
def config(video_dir: Path, frame_cache: Path):
    return tiny_config(video_dir, frame_cache)


@pytest.fixture(scope="module")
def store(config) -> FrameStore:
    videos = discover_videos(config.data, config.fps)
    return FrameStore.build(videos, config.fps, config.frame_size, Path(config.cache_dir), config.clip_len)


def _dataset(store: FrameStore, config) -> TrainDataset:
    return TrainDataset(store, config.img_size, (4, 4), config.mask_ratio)


def _batch(store: FrameStore, config, size: int = 4) -> dict[str, torch.Tensor]:
    sampler = TrainSampler(
        store.lengths,
        batch_size=size,
        clip_len=config.clip_len,
        max_step=config.max_step,
        fps=config.fps,
        context_seconds=config.context_seconds,
        counts=(4, 4, 4),
    )
    return default_collate([_dataset(store, config)[spec] for spec in next(iter(sampler))])


def test_backbone_equals_timm_forward_features(config) -> None:
    backbone = ViTBackbone(build_vit(config.model, 0.0)).eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(backbone(images), backbone.vit.forward_features(images))


def test_masked_patches_ignore_their_pixels(config) -> None:
    backbone = ViTBackbone(build_vit(config.model, 0.0)).eval()
    torch.nn.init.normal_(backbone.masked_embed)
    masks = torch.zeros(1, 4, 4, dtype=torch.bool)
    masks[0, 1, 2] = True  # patch rows 8:16, cols 16:24
    images = torch.randn(1, 3, 32, 32)
    changed = images.clone()
    changed[:, :, 8:16, 16:24] = 5.0
    with torch.no_grad():
        torch.testing.assert_close(backbone(images, masks), backbone(changed, masks))
        assert not torch.allclose(backbone(images), backbone(changed))


def test_without_position_embedding_patches_are_permutation_equivariant(config) -> None:
    backbone = ViTBackbone(build_vit(config.model, 0.0)).eval()
    images = torch.randn(1, 3, 32, 32)
    # swap patch (0,0) with patch (3,3) in pixel space
    swapped = images.clone()
    swapped[..., 0:8, 0:8], swapped[..., 24:32, 24:32] = images[..., 24:32, 24:32], images[..., 0:8, 0:8]
    with torch.no_grad():
        plain, moved = backbone(images, pos_embed=False), backbone(swapped, pos_embed=False)
        torch.testing.assert_close(moved[:, 0], plain[:, 0], rtol=1e-4, atol=1e-5)  # CLS unchanged
        torch.testing.assert_close(moved[:, 1], plain[:, 16], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(moved[:, 16], plain[:, 1], rtol=1e-4, atol=1e-5)
        assert not torch.allclose(backbone(swapped)[:, 0], backbone(images)[:, 0], atol=1e-5)  # PE sees order


def _manual_tokens(backbone: ViTBackbone, images: torch.Tensor, masks: torch.Tensor | None) -> torch.Tensor:
    """Patch embed, masked_embed at masked patches, CLS in front, no position embedding, blocks, norm."""
    vit = backbone.vit
    patches = vit.patch_embed(images)
    if masks is not None:
        patches = patches.clone()
        patches[masks.flatten(1)] = backbone.masked_embed[0]
    tokens = torch.cat([vit.cls_token.expand(len(images), -1, -1), patches], dim=1)
    for block in vit.blocks:
        tokens = block(tokens)
    return vit.norm(tokens)


def _manual_pl_per_item(scores: torch.Tensor) -> torch.Tensor:
    """mean over lists of sum_i [log sum_{j >= i} exp(s_j) - s_i] / N (true order = raster order)."""
    n = scores.shape[1]
    per_list = [sum(torch.logsumexp(row[i:], 0) - row[i] for i in range(n)) / n for row in scores]
    return torch.stack(per_list).mean()


def test_jigsaw_queries_are_all_patches_of_the_masked_frame(config) -> None:
    """Queries: all N tokens of the current frame (masked_embed at masked patches, no PE); keys: 2N tokens."""
    model = PLStitchModel(config.replace(lambda_vid=0.0, lambda_mim=0.0)).eval()
    backbone = model.student["backbone"]
    torch.nn.init.normal_(backbone.masked_embed)
    generator = torch.Generator().manual_seed(3)
    context = torch.randn(2, 3, 3, 32, 32, generator=generator)
    masks = torch.rand(2, 4, 4, generator=generator) < 0.4
    block_inputs, head_inputs = [], []
    hooks = [
        backbone.vit.blocks[0].register_forward_pre_hook(lambda m, args: block_inputs.append(args[0])),
        model.student["jigsaw_head"].register_forward_pre_hook(lambda m, args: head_inputs.append(args)),
    ]
    with torch.no_grad():
        loss = model.jigsaw_loss(context, masks)
    for hook in hooks:
        hook.remove()
    current = block_inputs[0]  # the first backbone call encodes the current frame
    assert current.shape == (2, 1 + 16, 32)
    flat = masks.flatten(1)
    assert torch.equal(current[:, 1:][flat], backbone.masked_embed.expand(int(flat.sum()), -1))  # no PE added
    torch.testing.assert_close(current[:, 0], backbone.vit.cls_token[0].expand(2, -1))
    queries, keys = head_inputs[0]
    assert queries.shape == (2, 16, 32) and keys.shape == (2, 32, 32)
    with torch.no_grad():
        manual_queries = _manual_tokens(backbone, context[:, 1], masks)[:, 1:]
        past = _manual_tokens(backbone, context[:, 0], None)[:, 1:]
        future = _manual_tokens(backbone, context[:, 2], None)[:, 1:]
        torch.testing.assert_close(queries, manual_queries, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(keys, torch.cat([past, future], dim=1), rtol=1e-5, atol=1e-5)
        expected = _manual_pl_per_item(
            model.student["jigsaw_head"](manual_queries, torch.cat([past, future], 1))
        )
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)


def test_jigsaw_loss_overfits_one_batch_below_chance(config) -> None:
    """Per-item PL loss of uniform scores is log(N!)/N; a few Adam steps on one batch must beat it clearly."""
    torch.manual_seed(0)
    model = PLStitchModel(config.replace(lambda_vid=0.0, lambda_mim=0.0, lambda_jigsaw=1.0)).train()
    generator = torch.Generator().manual_seed(0)
    context = torch.randn(4, 3, 3, 32, 32, generator=generator)
    masks = torch.rand(4, 4, 4, generator=generator) < 0.3
    optimizer = torch.optim.Adam([p for p in model.student.parameters() if p.requires_grad], lr=3e-3)
    chance = pl_chance_level(16)
    first = None
    for _ in range(60):
        loss = model.jigsaw_loss(context, masks)
        first = loss.item() if first is None else first
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert first == pytest.approx(chance, abs=0.1)  # the fresh head's scores are nearly uniform
    assert loss.item() < 0.8 * chance, (loss.item(), chance)


def test_ibot_heads_student_separate_teacher_shared(config) -> None:
    model = PLStitchModel(config)
    student, teacher = model.student["ibot_head"], model.teacher["ibot_head"]
    assert student.last_layer2 is not None and teacher.last_layer2 is None
    tokens = torch.randn(2, 5, 32)
    _, patches = teacher(tokens)
    normed = torch.nn.functional.normalize(teacher.mlp(tokens[:, 1:]), dim=-1)
    torch.testing.assert_close(patches, teacher.last_layer(normed))  # teacher: patches through the CLS layer
    _, student_patches = student(tokens)
    normed = torch.nn.functional.normalize(student.mlp(tokens[:, 1:]), dim=-1)
    torch.testing.assert_close(student_patches, student.last_layer2(normed))
    assert model.teacher["backbone"].masked_embed is None
    # the teacher starts as the student wherever the names coincide, and has no other tensors
    student_state, teacher_state = model.student.state_dict(), model.teacher.state_dict()
    assert set(teacher_state) < set(student_state)
    assert all(torch.equal(teacher_state[k], student_state[k]) for k in teacher_state)
    assert {k for k in set(student_state) - set(teacher_state) if "ibot" in k or "masked" in k} == {
        "backbone.masked_embed",
        "ibot_head.last_layer2.parametrizations.weight.original0",
        "ibot_head.last_layer2.parametrizations.weight.original1",
    }


def test_temporal_head_width_is_half_the_embedding(config) -> None:
    model = PLStitchModel(config.replace(temporal_dim=0, temporal_ff=0, temporal_heads=8))
    head = model.student["temporal_head"]
    assert head.config["in_dim"] == 32 and head.config["hidden_dim"] == 16 and head.config["ff_dim"] == 64
    explicit = PLStitchModel(
        config.replace(temporal_dim=24, temporal_ff=40, temporal_heads=2, lambda_mim=0.0)
    )
    assert explicit.student["temporal_head"].config["hidden_dim"] == 24
    assert explicit.student["temporal_head"].config["ff_dim"] == 40


@pytest.mark.parametrize(
    ("changes", "heads", "losses"),
    [
        ({}, {"temporal_head", "ibot_head", "jigsaw_head"}, {"vid", "mim", "jigsaw"}),
        ({"lambda_jigsaw": 0.0}, {"temporal_head", "ibot_head"}, {"vid", "mim"}),
        ({"lambda_mim": 0.0, "lambda_jigsaw": 0.0}, {"temporal_head"}, {"vid"}),
        ({"lambda_vid": 0.0}, {"ibot_head", "jigsaw_head"}, {"mim", "jigsaw"}),
        (
            {"objective": "permutation", "lambda_mim": 0.0},
            {"permutation_head", "jigsaw_head"},
            {"vid", "jigsaw"},
        ),
        ({"objective": "pairwise", "lambda_mim": 0.0, "lambda_jigsaw": 0.0}, {"temporal_head"}, {"vid"}),
    ],
)
def test_disabled_branches_build_and_compute_nothing(store, config, changes, heads, losses) -> None:
    cfg = config.replace(**changes)
    model = PLStitchModel(cfg)
    assert set(model.student) - {"backbone"} == heads
    batch = _batch(store, config, size=2)
    for key, needed in (("clip", "vid"), ("crops", "mim"), ("context", "jigsaw")):
        if needed not in losses:
            batch.pop(key)  # a skipped branch must not even read its inputs
    out = model(batch)
    assert set(out) - {"loss"} == losses
    weights = {"vid": cfg.lambda_vid, "mim": cfg.lambda_mim, "jigsaw": cfg.lambda_jigsaw}
    torch.testing.assert_close(out["loss"], sum(weights[k] * out[k] for k in losses))


def test_jigsaw_weight_zero_skips_the_branch(store, config) -> None:
    model = PLStitchModel(config)
    out = model(_batch(store, config, size=2), jigsaw_weight=0.0)
    assert "jigsaw" not in out


def test_teacher_is_an_ema_of_the_student_over_common_names(config) -> None:
    model = PLStitchModel(config.replace(lambda_jigsaw=0.0))
    student = dict(model.student.named_parameters())
    teacher = dict(model.teacher.named_parameters())
    for name in (
        "backbone.vit.blocks.0.mlp.fc1.weight",
        "ibot_head.last_layer.parametrizations.weight.original1",
    ):
        assert torch.equal(student[name], teacher[name])
    with torch.no_grad():
        for param in student.values():
            param.add_(1.0)
    before = {k: v.detach().clone() for k, v in teacher.items()}
    model.update_teacher(0.9)
    for name, param in teacher.items():  # every teacher tensor follows the student tensor of its name
        torch.testing.assert_close(param, 0.9 * before[name] + 0.1 * student[name].detach())
    # the shared teacher layer follows the student's CLS layer, not its patch layer last_layer2
    assert "ibot_head.last_layer2.parametrizations.weight.original1" not in teacher
    assert not any(p.requires_grad for p in model.teacher.parameters())


def test_cosine_schedule_matches_the_textbook_formula() -> None:
    values = cosine_schedule(1.0, 0.1, total_steps=10, warmup_steps=3)
    np.testing.assert_allclose(values[:3], [0.0, 0.5, 1.0])
    for i in range(7):
        assert values[3 + i] == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * i / 7)))
    momentum = cosine_schedule(0.996, 1.0, 100)
    assert momentum[0] == pytest.approx(0.996) and momentum[-1] == pytest.approx(1.0, abs=1e-5)
    assert np.all(np.diff(momentum) >= 0)


def test_jigsaw_ramp_is_a_half_cosine() -> None:
    assert ramp_weight(0.4, 5.99, 6.0, 1.0) == 0.0
    assert ramp_weight(0.4, 6.0, 6.0, 1.0) == 0.0
    assert ramp_weight(0.4, 6.5, 6.0, 1.0) == pytest.approx(0.2)
    assert ramp_weight(0.4, 6.25, 6.0, 1.0) == pytest.approx(0.4 * (1 - math.cos(math.pi / 4)) / 2)
    assert ramp_weight(0.4, 9.0, 6.0, 1.0) == pytest.approx(0.4)
    assert ramp_weight(0.0, 9.0, 6.0, 1.0) == 0.0


def test_items_are_seeded_by_their_spec_alone(store, config) -> None:
    dataset = _dataset(store, config)
    spec = SampleSpec(video=1, clip=(0, 3, 6, 9), past=2, current=5, future=8, seed=11)
    torch.manual_seed(1)
    first = dataset[spec]
    torch.manual_seed(2)
    state = torch.get_rng_state()
    second = dataset[spec]
    assert torch.equal(state, torch.get_rng_state())  # the global RNG is untouched
    for key in ("clip", "crops", "context", "masks"):
        assert torch.equal(first[key], second[key]), key
    assert first["clip"].shape == (4, 3, 32, 32) and first["masks"].shape == (3, 4, 4)
    assert not torch.equal(dataset[SampleSpec(1, (0, 3, 6, 9), 2, 5, 8, seed=12)]["crops"], first["crops"])


def test_reverse_time_reverses_the_frame_order(store, config) -> None:
    reversed_store = FrameStore(store.names, store._arrays, store.fps, reverse_time=True)
    for video, length in enumerate(store.lengths):
        forward = store.frames(video, np.arange(length))
        backward = reversed_store.frames(video, np.arange(length))
        assert np.array_equal(backward, forward[::-1])
    # the clip the model ranks as "first..last" is the forward video's "last..first"
    spec = SampleSpec(video=0, clip=(0, 2, 4, 6), past=1, current=3, future=5, seed=3)
    last = store.lengths[0] - 1
    mirrored = SampleSpec(0, tuple(last - i for i in spec.clip), last - 1, last - 3, last - 5, seed=3)
    got = _dataset(reversed_store, config)[spec]
    expected = _dataset(store, config)[mirrored]
    assert torch.equal(got["clip"], expected["clip"])


def test_a_fixed_batch_is_overfitted_by_every_branch(store, config) -> None:
    """Few dozen steps on one batch lower each loss (L_vid, L_MIM, L_jigsaw)."""
    cfg = config.replace(lambda_jigsaw=1.0)
    model = PLStitchModel(cfg).train()
    batch = _batch(store, config, size=2)
    optimizer = torch.optim.AdamW([p for g in model.param_groups() for p in g["params"]], lr=3e-3)
    history = []
    for _ in range(16):
        out = model(batch)
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()
        model.update_teacher(0.99)
        history.append({k: float(v.detach()) for k, v in out.items()})
    for key in ("vid", "mim", "jigsaw"):
        start = np.mean([h[key] for h in history[:3]])
        end = np.mean([h[key] for h in history[-3:]])
        assert end < 0.9 * start, (key, start, end)


def test_gradient_clipping_per_parameter_and_global() -> None:
    from plstitch_train.trainer import clip_gradients

    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))
    a.grad, b.grad = torch.tensor([3.0, 4.0]), torch.tensor([0.0, 0.6, 0.8])  # norms 5 and 1
    clip_gradients([a, b], 2.0)
    torch.testing.assert_close(a.grad, torch.tensor([1.2, 1.6]), rtol=1e-5, atol=1e-6)  # scaled to norm 2
    torch.testing.assert_close(b.grad, torch.tensor([0.0, 0.6, 0.8]))  # already below: untouched
    a.grad, b.grad = torch.tensor([3.0, 4.0]), torch.tensor([0.0, 0.0, 0.0])
    clip_gradients([a, b], 1.0, per_parameter=False)
    torch.testing.assert_close(a.grad, torch.tensor([0.6, 0.8]), rtol=1e-5, atol=1e-6)


def test_data_folder_mixes_videos_and_frame_folders(video_dir: Path, tmp_path: Path) -> None:
    import shutil

    from PIL import Image

    root = tmp_path / "data"
    shutil.copytree(video_dir, root)
    frames = root / "surgery" / "case1"
    frames.mkdir(parents=True)
    pixels = np.random.default_rng(0).integers(0, 255, size=(6, 20, 30, 3), dtype=np.uint8)
    for i, image in enumerate(pixels):
        Image.fromarray(image).save(frames / f"{i:04d}.png")
    videos = discover_videos(root, folder_fps=2.0)
    assert [v.name for v in videos] == ["clip0", "clip1", "surgery/case1"]
    assert videos[2].folder_fps == 2.0 and videos[0].folder_fps is None
    store = FrameStore.build(videos, 2.0, 10, tmp_path / "cache", min_frames=4)
    assert store.lengths[2] == 6  # a folder extracted at the training fps keeps every frame
    assert store.frames(2, [0]).shape == (1, 10, 15, 3)  # shorter side resized to frame_size
    again = FrameStore.build(videos, 2.0, 10, tmp_path / "cache", min_frames=4)  # served from the cache
    assert np.array_equal(again.frames(2, [5]), store.frames(2, [5]))


class _MeanPixelBackbone(torch.nn.Module):
    """Stub backbone: token 0 = each image's mean pixel, token 1 + n = mean of patch n (raster order)."""

    def __init__(self, patch: int, dim: int = 3) -> None:
        super().__init__()
        self.patch, self.dim = patch, dim

    def forward(self, images: torch.Tensor, masks=None, pos_embed: bool = True) -> torch.Tensor:
        per_patch = torch.nn.functional.avg_pool2d(images.mean(1, keepdim=True), self.patch).flatten(1)
        values = torch.cat([images.mean((1, 2, 3)).unsqueeze(1), per_patch], dim=1)  # [N, 1 + P]
        return values.unsqueeze(-1).expand(-1, -1, self.dim).contiguous()


class _FirstChannelScores(torch.nn.Module):
    """Stub head: the score of item j is feature 0 of its token (the frame's or patch's own content)."""

    def forward(self, feats: torch.Tensor, *context: torch.Tensor) -> torch.Tensor:
        return feats[..., 0]


def _textbook_pl_per_item(scores: torch.Tensor, order: list[int]) -> float:
    """mean_b (1/K) sum_i [log sum_{j >= i} exp(s_b,order[j]) - s_b,order[i]], in plain Python floats."""
    per_list = []
    for row in scores.tolist():
        ranked = [row[j] for j in order]
        nll = sum(math.log(sum(math.exp(v) for v in ranked[i:])) - ranked[i] for i in range(len(ranked)))
        per_list.append(nll / len(ranked))
    return sum(per_list) / len(per_list)


def test_video_loss_ranks_clip_frames_forward_in_time(config) -> None:
    """L_vid = PL NLL of the true (forward) order of the clip's frames, not of the reversed order.

    Backbone and temporal head are stubs, so frame t's score is its own mean pixel: the expected loss follows
    from the clip alone. Catches flipped scores, a reversed clip or a batch/time mix-up in the reshape.
    """
    model = PLStitchModel(config.replace(lambda_mim=0.0, lambda_jigsaw=0.0))
    model.student["backbone"] = _MeanPixelBackbone(patch=8)
    model.student["temporal_head"] = _FirstChannelScores()
    batch, k = 3, config.clip_len
    noise = torch.randn(batch, k, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    frame_scores = torch.linspace(2, -2, k, dtype=torch.float64) + 0.5 * noise  # mostly falling in time
    clip = frame_scores.float().view(batch, k, 1, 1, 1).expand(batch, k, 3, 32, 32).contiguous()
    scores = frame_scores.float().double()  # what the float32 clip holds
    forward = _textbook_pl_per_item(scores, list(range(k)))
    backward = _textbook_pl_per_item(scores, list(reversed(range(k))))
    assert abs(forward - backward) > 0.05  # the test can tell the two directions apart
    assert model.video_loss(clip).item() == pytest.approx(forward, rel=1e-5)


def test_jigsaw_loss_ranks_the_current_frame_patches_in_raster_order(config) -> None:
    """L_jigsaw = PL NLL of the raster order of the current frame's patches (not past/future/reversed)."""
    model = PLStitchModel(config.replace(lambda_vid=0.0, lambda_mim=0.0))
    model.student["backbone"] = _MeanPixelBackbone(patch=8)
    model.student["jigsaw_head"] = _FirstChannelScores()
    generator = torch.Generator().manual_seed(6)
    # Scores falling along the raster order (plus noise): row-major is the likeliest order.
    patch_scores = (torch.linspace(4, -4, 16) + 0.3 * torch.randn(2, 16, generator=generator)).view(2, 4, 4)
    current = patch_scores.repeat_interleave(8, 1).repeat_interleave(8, 2)  # each 8 x 8 patch constant
    context = torch.randn(2, 3, 3, 32, 32, generator=generator)
    context[:, 1] = current.unsqueeze(1).expand(-1, 3, -1, -1)
    masks = torch.zeros(2, 4, 4, dtype=torch.bool)
    raster = patch_scores.flatten(1).double()  # row by row: (0,0), (0,1), ..., (3,3)
    expected = _textbook_pl_per_item(raster, list(range(16)))
    column_major = _textbook_pl_per_item(patch_scores.transpose(1, 2).flatten(1).double(), list(range(16)))
    assert abs(expected - _textbook_pl_per_item(raster, list(reversed(range(16))))) > 0.05
    assert abs(expected - column_major) > 0.05
    assert model.jigsaw_loss(context, masks).item() == pytest.approx(expected, rel=1e-5)

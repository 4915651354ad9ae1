"""Heads: the authors' equations and key names, shapes, equivariance, padding, weight norm, save/load."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from plstitch_eval.errors import CheckpointError, ConfigError, ModelNotFoundError
from plstitch_eval.hub import ranking_head
from plstitch_train.heads import (
    IBOTHead,
    JigsawHead,
    PermutationHead,
    TemporalHead,
    convert_ibot_head_state_dict,
    default_jigsaw_heads,
    load_jigsaw_head,
    load_temporal_head,
    save_temporal_head,
)
from plstitch_train.losses import plackett_luce_loss
from tests.official import (
    TINY,
    official_checkpoint,
    puzzle_decoder_state,
    reference_jigsaw_scores,
    unwrap,
    write_official_checkpoint,
)


def tiny_temporal_head(in_dim: int = 24) -> TemporalHead:
    return TemporalHead(in_dim, hidden_dim=32, n_layers=2, n_heads=4, ff_dim=64, dropout=0.1)


# --- temporal head ---


def test_temporal_head_is_the_hub_class_with_reference_defaults() -> None:
    assert TemporalHead is ranking_head.TemporalHead
    head = TemporalHead(768)
    layer = head.temporal.enc.layers[0]
    assert len(head.temporal.enc.layers) == 6
    assert head.reduce[0].out_features == 384 and isinstance(head.reduce[1], nn.GELU)
    assert layer.self_attn.num_heads == 8 and layer.linear1.out_features == 1536
    assert layer.norm_first is False and layer.activation_relu_or_gelu == 1  # post-norm, ReLU
    assert layer.dropout.p == 0.1 and layer.self_attn.batch_first
    assert [m.out_features for m in head.scorer if isinstance(m, nn.Linear)] == [192, 1]
    assert not any("pos" in name for name, _ in head.named_parameters())  # no temporal position embedding
    small = TemporalHead(384)  # ViT-S: width D/2 = 192, feed-forward 4 x 192
    assert small.reduce[0].out_features == 192 and small.temporal.enc.layers[0].linear1.out_features == 768


def test_temporal_head_shapes_and_permutation_equivariance() -> None:
    head = tiny_temporal_head().eval()
    frames = torch.randn(3, 7, 24)
    scores = head(frames)
    assert scores.shape == (3, 7)
    perm = torch.randperm(7)
    with torch.no_grad():
        torch.testing.assert_close(head(frames[:, perm]), scores[:, perm], rtol=1e-5, atol=1e-5)


def test_temporal_head_padding_mask_matches_unpadded() -> None:
    head = tiny_temporal_head().eval()
    frames = torch.randn(1, 5, 24)
    padded = torch.cat([frames, torch.randn(1, 3, 24)], dim=1)
    mask = torch.tensor([[True] * 5 + [False] * 3])
    with torch.no_grad():
        torch.testing.assert_close(head(padded, mask=mask)[:, :5], head(frames), rtol=1e-5, atol=1e-5)


def test_temporal_head_learns_to_rank_in_a_few_steps() -> None:
    torch.manual_seed(0)
    head = TemporalHead(4, hidden_dim=16, n_layers=1, n_heads=2, ff_dim=32)
    times = torch.rand(16, 6).sort(dim=1).values  # feature = time: a head can learn to rank by it
    frames = torch.cat([times.unsqueeze(-1), torch.randn(16, 6, 3) * 0.1], dim=-1)
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        loss = plackett_luce_loss(head(frames))
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert losses[-1] < 0.75 * losses[0]


def test_temporal_head_save_load_roundtrip(tmp_path) -> None:
    head = tiny_temporal_head().eval()
    save_temporal_head(head, tmp_path / "backbone")
    config = json.loads((tmp_path / "backbone" / "temporal_head.json").read_text())
    assert config == {
        "in_dim": 24,
        "hidden_dim": 32,
        "n_layers": 2,
        "n_heads": 4,
        "ff_dim": 64,
        "dropout": 0.1,
    }
    loaded = load_temporal_head(tmp_path / "backbone")
    assert not loaded.training
    frames = torch.randn(2, 6, 24)
    with torch.no_grad():
        torch.testing.assert_close(loaded(frames), head(frames))


def test_temporal_head_mismatched_load_raises(tmp_path) -> None:
    save_temporal_head(tiny_temporal_head(), tmp_path)
    config_path = tmp_path / "temporal_head.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "hidden_dim": 64}))
    with pytest.raises(CheckpointError, match="shape mismatch"):
        load_temporal_head(tmp_path)
    config_path.write_text(json.dumps({**config, "n_layers": 3}))
    with pytest.raises(CheckpointError, match="missing"):
        load_temporal_head(tmp_path)
    config_path.write_text(json.dumps({**config, "bogus": 1}))
    with pytest.raises(CheckpointError, match="temporal_head.json"):
        load_temporal_head(tmp_path)
    config_path.write_text(json.dumps(config))
    weights = load_file(str(tmp_path / "temporal_head.safetensors"))
    save_file({**weights, "extra.weight": torch.zeros(1)}, str(tmp_path / "temporal_head.safetensors"))
    with pytest.raises(CheckpointError, match="unexpected"):
        load_temporal_head(tmp_path)
    with pytest.raises(ModelNotFoundError):
        load_temporal_head(tmp_path / "nowhere")


# --- jigsaw head ---


def test_jigsaw_head_defaults() -> None:
    assert default_jigsaw_heads(768) == 12
    assert default_jigsaw_heads(384) == 8
    assert default_jigsaw_heads(36) == 6  # 8 does not divide 36
    assert JigsawHead(48).n_heads == 8
    with pytest.raises(ConfigError, match="divide"):
        JigsawHead(48, n_heads=5)


def test_jigsaw_head_shapes_and_query_equivariance() -> None:
    head = JigsawHead(32).eval()
    queries, context = torch.randn(2, 9, 32), torch.randn(2, 20, 32)
    scores = head(queries, context)
    assert scores.shape == (2, 9)
    perm = torch.randperm(9)
    with torch.no_grad():
        torch.testing.assert_close(head(queries[:, perm], context), scores[:, perm], rtol=1e-5, atol=1e-5)


def test_jigsaw_head_padding_matches_unpadded() -> None:
    head = JigsawHead(32).eval()
    queries, context = torch.randn(1, 5, 32), torch.randn(1, 12, 32)
    padded_queries = torch.cat([queries, torch.randn(1, 3, 32)], dim=1)
    padded_context = torch.cat([context, torch.randn(1, 4, 32)], dim=1)
    query_mask = torch.tensor([[True] * 5 + [False] * 3])
    context_mask = torch.tensor([[True] * 12 + [False] * 4])
    with torch.no_grad():
        expected = head(queries, context)
        got = head(padded_queries, padded_context, query_mask=query_mask, context_mask=context_mask)
        torch.testing.assert_close(got[:, :5], expected, rtol=1e-5, atol=1e-5)
        empty = head(padded_queries, padded_context, query_mask=torch.zeros(1, 8, dtype=torch.bool))
        assert torch.isfinite(empty).all()  # a sample without masked patches does not produce NaNs


def test_jigsaw_head_uses_context() -> None:
    head = JigsawHead(16).eval()
    queries = torch.randn(1, 4, 16)
    with torch.no_grad():
        assert not torch.allclose(head(queries, torch.randn(1, 6, 16)), head(queries, torch.randn(1, 6, 16)))


def test_jigsaw_head_keys_are_the_authors_puzzle_decoder_keys() -> None:
    for dim in (32, 768):
        ours = JigsawHead(dim).state_dict()
        authors = puzzle_decoder_state(dim)
        assert ours.keys() == authors.keys()
        assert all(ours[k].shape == authors[k].shape for k in ours)
    assert JigsawHead(768).n_heads == 12 and JigsawHead(384).n_heads == 8


def test_jigsaw_scorer_last_layer_init() -> None:
    torch.manual_seed(0)
    last = JigsawHead(768).scorer[-1]
    assert torch.all(last.bias == 0)
    assert 0.017 < last.weight.std().item() < 0.023 and last.weight.abs().max() < 0.1


@pytest.mark.parametrize(("dim", "n_heads"), [(32, 4), (48, None), (64, 8)])
def test_jigsaw_head_matches_the_equations(dim: int, n_heads: int | None) -> None:
    """LN1(4 CA + x), LN2(SA + x), LN3(Linear + x), scorer: identical weights, independent formulation."""
    head = JigsawHead(dim, n_heads).eval()
    with torch.no_grad():  # non-trivial norms and biases, so a missing residual or scale shows
        for param in head.parameters():
            param.add_(0.2 * torch.randn_like(param))
    queries, context = torch.randn(2, 9, dim), torch.randn(2, 18, dim)
    state = {k: v.detach() for k, v in head.state_dict().items()}
    with torch.no_grad():
        expected = reference_jigsaw_scores(state, queries, context, head.n_heads)
        torch.testing.assert_close(head(queries, context), expected, atol=1e-5, rtol=1e-5)


def test_load_jigsaw_head_gives_the_authors_scores(tmp_path) -> None:
    checkpoint = write_official_checkpoint(tmp_path / "pl_tiny.pth")
    head = load_jigsaw_head(tmp_path / "pl_tiny.pth")
    assert not head.training and head.n_heads == 8  # the authors' rule for D != 768
    queries, context = torch.randn(2, 16, TINY["dim"]), torch.randn(2, 32, TINY["dim"])
    with torch.no_grad():
        expected = reference_jigsaw_scores(unwrap(checkpoint["puzzle_decoder"]), queries, context, 8)
        torch.testing.assert_close(head(queries, context), expected, atol=1e-5, rtol=1e-5)


def test_load_jigsaw_head_from_a_run_and_strict_errors(tmp_path) -> None:
    head = JigsawHead(32, n_heads=2).eval()
    run = tmp_path / "run"
    run.mkdir()
    model = {f"student.jigsaw_head.{k}": v for k, v in head.state_dict().items()}
    torch.save({"model": model, "config": {"jigsaw_heads": 2}}, run / "last.ckpt")
    queries, context = torch.randn(1, 4, 32), torch.randn(1, 8, 32)
    with torch.no_grad():
        torch.testing.assert_close(load_jigsaw_head(run)(queries, context), head(queries, context))
    checkpoint = official_checkpoint()
    broken = dict(checkpoint["puzzle_decoder"])
    broken.pop("module.decoder.0.auxiliary_linear.bias")
    broken["module.decoder.0.extra.weight"] = torch.zeros(2)
    torch.save(dict(checkpoint, puzzle_decoder=broken), tmp_path / "broken.pth")
    with pytest.raises(CheckpointError, match=r"missing \['decoder.0.auxiliary_linear.bias'\]"):
        load_jigsaw_head(tmp_path / "broken.pth")
    save_temporal_head(tiny_temporal_head(), tmp_path / "exported")
    with pytest.raises(CheckpointError, match="last.ckpt"):
        load_jigsaw_head(tmp_path / "exported")  # exported folders carry only the temporal head


# --- iBOT head ---


def test_ibot_head_shapes_and_weight_norm() -> None:
    head = IBOTHead(24, out_dim=40, patch_out_dim=40, hidden_dim=32, bottleneck_dim=8)
    cls_out, patch_out = head(torch.randn(3, 1 + 5, 24))
    assert cls_out.shape == (3, 40) and patch_out.shape == (3, 5, 40)
    assert [m.out_features for m in head.mlp if isinstance(m, nn.Linear)] == [32, 32, 8]
    assert sum(isinstance(m, nn.GELU) for m in head.mlp) == 2
    magnitude = head.last_layer.parametrizations.weight.original0
    assert not magnitude.requires_grad and torch.all(magnitude == 1)
    torch.testing.assert_close(
        head.last_layer.weight.norm(dim=1), torch.ones(40)
    )  # unit rows when g fixed to 1
    # output = normalised bottleneck @ unit-norm rows: every logit is a cosine in [-1, 1]
    assert cls_out.abs().max() <= 1 + 1e-5
    assert set(map(id, head.last_layer_parameters())) == set(map(id, head.last_layer.parameters()))


def test_ibot_head_cls_and_patch_share_mlp_and_last_layer() -> None:
    head = IBOTHead(16, out_dim=12, patch_out_dim=12, hidden_dim=20, bottleneck_dim=6)
    tokens = torch.randn(2, 4, 16)
    cls_out, patch_out = head(tokens)
    manual = head.last_layer(F.normalize(head.mlp(tokens[:, 2]), dim=-1))
    torch.testing.assert_close(patch_out[:, 1], manual)
    torch.testing.assert_close(head(tokens[:, [2, 0]])[0], manual)  # the same token as CLS: same projection


def test_ibot_head_separate_patch_layer_and_freezing() -> None:
    head = IBOTHead(16, out_dim=12, patch_out_dim=20, hidden_dim=20, bottleneck_dim=6, shared_head=False)
    _, patch_out = head(torch.randn(2, 4, 16))
    assert patch_out.shape == (2, 3, 20)
    assert len(head.last_layer_parameters()) == 4
    free = IBOTHead(16, out_dim=12, patch_out_dim=12, hidden_dim=20, bottleneck_dim=6, norm_last_layer=False)
    assert free.last_layer.parametrizations.weight.original0.requires_grad
    sum(x.sum() for x in free(torch.randn(2, 3, 16))).backward()
    free.cancel_last_layer_gradients()
    assert all(p.grad is None for p in free.last_layer_parameters())
    assert free.mlp[0].weight.grad is not None
    with pytest.raises(ConfigError, match="shared_head"):
        IBOTHead(16, out_dim=12, patch_out_dim=20)


def test_convert_legacy_weight_norm_keys() -> None:
    head = IBOTHead(16, out_dim=12, patch_out_dim=12, hidden_dim=20, bottleneck_dim=6)
    legacy = {}
    for key, value in head.state_dict().items():
        key = key.replace("parametrizations.weight.original0", "weight_g")
        legacy[key.replace("parametrizations.weight.original1", "weight_v")] = value * 1.5
    fresh = IBOTHead(16, out_dim=12, patch_out_dim=12, hidden_dim=20, bottleneck_dim=6)
    fresh.load_state_dict(convert_ibot_head_state_dict(legacy), strict=True)
    torch.testing.assert_close(fresh.mlp[0].weight, head.mlp[0].weight * 1.5)


# --- permutation head ---


def test_permutation_head() -> None:
    head = PermutationHead(8, 4)
    assert head(torch.randn(5, 4, 8)).shape == (5, math.factorial(4))
    with pytest.raises(ConfigError, match="clip_len"):
        PermutationHead(8, 9)
    with pytest.raises(ConfigError, match="expects"):
        head(torch.randn(5, 3, 8))
    assert {name for name, _ in head.named_parameters()} == {"classifier.weight", "classifier.bias"}


def tiny_permutation_head(k: int = 6, n_classes: int = 0, in_dim: int = 24) -> PermutationHead:
    return PermutationHead(
        in_dim, k, n_classes, "temporal", hidden_dim=16, n_layers=2, n_heads=4, ff_dim=32, dropout=0.1
    )


def test_temporal_permutation_head_is_the_temporal_trunk_without_scorer() -> None:
    head = tiny_permutation_head(k=6, n_classes=50)
    assert head(torch.randn(5, 6, 24)).shape == (5, 50)
    assert tiny_permutation_head(k=4)(torch.randn(2, 4, 24)).shape == (2, 24)  # 0: all 4! classes
    assert tiny_permutation_head(k=10, n_classes=7)(torch.randn(3, 10, 24)).shape == (3, 7)  # k > 8
    assert head.classifier.in_features == 6 * 16
    # the trunk is TemporalHead's reduce + temporal, under the same names and sizes; nothing else
    reference = TemporalHead(24, hidden_dim=16, n_layers=2, n_heads=4, ff_dim=32, dropout=0.1)
    trunk = {k: v.shape for k, v in reference.state_dict().items() if not k.startswith("scorer.")}
    mine = {k: v.shape for k, v in head.state_dict().items() if not k.startswith("classifier.")}
    assert mine == trunk
    # every parameter gets a gradient (DDP refuses unused parameters)
    head(torch.randn(2, 6, 24)).logsumexp(dim=1).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())


def test_only_the_flatten_order_tells_the_temporal_permutation_head_the_order() -> None:
    torch.manual_seed(0)
    head = tiny_permutation_head(k=6, n_classes=20).eval()
    frames = torch.randn(3, 6, 24)
    perm = torch.tensor([2, 0, 5, 1, 4, 3])
    with torch.no_grad():
        # the trunk alone is permutation-equivariant: reordering the frames reorders its outputs
        torch.testing.assert_close(
            head.trunk(frames[:, perm]), head.trunk(frames)[:, perm], rtol=1e-5, atol=1e-5
        )
        # so a reordered clip gets other logits only because the flatten puts the outputs elsewhere
        logits, shuffled = head(frames), head(frames[:, perm])
        assert (logits - shuffled).abs().max() > 1e-3
        by_hand = head.classifier(head.trunk(frames)[:, perm].flatten(1))
        torch.testing.assert_close(shuffled, by_hand, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"k": 9}, r"clip_len 9 needs 362880 classes.*or a sampled set: permutation_classes"),
        ({"k": 4, "n_classes": 25}, r"permutation_classes 25 exceeds the 24 permutations of clip_len 4"),
        ({"k": 4, "n_classes": 1}, r"permutation_classes must be 0"),
        ({"k": 4, "kind": "mlp"}, r"kind 'mlp' unknown; use one of temporal, linear"),
        ({"k": 4, "kind": "temporal", "hidden_dim": 10}, r"hidden_dim 10 must be divisible by n_heads 4"),
    ],
)
def test_permutation_head_refuses_bad_sizes_in_one_line(args: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        PermutationHead(24, n_heads=4, **args)
    assert "\n" not in str(caught.value)

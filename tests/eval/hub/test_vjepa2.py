"""V-JEPA 2 (transformers' `VJEPA2Model` layout) loads strictly and computes upstream's encoder output.

The reference is written here on the Hub layout's raw tensors (separate query/key/value projections) from
github.com/facebookresearch/vjepa2 `src/models/utils/modules.py`: `RoPEAttention` with
`rotate_queries_or_keys` evaluated channel by channel (angle index c mod d/2, partner channel c xor 1), not
with the module's reshapes.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from safetensors.torch import save_file
from torch.nn import functional as F

from plstitch_eval.data.video import ClipSampling
from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub import DataConfig, ModelEntry, load_encoder
from plstitch_eval.hub.architectures.clip_models import clip_layout
from plstitch_eval.hub.registry import MODELS, VJEPA2_CLIP

DIM, HEADS, DEPTH, PATCH, TUBELET, FRAMES, SIZE = 128, 2, 2, 8, 2, 4, 24  # 64-d heads, as ViT-L
PREDICTOR_KEYS = 3


def _rand(gen: torch.Generator, *shape: int, scale: float = 0.2) -> torch.Tensor:
    return torch.randn(*shape, generator=gen) * scale


def hub_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights named as `VJEPA2Model.state_dict()` (encoder + a few predictor tensors)."""
    gen = torch.Generator().manual_seed(seed)
    e = "encoder."
    state = {
        e + "embeddings.patch_embeddings.proj.weight": _rand(gen, DIM, 3, TUBELET, PATCH, PATCH, scale=0.05),
        e + "embeddings.patch_embeddings.proj.bias": _rand(gen, DIM),
        e + "layernorm.weight": 1 + _rand(gen, DIM),
        e + "layernorm.bias": _rand(gen, DIM),
        "predictor.embeddings.mask_tokens": _rand(gen, 10, 1, 1, 32),
        "predictor.layernorm.weight": torch.ones(32),
        "predictor.proj.weight": _rand(gen, DIM, 32),
    }
    for i in range(DEPTH):
        b = f"{e}layer.{i}."
        for name in ("norm1", "norm2"):
            state[f"{b}{name}.weight"] = 1 + _rand(gen, DIM)
            state[f"{b}{name}.bias"] = _rand(gen, DIM)
        for name in ("query", "key", "value", "proj"):
            state[f"{b}attention.{name}.weight"] = _rand(gen, DIM, DIM, scale=DIM**-0.5)
            state[f"{b}attention.{name}.bias"] = _rand(gen, DIM)
        state[b + "mlp.fc1.weight"] = _rand(gen, 4 * DIM, DIM, scale=DIM**-0.5)
        state[b + "mlp.fc1.bias"] = _rand(gen, 4 * DIM)
        state[b + "mlp.fc2.weight"] = _rand(gen, DIM, 4 * DIM, scale=(4 * DIM) ** -0.5)
        state[b + "mlp.fc2.bias"] = _rand(gen, DIM)
    return state


def rotate_reference(x: torch.Tensor, position: float, width: int, proper: bool = False) -> torch.Tensor:
    """One axis' channels x [..., width] of one token: channel c uses angle index c mod width/2 (upstream's
    `repeat(1, 1, 1, 2)`; `proper`: c // 2, the textbook RoPE) and its pair partner c ^ 1."""
    half = width // 2
    out = torch.empty_like(x)
    for c in range(width):
        j = c // 2 if proper else c % half
        angle = position / 10000 ** (j / half)
        partner = -x[..., c + 1] if c % 2 == 0 else x[..., c - 1]
        out[..., c] = x[..., c] * torch.cos(torch.tensor(angle)) + partner * torch.sin(torch.tensor(angle))
    return out


def reference_tokens(state: dict, clips: torch.Tensor, proper: bool = False) -> torch.Tensor:
    """The encoder's normalised tokens [B, N, D] of clips [B, 3, T, H, W], from the Hub tensors."""
    e = "encoder."
    weight = state[e + "embeddings.patch_embeddings.proj.weight"]
    x = F.conv3d(clips, weight, state[e + "embeddings.patch_embeddings.proj.bias"], stride=weight.shape[2:])
    depth, rows, cols = x.shape[2:]
    x = x.flatten(2).transpose(1, 2)
    head = DIM // HEADS
    axis = 2 * ((head // 3) // 2)  # d_dim = h_dim = w_dim
    positions = [(t, r, c) for t in range(depth) for r in range(rows) for c in range(cols)]

    def rope(t: torch.Tensor) -> torch.Tensor:  # [B, heads, N, head]
        out = t.clone()
        for n, pos in enumerate(positions):
            for a in range(3):
                sl = slice(a * axis, (a + 1) * axis)
                out[:, :, n, sl] = rotate_reference(t[:, :, n, sl], float(pos[a]), axis, proper)
        return out

    def ln(x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (DIM,), state[name + ".weight"], state[name + ".bias"], eps=1e-6)

    def linear(x: torch.Tensor, name: str) -> torch.Tensor:
        return x @ state[name + ".weight"].T + state[name + ".bias"]

    for i in range(DEPTH):
        b = f"{e}layer.{i}."
        h = ln(x, b + "norm1")
        q, k, v = (
            linear(h, f"{b}attention.{n}").unflatten(-1, (HEADS, head)).transpose(1, 2)
            for n in ("query", "key", "value")
        )
        q, k = rope(q), rope(k)
        weights = (q @ k.transpose(-1, -2) * head**-0.5).softmax(-1)
        x = x + linear((weights @ v).transpose(1, 2).flatten(2), b + "attention.proj")
        x = x + linear(F.gelu(linear(ln(x, b + "norm2"), b + "mlp.fc1")), b + "mlp.fc2")
    return ln(x, e + "layernorm")


def _clips(batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, 3, FRAMES, SIZE, SIZE, generator=torch.Generator().manual_seed(7))


def _windows(clips: torch.Tensor) -> torch.Tensor:
    return clips.transpose(1, 2).contiguous()


@pytest.fixture
def tiny_vjepa2(temp_entry):
    config = DataConfig(input_size=(3, SIZE, SIZE), resize_size=SIZE, crop_pct=1.0, interpolation="bilinear")
    temp_entry(
        ModelEntry(
            "tiny-vjepa2",
            "vjepa2",
            DIM,
            converter="vjepa2",
            data_config=config,
            clip=ClipSampling(FRAMES, frame_stride=2),
            path_env="TINY_VJEPA2",
            license="test",
            citation="test",
        )
    )


def test_hub_layout_gives_the_upstream_tokens_and_their_mean(tmp_path, monkeypatch, tiny_vjepa2):
    state = hub_state()
    path = tmp_path / "model.safetensors"
    save_file(state, str(path))
    monkeypatch.setenv("TINY_VJEPA2", str(path))
    encoder = load_encoder("tiny-vjepa2")
    assert encoder.provenance["dropped_keys"] == PREDICTOR_KEYS and encoder.feature_dim == DIM
    clips = _clips()
    with torch.no_grad():
        tokens = reference_tokens(state, clips)
        torch.testing.assert_close(encoder.model.forward_tokens(clips), tokens, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(encoder(_windows(clips)), tokens.mean(1), rtol=1e-4, atol=1e-4)
        # the published rotation differs from textbook RoPE: the check can tell them apart
        proper = reference_tokens(state, clips, proper=True)
    assert not torch.allclose(proper, tokens, atol=1e-3)
    assert tokens.shape[1] == FRAMES // TUBELET * (SIZE // PATCH) ** 2


def test_the_time_axis_is_rotated(tmp_path):
    """Reversing the tubelets changes the feature (the first RoPE slice carries time): not a bag of frames."""
    path = tmp_path / "model.safetensors"
    save_file(hub_state(seed=1), str(path))
    encoder = load_encoder(path)  # bare: read as vjepa2-vitl16 (16 frames at 256 px)
    assert encoder.clip == VJEPA2_CLIP and encoder.data_config == MODELS["vjepa2-vitl16"].data_config
    assert (encoder.model.num_frames, encoder.model.img_size) == (16, 256)
    model = encoder.model
    model.num_frames, model.img_size = FRAMES, SIZE  # RoPE has no table: any window fits the weights
    clips = _clips(1)
    reversed_tubelets = clips.unflatten(2, (FRAMES // TUBELET, TUBELET)).flip(2).flatten(2, 3)
    with torch.no_grad():
        assert not torch.allclose(model(clips), model(reversed_tubelets), atol=1e-4)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda s: s.pop("encoder.layer.1.attention.key.bias"),
            r"unexpected \['layer.1.attention.query.bias'",
        ),
        (lambda s: s.pop("encoder.layer.0.mlp.fc2.bias"), r"missing \['blocks.0.mlp.fc2.bias'\]"),
        (lambda s: s.update({"encoder.layer.0.layer_scale1.lambda1": torch.ones(DIM)}), "unexpected"),
        (lambda s: s.update({"pooler.query_tokens": torch.ones(1, 1, DIM)}), r"unexpected \['pooler"),
    ],
)
def test_vjepa2_loads_strictly(tmp_path, monkeypatch, tiny_vjepa2, edit, message):
    state = hub_state()
    edit(state)
    path = tmp_path / "bad.safetensors"
    save_file(state, str(path))
    monkeypatch.setenv("TINY_VJEPA2", str(path))
    with pytest.raises(CheckpointError, match=message) as info:
        load_encoder("tiny-vjepa2")
    assert "\n" not in str(info.value)


def test_image_checkpoints_are_not_taken_for_vjepa2():
    assert clip_layout(hub_state()) == "vjepa2"
    assert clip_layout({"patch_embed.proj.weight": torch.zeros(8, 3, 2, 4, 4)}) == "videomae"
    assert clip_layout({"embeddings.patch_embeddings.weight": torch.zeros(8, 3, 4, 4)}) is None  # DINOv3


def test_registry_entry_reads_the_hub_file_and_pins_vit_l(hf_cache, monkeypatch):
    entry = MODELS["vjepa2-vitl16"]
    assert (entry.clip.num_frames, entry.clip.frame_stride, entry.clip.anchor) == (16, 4, 8)
    assert entry.data_config.input_size == (3, 256, 256) and entry.data_config.resize_size == 292
    assert entry.data_config.interpolation == "bilinear" and entry.license == "Apache-2.0"
    state = hub_state(seed=2)
    hf_cache(entry.repo_id, {"model.safetensors": lambda p: save_file(state, str(p))})
    with pytest.raises(CheckpointError, match="embed_dim: found 128, expected 1024"):
        load_encoder(entry.name)
    relaxed = {"embed_dim": DIM, "depth": DEPTH, "tubelet_size": TUBELET}
    monkeypatch.setitem(MODELS, entry.name, dataclasses.replace(entry, expected=relaxed))
    encoder = load_encoder(entry.name)
    assert encoder.clip == VJEPA2_CLIP and encoder.provenance["repo_id"] == entry.repo_id
    with pytest.raises(ConfigError, match=r"clip encoder: pass windows \[B, 16, 3, H, W\]"):
        encoder(torch.zeros(1, 3, 256, 256))

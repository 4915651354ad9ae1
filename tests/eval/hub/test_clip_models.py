"""Clip encoders (VideoMAE V2, Endo-FM's TimeSformer) load from their upstream layouts and compute upstream's
feature.

The checkpoints are written here with the upstream key names; the references below are the upstream equations
on the raw tensors: VideoMAE V2 `models/modeling_finetune.py` (tubelet Conv3d, `get_sinusoid_encoding_table`,
attention with q/v biases, `fc_norm(x.mean(1))`) and Endo-FM `models/timesformer.py` (divided space-time
blocks), the latter written token by token with loops, not with the reshapes the module uses.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from torch.nn import functional as F

from plstitch_eval.data.video import ClipSampling
from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub import DataConfig, ModelEntry, load_encoder, register
from plstitch_eval.hub.architectures.clip_models import clip_layout
from plstitch_eval.hub.registry import ENDO_FM_CLIP, MODELS, VIDEOMAE_V2_CLIP

DIM, HEADS, DEPTH, PATCH, SIZE, FRAMES, TUBELET = 128, 2, 2, 8, 32, 4, 2  # 64-d heads, as ViT-B


def _rand(gen: torch.Generator, *shape: int, scale: float = 0.2) -> torch.Tensor:
    return torch.randn(*shape, generator=gen) * scale


def _norm(name: str, gen: torch.Generator) -> dict:
    return {f"{name}.weight": 1 + _rand(gen, DIM), f"{name}.bias": _rand(gen, DIM)}


def _linear(name: str, out: int, inp: int, gen: torch.Generator, bias: bool = True) -> dict:
    tensors = {f"{name}.weight": _rand(gen, out, inp, scale=inp**-0.5)}
    if bias:
        tensors[f"{name}.bias"] = _rand(gen, out)
    return tensors


def videomae_state(seed: int = 0, final: str = "fc_norm", layer_scale: bool = False) -> dict:
    """Random weights named and shaped as VideoMAE V2's `VisionTransformer` (bias-free qkv, q/v biases)."""
    gen = torch.Generator().manual_seed(seed)
    state = {
        "patch_embed.proj.weight": _rand(gen, DIM, 3, TUBELET, PATCH, PATCH, scale=0.05),
        "patch_embed.proj.bias": _rand(gen, DIM),
        **_norm(final, gen),
    }
    for i in range(DEPTH):
        b = f"blocks.{i}."
        state |= _norm(b + "norm1", gen) | _norm(b + "norm2", gen)
        state |= _linear(b + "attn.qkv", 3 * DIM, DIM, gen, bias=False)
        state |= {b + "attn.q_bias": _rand(gen, DIM), b + "attn.v_bias": _rand(gen, DIM)}
        state |= _linear(b + "attn.proj", DIM, DIM, gen)
        state |= _linear(b + "mlp.fc1", 4 * DIM, DIM, gen) | _linear(b + "mlp.fc2", DIM, 4 * DIM, gen)
        if layer_scale:
            state |= {b + "gamma_1": 0.5 + _rand(gen, DIM), b + "gamma_2": 0.5 + _rand(gen, DIM)}
    return state


def upstream_sinusoid_table(n_position: int, d_hid: int) -> torch.Tensor:
    """`get_sinusoid_encoding_table` as VideoMAE V2 writes it (numpy, float64, then float32)."""
    table = np.array(
        [[pos / np.power(10000, 2 * (j // 2) / d_hid) for j in range(d_hid)] for pos in range(n_position)]
    )
    table[:, 0::2] = np.sin(table[:, 0::2])
    table[:, 1::2] = np.cos(table[:, 1::2])
    return torch.tensor(table, dtype=torch.float)[None]


def _ln(x: torch.Tensor, state: dict, name: str) -> torch.Tensor:
    return F.layer_norm(x, (DIM,), state[f"{name}.weight"], state[f"{name}.bias"], eps=1e-6)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """[.., N, D] each: heads split, softmax(q k^T * head_dim^-0.5) v, heads merged."""
    head = DIM // HEADS
    split = [t.unflatten(-1, (HEADS, head)).transpose(-3, -2) for t in (q, k, v)]
    weights = ((split[0] * head**-0.5) @ split[1].transpose(-1, -2)).softmax(-1)
    return (weights @ split[2]).transpose(-3, -2).flatten(-2)


def videomae_reference(state: dict, clips: torch.Tensor) -> torch.Tensor:
    """VideoMAE V2 `forward_features` on clips [B, 3, T, H, W] straight from the tensors."""
    weight = state["patch_embed.proj.weight"]
    x = F.conv3d(clips, weight, state["patch_embed.proj.bias"], stride=weight.shape[2:])
    x = x.flatten(2).transpose(1, 2)
    x = x + upstream_sinusoid_table(x.shape[1], DIM)
    for i in range(DEPTH):
        b = f"blocks.{i}."
        h = _ln(x, state, b + "norm1")
        bias = torch.cat((state[b + "attn.q_bias"], torch.zeros(DIM), state[b + "attn.v_bias"]))
        q, k, v = (h @ state[b + "attn.qkv.weight"].T + bias).chunk(3, dim=-1)
        attended = _attend(q, k, v) @ state[b + "attn.proj.weight"].T + state[b + "attn.proj.bias"]
        x = x + state.get(b + "gamma_1", torch.ones(DIM)) * attended
        h = _ln(x, state, b + "norm2")
        h = F.gelu(h @ state[b + "mlp.fc1.weight"].T + state[b + "mlp.fc1.bias"])
        h = h @ state[b + "mlp.fc2.weight"].T + state[b + "mlp.fc2.bias"]
        x = x + state.get(b + "gamma_2", torch.ones(DIM)) * h
    if "fc_norm.weight" in state:
        return _ln(x.mean(1), state, "fc_norm")
    return _ln(x, state, "norm").mean(1)  # a pretraining encoder: its normalised tokens, averaged


def timesformer_state(seed: int = 0) -> dict:
    """Random weights named and shaped as Endo-FM's TimeSformer `VisionTransformer` (divided space-time)."""
    gen = torch.Generator().manual_seed(seed)
    grid = SIZE // PATCH
    state = {
        "cls_token": _rand(gen, 1, 1, DIM),
        "pos_embed": _rand(gen, 1, 1 + grid * grid, DIM),
        "time_embed": _rand(gen, 1, FRAMES, DIM),
        "patch_embed.proj.weight": _rand(gen, DIM, 3, PATCH, PATCH, scale=0.05),
        "patch_embed.proj.bias": _rand(gen, DIM),
        **_norm("norm", gen),
    }
    for i in range(DEPTH):
        b = f"blocks.{i}."
        for norm in ("norm1", "temporal_norm1", "norm2"):
            state |= _norm(b + norm, gen)
        for attn in ("attn", "temporal_attn"):
            state |= _linear(f"{b}{attn}.qkv", 3 * DIM, DIM, gen)
            state |= _linear(f"{b}{attn}.proj", DIM, DIM, gen)
        state |= _linear(b + "temporal_fc", DIM, DIM, gen)
        state |= _linear(b + "mlp.fc1", 4 * DIM, DIM, gen) | _linear(b + "mlp.fc2", DIM, 4 * DIM, gen)
    return state


def timesformer_reference(state: dict, clips: torch.Tensor) -> torch.Tensor:
    """Endo-FM's divided space-time forward, one token (patch s, frame t) at a time."""

    def attention(seq: torch.Tensor, name: str) -> torch.Tensor:
        q, k, v = (seq @ state[f"{name}.qkv.weight"].T + state[f"{name}.qkv.bias"]).chunk(3, dim=-1)
        return _attend(q, k, v) @ state[f"{name}.proj.weight"].T + state[f"{name}.proj.bias"]

    def mlp(x: torch.Tensor, b: str) -> torch.Tensor:
        h = F.gelu(_ln(x, state, b + "norm2") @ state[b + "mlp.fc1.weight"].T + state[b + "mlp.fc1.bias"])
        return h @ state[b + "mlp.fc2.weight"].T + state[b + "mlp.fc2.bias"]

    pos, time_embed = state["pos_embed"][0], state["time_embed"][0]
    frames = clips.shape[2]
    features = []
    for clip in clips:
        patches = [
            F.conv2d(
                clip[:, t][None],
                state["patch_embed.proj.weight"],
                state["patch_embed.proj.bias"],
                stride=PATCH,
            )
            .flatten(2)[0]
            .T
            for t in range(frames)
        ]
        space = len(patches[0])
        tokens = {
            (s, t): patches[t][s] + pos[1 + s] + time_embed[t] for s in range(space) for t in range(frames)
        }
        cls = state["cls_token"][0, 0] + pos[0]
        for i in range(DEPTH):
            b = f"blocks.{i}."
            for s in range(space):  # temporal attention over the frames of patch s, then temporal_fc
                seq = torch.stack([tokens[s, t] for t in range(frames)])
                residual = attention(_ln(seq, state, b + "temporal_norm1"), b + "temporal_attn")
                residual = residual @ state[b + "temporal_fc.weight"].T + state[b + "temporal_fc.bias"]
                for t in range(frames):
                    tokens[s, t] = tokens[s, t] + residual[t]
            cls_out, spatial = [], {}
            for t in range(frames):  # spatial attention in frame t, with the CLS token
                seq = torch.stack([cls] + [tokens[s, t] for s in range(space)])
                out = attention(_ln(seq, state, b + "norm1"), b + "attn")
                cls_out.append(out[0])
                spatial |= {(s, t): out[1 + s] for s in range(space)}
            cls = cls + torch.stack(cls_out).mean(0)  # the CLS residual is averaged over the frames
            tokens = {key: value + spatial[key] for key, value in tokens.items()}
            cls = cls + mlp(cls, b)
            tokens = {key: value + mlp(value, b) for key, value in tokens.items()}
        features.append(_ln(cls, state, "norm"))
    return torch.stack(features)


def _clips(frames: int = FRAMES, size: int = SIZE, batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, 3, frames, size, size, generator=torch.Generator().manual_seed(5))


def _windows(clips: torch.Tensor) -> torch.Tensor:
    """The encoder's window layout [B, T, 3, H, W] of upstream clips [B, 3, T, H, W]."""
    return clips.transpose(1, 2).contiguous()


@pytest.fixture
def tiny_entries(temp_entry):
    """Registry entries for the tiny test models (32-px frames, 4-frame windows), weights from $env paths."""
    config = DataConfig(input_size=(3, SIZE, SIZE), resize_size=SIZE, crop_pct=1.0, interpolation="bilinear")
    common = {"feature_dim": DIM, "data_config": config, "license": "test", "citation": "test"}
    temp_entry(
        ModelEntry(
            "tiny-videomae",
            "videomaev2",
            converter="videomae",
            clip=ClipSampling(FRAMES, frame_stride=2),
            path_env="TINY_VIDEOMAE",
            **common,
        )
    )
    temp_entry(
        ModelEntry(
            "tiny-timesformer",
            "timesformer",
            converter="timesformer",
            clip=ClipSampling(FRAMES, stride_seconds=0.5),
            path_env="TINY_TIMESFORMER",
            **common,
        )
    )


# ------------------------------------------------------------------------------------------- VideoMAE V2


def test_videomae_hub_layout_gives_the_upstream_feature(tmp_path, monkeypatch, tiny_entries):
    """OpenGVLab/VideoMAEv2-* on the Hub: `model.`-prefixed safetensors of the fine-tune layout."""
    state = videomae_state()
    path = tmp_path / "model.safetensors"
    save_file({f"model.{k}": v for k, v in state.items()}, str(path))
    monkeypatch.setenv("TINY_VIDEOMAE", str(path))
    encoder = load_encoder("tiny-videomae")
    assert encoder.clip == ClipSampling(FRAMES, frame_stride=2) and encoder.feature_dim == DIM
    assert encoder.provenance["clip"] == {
        "num_frames": 4,
        "frame_stride": 2,
        "stride_seconds": None,
        "anchor": 2,
    }
    clips = _clips()
    with torch.no_grad():
        torch.testing.assert_close(
            encoder(_windows(clips)), videomae_reference(state, clips), rtol=1e-4, atol=1e-4
        )
        other = videomae_reference(videomae_state(seed=1), clips)
    assert not torch.allclose(other, videomae_reference(state, clips), atol=1e-2)  # the check can fail


def test_videomae_pretraining_and_finetuned_layouts(tmp_path, monkeypatch, tiny_entries):
    """`run_mae_pretraining.py` saves {model: encoder.* + decoder.*}; fine-tuning {module: ... + head.*}."""
    clips = _clips()
    pretrain = videomae_state(seed=2, final="norm")
    checkpoint = {
        "model": {f"encoder.{k}": v for k, v in pretrain.items()}
        | {"decoder.blocks.0.norm1.weight": torch.ones(64), "encoder_to_decoder.weight": torch.ones(64, DIM)}
        | {"mask_token": torch.zeros(1, 1, 64)},
        "epoch": 799,
    }
    path = tmp_path / "vit_b_hybrid_pt_800e.pth"
    torch.save(checkpoint, path)
    monkeypatch.setenv("TINY_VIDEOMAE", str(path))
    encoder = load_encoder("tiny-videomae")
    assert encoder.provenance["dropped_keys"] == 3  # the decoder, its input projection, the mask token
    with torch.no_grad():
        torch.testing.assert_close(
            encoder(_windows(clips)), videomae_reference(pretrain, clips), rtol=1e-4, atol=1e-4
        )
    finetuned = videomae_state(seed=3, layer_scale=True)
    torch.save(
        {"module": finetuned | {"head.weight": torch.ones(710, DIM), "head.bias": torch.ones(710)}}, path
    )
    encoder = load_encoder("tiny-videomae")
    assert encoder.provenance["dropped_keys"] == 2  # the K710 classifier
    with torch.no_grad():
        torch.testing.assert_close(
            encoder(_windows(clips)), videomae_reference(finetuned, clips), rtol=1e-4, atol=1e-4
        )


def test_a_bare_videomae_checkpoint_is_read_as_the_registry_baseline(tmp_path):
    path = tmp_path / "videomae.safetensors"
    save_file(videomae_state(), str(path))
    assert clip_layout(videomae_state()) == "videomae"
    encoder = load_encoder(path)
    entry = MODELS["videomaev2-vitb16"]
    assert encoder.clip == entry.clip == VIDEOMAE_V2_CLIP and encoder.data_config == entry.data_config
    assert (encoder.model.num_frames, encoder.model.img_size) == (16, 224)
    assert encoder.model.pos_embed.shape == (1, 16 // TUBELET * (224 // PATCH) ** 2, DIM)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.pop("blocks.1.attn.v_bias"), r"missing \['blocks.1.attn.v_bias'\]"),
        (
            lambda s: s.update({"blocks.0.attn.k_bias": torch.zeros(DIM)}),
            r"unexpected \['blocks.0.attn.k_bias'\]",
        ),
        (
            lambda s: s.update({"norm.weight": torch.ones(DIM), "norm.bias": torch.ones(DIM)}),
            "exactly one final",
        ),
        (lambda s: s.update({"cls_token": torch.zeros(1, 1, DIM)}), r"cannot map: \['cls_token'\]"),
    ],
)
def test_videomae_loads_strictly(tmp_path, monkeypatch, tiny_entries, edit, message):
    state = videomae_state()
    edit(state)
    path = tmp_path / "bad.pth"
    torch.save({"model": state}, path)
    monkeypatch.setenv("TINY_VIDEOMAE", str(path))
    with pytest.raises(CheckpointError, match=message):
        load_encoder("tiny-videomae")


def test_videomaev2_entry_reads_the_hub_file_and_pins_vit_b(hf_cache):
    hf_cache(
        "OpenGVLab/VideoMAEv2-Base",
        {
            "model.safetensors": lambda p: save_file(
                {f"model.{k}": v for k, v in videomae_state().items()}, str(p)
            )
        },
    )
    with pytest.raises(CheckpointError, match="expected architecture.*embed_dim: found 128, expected 768"):
        load_encoder("videomaev2-vitb16")


# ------------------------------------------------------------------------------------ Endo-FM (TimeSformer)


def endo_fm_checkpoint(state: dict) -> dict:
    """Endo-FM's `train_ssl.py` (DINO/SVT) save dict: teacher with `backbone.` + DINO head, DDP student."""
    head = {"head.mlp.0.weight": torch.ones(16, DIM), "head.last_layer.weight_g": torch.ones(8, 1)}
    student = {f"module.backbone.{k}": v + 1.0 for k, v in state.items()}
    return {
        "teacher": {f"backbone.{k}": v for k, v in state.items()} | head,
        "student": student | {f"module.{k}": v for k, v in head.items()},
        "optimizer": {"state": {}, "param_groups": []},
        "epoch": 30,
    }


def test_endo_fm_checkpoint_gives_the_upstream_feature(tmp_path, monkeypatch, tiny_entries):
    state = timesformer_state()
    path = tmp_path / "endo_fm.pth"
    torch.save(endo_fm_checkpoint(state), path)
    monkeypatch.setenv("TINY_TIMESFORMER", str(path))
    encoder = load_encoder("tiny-timesformer")
    assert encoder.provenance["dropped_keys"] == 2 and encoder.clip.stride_seconds == 0.5
    clips = _clips()
    with torch.no_grad():
        features = encoder(_windows(clips))
        torch.testing.assert_close(features, timesformer_reference(state, clips), rtol=1e-4, atol=1e-4)
        student = load_encoder("tiny-timesformer", which="student")(_windows(clips))
    assert not torch.allclose(student, features, atol=1e-2)


def test_timesformer_resamples_its_time_embedding_as_upstream(tmp_path):
    """A window of another length: `time_embed` resampled by nearest neighbour, as upstream does."""
    state = timesformer_state(seed=4)
    path = tmp_path / "timesformer.pth"
    torch.save(state, path)
    encoder = load_encoder(
        path
    )  # a bare checkpoint: Endo-FM's window, at the checkpoint's own size and length
    assert encoder.clip == ClipSampling(FRAMES, stride_seconds=ENDO_FM_CLIP.stride_seconds)
    assert encoder.data_config.input_size == (3, SIZE, SIZE) and encoder.data_config.mean == (
        0.45,
        0.45,
        0.45,
    )
    clips = _clips(frames=2)
    nearest = state["time_embed"][:, [0, 2]]  # 4 -> 2 frames, nearest: source indices floor(i * 4 / 2)
    with torch.no_grad():
        features = encoder.model(clips)
        torch.testing.assert_close(
            features, timesformer_reference(state | {"time_embed": nearest}, clips), rtol=1e-4, atol=1e-4
        )
    with pytest.raises(ConfigError, match=r"clip encoder: pass windows \[B, 4, 3, H, W\]"):
        encoder(torch.zeros(2, 3, SIZE, SIZE))  # frames to a clip encoder: one clear error


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.pop("blocks.0.temporal_fc.bias"), r"missing \['blocks.0.temporal_fc.bias'\]"),
        (lambda s: s.update({"aux_cls_token": torch.zeros(1, 1, DIM)}), r"cannot map: \['aux_cls_token'\]"),
        (
            lambda s: [s.pop(k) for k in list(s) if ".temporal_" in k],
            "only divided space-time TimeSformers",
        ),
        (lambda s: s.update({"blocks.0.temporal_norm2.weight": torch.ones(DIM)}), "unexpected"),
    ],
)
def test_timesformer_loads_strictly(tmp_path, monkeypatch, tiny_entries, edit, message):
    state = timesformer_state()
    edit(state)
    path = tmp_path / "bad.pth"
    torch.save(endo_fm_checkpoint(state), path)
    monkeypatch.setenv("TINY_TIMESFORMER", str(path))
    with pytest.raises(CheckpointError, match=message):
        load_encoder("tiny-timesformer")


# ---------------------------------------------------------------------------------------------- registry


def test_clip_baselines_are_registered_with_their_authors_windows():
    videomae, endo_fm = MODELS["videomaev2-vitb16"], MODELS["endo-fm"]
    assert (videomae.clip.num_frames, videomae.clip.frame_stride, videomae.clip.anchor) == (16, 4, 8)
    assert videomae.repo_id == "OpenGVLab/VideoMAEv2-Base" and videomae.license == "CC-BY-NC-4.0"
    assert videomae.data_config.crop_mode == "center" and videomae.data_config.resize_size == 224
    assert endo_fm.clip.num_frames == 8 and math.isclose(endo_fm.clip.stride_seconds, 256 / 30 / 7)
    assert endo_fm.data_config.mean == (0.45, 0.45, 0.45) and endo_fm.data_config.std == (0.225, 0.225, 0.225)
    assert endo_fm.repo_id is None and endo_fm.path_env == "PLSTITCH_ENDOFM_CHECKPOINT"
    for entry in (videomae, endo_fm):
        assert "github.com" in entry.preprocessing_source and entry.license_source


def test_a_clip_converter_needs_a_window():
    with pytest.raises(ConfigError, match="need a clip window"):
        register(ModelEntry("no-window", "videomaev2", 8, "videomae", license="x", citation="x"))
    assert "no-window" not in MODELS

"""A new architecture is its converter (loader + facts, `register_converter`) and its entry (`register`):
a toy encoder declared only here is listed by `plstitch models` and extracts features through the CLI that
equal its own forward on the decoded frames."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.synthetic import PARAMS_FILE, VERSION, SyntheticConfig
from plstitch_eval.data.video import read_frames
from plstitch_eval.errors import ConfigError
from plstitch_eval.hub import Converted, DataConfig, ModelEntry, load_encoder, register_converter
from plstitch_eval.hub.converter_registry import (
    CLIP_CONVERTERS,
    CLIP_DEFAULTS,
    CONVERTERS,
    FEATURES,
    LOADERS,
    converter_info,
    unregister_converter,
)
from plstitch_eval.hub.model_registry import MODELS, SHIPPED, list_models, register, registered, unregister
from plstitch_eval.store.features import FeatureStore
from tests.eval.extract.conftest import make_cholec80

runner = CliRunner()
TAG = "toy-pool"
NAME = "toy-pool-encoder"
DIM = 6
FPS = 2.0
FEATURE = "mean over the frame of a 4x4 stride-4 convolution"
TOY_CONFIG = DataConfig.for_size(16, interpolation="bilinear")


class ToyPool(nn.Module):
    """A D-dim frame feature: a 4x4 stride-4 convolution averaged over the frame (no CLS token)."""

    def __init__(self, dim: int = DIM) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=4, stride=4)
        self.num_features = dim

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).mean(dim=(2, 3))

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        return x


def load_toy(checkpoint: Any, entry: ModelEntry | None, which: str, source: str) -> Converted:
    """The toy converter's loader: every tensor of the file into a `ToyPool`, strictly."""
    model = ToyPool(int(checkpoint["proj.weight"].shape[0]))
    model.load_state_dict(checkpoint, strict=True)
    return Converted(model.eval(), (entry.data_config if entry else None) or TOY_CONFIG, [])


@pytest.fixture
def toy_weights(tmp_path: Path) -> Path:
    """The toy's weights as one safetensors file (seeded, so the reference below is the same module)."""
    torch.manual_seed(3)
    path = tmp_path / "toy" / "toy_pool.safetensors"
    path.parent.mkdir()
    save_file(ToyPool().state_dict(), str(path))
    return path


@pytest.fixture
def toy_entry(toy_weights: Path) -> Iterator[ModelEntry]:
    """Converter `toy-pool` and entry `toy-pool-encoder` registered for one test, removed afterwards."""
    register_converter(TAG, load_toy, feature=FEATURE)
    entry = ModelEntry(
        name=NAME,
        architecture="toy_pool4",
        feature_dim=DIM,
        converter=TAG,
        data_config=TOY_CONFIG,
        local_path=str(toy_weights),
        license="MIT",
        license_source="this test",
        preprocessing_source="this test",
        citation="n/a",
        description="toy encoder of the registry tests",
    )
    try:
        with registered(entry):
            yield entry
    finally:
        unregister_converter(TAG)
    assert NAME not in MODELS and TAG not in CONVERTERS and TAG not in LOADERS and TAG not in FEATURES


@pytest.fixture
def synthetic_root(tmp_path: Path) -> Path:
    """Two tiny real MP4s that the synthetic adapter takes as already generated (its params.json matches)."""
    root = make_cholec80(tmp_path / "synthetic", (2, 3))
    (root / PARAMS_FILE).write_text(json.dumps({"version": VERSION, **asdict(SyntheticConfig())}))
    return root


def test_a_toy_converter_is_one_declaration(toy_entry: ModelEntry) -> None:
    assert CONVERTERS[-1] == TAG and TAG not in CLIP_CONVERTERS and TAG not in CLIP_DEFAULTS
    assert LOADERS[TAG] is load_toy and converter_info(TAG).weights
    assert toy_entry.feature_description == FEATURE and toy_entry.has_weights
    assert list_models()[-1] is toy_entry  # no listing place: after every shipped entry


def test_the_toy_is_listed_by_plstitch_models(toy_entry: ModelEntry) -> None:
    result = runner.invoke(app, ["models", "--json", "-"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows[-1]["name"] == NAME and rows[-1]["feature_dim"] == DIM


def test_toy_extracts_its_own_features_through_the_cli(
    toy_entry: ModelEntry, synthetic_root: Path, tmp_path: Path
) -> None:
    out = tmp_path / "store"
    args = ["extract", "--dataset", "synthetic", "--root", str(synthetic_root), "--out", str(out),
            "--model", NAME, "--fps", str(FPS), "--num-workers", "0", "--device", "cpu"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    encoder = load_encoder(NAME)
    assert encoder.feature_dim == DIM and encoder.data_config == TOY_CONFIG
    store = FeatureStore(out)
    records = get_dataset("synthetic", root=synthetic_root).videos()
    assert store.videos() == [r.name for r in records] == ["video01", "video02"]
    for record in records:
        item = store.read(record.name)
        frames = list(read_frames(record.source, fps=FPS))
        # reference: an independent ToyPool with the file's weights, on the encoder's transform of each frame
        reference = ToyPool()
        reference.load_state_dict(load_toy_state(toy_entry))
        x = torch.stack([encoder.transform(frame.image) for frame in frames])
        with torch.inference_mode():
            expected = reference.proj(x).mean(dim=(2, 3)).numpy()
        assert item.features.shape == (len(frames), DIM) and np.isfinite(item.features).all()
        np.testing.assert_allclose(item.features, expected, rtol=1e-5, atol=1e-5)
        assert np.ptp(item.features, axis=0).max() > 0  # the frames differ, and so do their features


def load_toy_state(entry: ModelEntry) -> dict[str, torch.Tensor]:
    """The toy's weights read back from its file (safetensors, without the hub's loader)."""
    return load_file(str(entry.resolve_local_path()))


def test_a_listing_place_puts_an_entry_among_the_shipped(toy_entry: ModelEntry) -> None:
    names = [entry.name for entry in list_models()]
    placed = ModelEntry("toy-before-shipped", "toy_pool4", DIM, TAG, local_path=toy_entry.local_path)
    try:
        register(placed, listing=SHIPPED - 1)  # just before the shipped tiny models
        listed = [entry.name for entry in list_models()]
        first_shipped = names.index("plstitch-tiny-synthetic")
        assert listed == [*names[:first_shipped], placed.name, *names[first_shipped:]]
        assert list(MODELS) == listed
    finally:
        unregister(placed.name)
    assert [entry.name for entry in list_models()] == names


def test_entries_need_a_registered_tag_and_a_matching_window(toy_entry: ModelEntry) -> None:
    with pytest.raises(ConfigError, match="unknown converter 'toy-unknown'"):
        register(ModelEntry("toy-unknown", "x", 4, "toy-unknown"))
    with pytest.raises(ConfigError, match="need a clip window"):
        register(ModelEntry("toy-clip", "x", 4, "videomae"))
    with pytest.raises(ConfigError, match="clip_default"):
        register_converter("toy-clip-tag", load_toy, clip=True)
    assert "toy-clip-tag" not in CONVERTERS and "toy-unknown" not in MODELS and "toy-clip" not in MODELS

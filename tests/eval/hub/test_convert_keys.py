"""Issue 59 item 5: a checkpoint that is neither a ViT nor a ConvNeXt (a ResNet-18 state dict) is refused
listing its own keys, as the README promises, not the ViT keys it lacks (`keys start with []` before)."""

from __future__ import annotations

import pytest
import torch
import torchvision
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import CheckpointError
from plstitch_eval.hub.convert import model_from_checkpoint
from tests.eval.extract.conftest import make_cholec80


def test_a_resnet_state_dict_is_refused_with_its_keys():
    state = torchvision.models.resnet18().state_dict()
    with pytest.raises(CheckpointError) as info:
        model_from_checkpoint(state, source="r18.pth")
    message = str(info.value)
    assert message.startswith(
        "r18.pth is not a ViT or ConvNeXt checkpoint ('patch_embed.proj.weight' is missing)"
    )
    assert f"it holds {len(state)} tensors: conv1.weight, bn1.weight, bn1.bias," in message
    assert "(top-level names: bn1, conv1, fc, layer1, layer2, layer3, layer4)" in message


def test_the_cli_says_it_in_one_line(tmp_path):
    path = tmp_path / "r18.pth"
    torch.save({"conv1.weight": torch.zeros(4, 3, 3, 3), "fc.weight": torch.zeros(2, 4)}, path)
    root = make_cholec80(tmp_path / "c80", (1,))
    args = [
        "extract",
        "--dataset",
        "cholec80",
        "--root",
        str(root),
        "--model",
        str(path),
        "--out",
        str(tmp_path / "s"),
    ]
    result = CliRunner().invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert "it holds 2 tensors: conv1.weight, fc.weight (top-level names: conv1, fc)" in lines[0]

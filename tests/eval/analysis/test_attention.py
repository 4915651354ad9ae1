import json

import numpy as np
import torch
from typer.testing import CliRunner

from plstitch_eval.analysis.attention import cls_attention_maps, entropy_bits, last_block_attention
from plstitch_eval.cli import app
from tests.eval.analysis.conftest import check_png, tiny_vit

runner = CliRunner()


def test_attention_weights_reproduce_the_block_output():
    model = tiny_vit(0)
    x = torch.randn(2, 3, 32, 32)
    seen = {}
    attn = model.blocks[-1].attn
    h1 = attn.register_forward_pre_hook(lambda m, a: seen.__setitem__("in", a[0]))
    h2 = attn.register_forward_hook(lambda m, a, out: seen.__setitem__("out", out))
    weights = last_block_attention(model, x)
    with torch.no_grad():
        model.forward_features(x)
    h1.remove()
    h2.remove()
    assert weights.shape == (2, 4, 17, 17)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 17))
    # textbook attention output from our weights: proj(concat_h(W_h V_h)) must equal what the block computed
    tokens = seen["in"]
    v = attn.qkv(tokens).reshape(2, 17, 3, 4, 8)[:, :, 2].transpose(1, 2)  # [B, heads, N, head_dim]
    out = attn.proj((weights @ v).transpose(1, 2).reshape(2, 17, 32))
    torch.testing.assert_close(out, seen["out"], atol=1e-5, rtol=1e-4)
    maps = cls_attention_maps(model, x)
    assert maps.shape == (2, 4, 4, 4)
    torch.testing.assert_close(maps.flatten(2), weights[:, :, 0, 1:])


def test_entropy_bits():
    assert abs(entropy_bits(np.ones((4, 4))) - 4.0) < 1e-12
    assert entropy_bits(np.eye(1)) == 0.0


def test_attention_cli(tmp_path, vit_dirs, frames):
    args = ["analyze", "attention", "--model", str(vit_dirs[0]), "--frames", str(frames[0]), str(frames[1])]
    result = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "4 heads" in result.stdout
    check_png(tmp_path / "attention.png", 1.7 * 6, 1.85 * 2 + 0.5)
    data = json.loads((tmp_path / "attention.json").read_text())
    assert data["n_heads"] == 4 and data["input_size"] == [32, 32]
    assert list(data["frames"]) == ["frame0.png", "frame1.png"]
    f0 = data["frames"]["frame0.png"]
    head_maps = np.asarray(f0["head_maps"])
    assert head_maps.shape == (4, 4, 4) and f0["grid"] == [4, 4]
    assert np.all(head_maps.sum(axis=(1, 2)) <= 1 + 1e-5)  # part of a softmax row (CLS self-weight left out)
    np.testing.assert_allclose(f0["mean_map"], head_maps.mean(0), atol=1e-5)
    assert 0 < f0["mean_entropy_bits"] <= 4.0 + 1e-9 and len(f0["head_entropy_bits"]) == 4

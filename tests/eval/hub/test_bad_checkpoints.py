"""Files that are no checkpoint (text, random bytes, empty, cut short) fail with one line naming the file."""

import pickle
import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import CheckpointError, UnsafeCheckpointError
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.ranking_head import TemporalHead, load_temporal_head, save_temporal_head
from plstitch_eval.hub.safe_load import load_checkpoint
from plstitch_eval.hub.timm_format import save_timm_dir
from plstitch_eval.preprocess import DataConfig
from tests.eval.hub.conftest import make_tiny_vit

runner = CliRunner()


def _tiny_state() -> dict[str, torch.Tensor]:
    return {k: v.contiguous() for k, v in make_tiny_vit().state_dict().items()}


def _cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _text(path: Path) -> None:
    path.write_text("hello world, this is not a model\n")  # torch's unpickler: KeyError: 101


def _random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(0).randbytes(4096))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _truncated_checkpoint(path: Path) -> None:
    torch.save({"model": _tiny_state()}, path)
    _cut_in_half(path)


def _truncated_safetensors(path: Path) -> None:
    save_file(_tiny_state(), str(path))
    _cut_in_half(path)


BAD_FILES = {
    "text.pth": _text,
    "random.pth": _random_bytes,
    "empty.pth": _empty,
    "truncated.pth": _truncated_checkpoint,
    "truncated.safetensors": _truncated_safetensors,
    "empty.safetensors": _empty,
    "text.safetensors": _text,
}


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_bad_model_file_is_one_line_through_the_cli(tmp_path, name):
    bad = tmp_path / name
    BAD_FILES[name](bad)
    args = ["extract", "--dataset", "synthetic", "--out", str(tmp_path / "out"), "--model", str(bad)]
    result = runner.invoke(app, args)
    assert isinstance(result.exception, SystemExit), result.exception  # not an uncaught KeyError etc.
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and name in lines[0] and "Traceback" not in result.output
    assert "--trust-pickle" not in lines[0]  # garbage is not "a pickle that needs code"
    assert "checkpoint" in lines[0] and "timm folder" in lines[0]  # names the fix


@pytest.mark.parametrize(
    "content",
    [b"t", b"R", b"\x80\x02", b"\x80\x02}q\x00", b"PK\x03\x04garbage", b"\x00" * 64],
    ids=["tuple-no-mark", "reduce-empty", "proto-only", "no-stop", "zip-header-only", "zeros"],
)
def test_every_unpickling_failure_is_a_checkpoint_error(tmp_path, content):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(content)
    with pytest.raises(CheckpointError, match="bad.pt") as info:
        load_checkpoint(bad)
    assert not isinstance(info.value, UnsafeCheckpointError)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes_are_never_called_unsafe(tmp_path, seed):
    bad = tmp_path / f"random{seed}.bin"
    bad.write_bytes(random.Random(seed).randbytes(2048))
    with pytest.raises(CheckpointError, match="is not a PyTorch checkpoint") as info:
        load_checkpoint(bad)
    assert not isinstance(info.value, UnsafeCheckpointError)


def test_truncated_zip_checkpoint_says_truncated(tmp_path):
    path = tmp_path / "cut.pth"
    _truncated_checkpoint(path)
    with pytest.raises(CheckpointError, match=r"cut.pth is a truncated or damaged PyTorch checkpoint"):
        load_checkpoint(path)


def test_truncated_legacy_checkpoint_is_not_called_unsafe(tmp_path):
    path = tmp_path / "legacy.pth"
    torch.save({"model": _tiny_state()}, path, _use_new_zipfile_serialization=False)
    _cut_in_half(path)
    with pytest.raises(CheckpointError, match="legacy.pth is not a PyTorch checkpoint") as info:
        load_checkpoint(path)
    assert not isinstance(info.value, UnsafeCheckpointError)


def test_empty_file_says_empty(tmp_path):
    path = tmp_path / "zero.ckpt"
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"zero.ckpt is empty \(0 bytes\)"):
        load_checkpoint(path)


def test_fix_text_is_the_callers(tmp_path):
    path = tmp_path / "last.ckpt"
    _text(path)
    with pytest.raises(CheckpointError, match="pass a run folder or its last.ckpt"):
        load_checkpoint(path, fix="pass a run folder or its last.ckpt")


def test_garbage_with_trust_pickle_is_one_line(tmp_path):
    path = tmp_path / "text.pth"
    _text(path)
    with pytest.raises(CheckpointError, match="text.pth even with --trust-pickle") as info:
        load_checkpoint(path, trust_pickle=True)
    assert "\n" not in str(info.value)


class _Custom:
    def __init__(self, value):
        self.value = value


def test_real_pickles_are_still_refused_with_the_trust_hint(tmp_path):
    protocol4 = tmp_path / "protocol4.pth"
    torch.save({"model": {"w": torch.ones(2)}}, protocol4, pickle_protocol=4)  # opcodes torch's loader lacks
    custom = tmp_path / "custom.pth"
    torch.save({"model": _tiny_state(), "meta": _Custom(1)}, custom)
    plain = tmp_path / "plain.pth"
    with plain.open("wb") as handle:
        pickle.dump({"meta": _Custom(1)}, handle)
    for path in (protocol4, custom, plain):
        with pytest.raises(UnsafeCheckpointError, match="--trust-pickle") as info:
            load_checkpoint(path)
        assert "\x1b" not in str(info.value) and "\n" not in str(info.value)  # no ANSI from torch's banner
    with pytest.raises(UnsafeCheckpointError, match=r"references .*_Custom"):
        load_checkpoint(custom)
    assert torch.equal(load_checkpoint(protocol4, trust_pickle=True)["model"]["w"], torch.ones(2))


def test_refusal_prints_no_torch_protocol_warning(tmp_path, recwarn):
    path = tmp_path / "p4.pth"
    torch.save({"w": torch.ones(1)}, path, pickle_protocol=4)
    with pytest.raises(UnsafeCheckpointError):
        load_checkpoint(path)
    assert not [w for w in recwarn if "pickle protocol" in str(w.message)]


def test_timm_folder_with_truncated_weights(tmp_path):
    folder = save_timm_dir(make_tiny_vit(), tmp_path / "timm", DataConfig.for_size(32))
    _cut_in_half(folder / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"model.safetensors is not a readable safetensors file"):
        load_encoder(str(folder))


def test_temporal_head_folder_with_truncated_weights(tmp_path):
    folder = save_temporal_head(TemporalHead(64), tmp_path / "head")
    weights = next(folder.glob("*.safetensors"))
    _cut_in_half(weights)
    with pytest.raises(CheckpointError, match=rf"{weights.name} is not a readable safetensors file"):
        load_temporal_head(str(folder))

"""`EncodeOptions`: the decoding and encoding settings `ExtractOptions` and `PredictOptions` share, checked
once (in `EncodeOptions.__post_init__`) with each class's own wording of the error."""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch

from plstitch_eval.encode_options import EncodeOptions
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import ExtractOptions
from plstitch_eval.predict import PredictOptions

SHARED = ("batch_size", "num_workers", "device", "precision", "decoder", "decode_device")
BAD = [
    ("batch_size", 0, "batch_size (--batch-size) must be >= 1, got 0.", "--batch-size must be >= 1, got 0."),
    ("num_workers", -1, "num_workers (--num-workers) must be >= 0", "--num-workers must be >= 0, got -1."),
    ("precision", "fp8", "precision (--precision) must be auto | fp32", "--precision must be auto | fp32"),
]


def test_both_option_classes_hold_the_shared_fields_with_the_same_defaults() -> None:
    assert tuple(f.name for f in fields(EncodeOptions)) == SHARED
    for options in (ExtractOptions(), PredictOptions()):
        assert isinstance(options, EncodeOptions)
        for name in SHARED:
            if name != "decoder":
                assert getattr(options, name) == getattr(EncodeOptions(), name), name
    assert (ExtractOptions().decoder, PredictOptions().decoder) == ("pyav", None)  # None: the probe's


@pytest.mark.parametrize(("field", "value", "extract_error", "predict_error"), BAD)
def test_one_check_words_its_error_for_each_command(field, value, extract_error, predict_error) -> None:
    with pytest.raises(ConfigError) as info:
        ExtractOptions(**{field: value})
    assert str(info.value).startswith(f"Extraction {extract_error}")
    with pytest.raises(ConfigError) as info:
        PredictOptions(**{field: value})
    assert str(info.value).startswith(predict_error)
    with pytest.raises(ConfigError, match=f"^{predict_error.split(' must')[0]} must"):
        EncodeOptions(**{field: value})


@pytest.mark.parametrize("options_class", [EncodeOptions, ExtractOptions, PredictOptions])
def test_the_decoder_pair_is_checked_in_every_class(options_class) -> None:
    with pytest.raises(ConfigError, match="--decoder must be one of"):
        options_class(decoder="nope")
    with pytest.raises(ConfigError, match="--decode-device must be auto, cpu, cuda or cuda:N"):
        options_class(decoder="pyav", decode_device="tpu")
    assert options_class(decoder="pyav", decode_device="cuda").decode_device == "cuda"  # NVDEC: at run time
    assert options_class(device=torch.device("cpu")).device == "cpu"


def test_extraction_keeps_its_own_checks() -> None:
    with pytest.raises(ConfigError, match=r"^Extraction fps \(--fps\) must be > 0, got 0"):
        ExtractOptions(fps=0)
    with pytest.raises(ConfigError, match="must be a list of names"):
        ExtractOptions(videos="video01")


def test_encoding_is_the_shared_part_alone() -> None:
    extract = ExtractOptions(batch_size=8, fps=2.0, device="cpu", overwrite=True)
    predict = PredictOptions(batch_size=8, device="cpu", decoder="pyav", which="student")
    assert extract.encoding() == predict.encoding() == EncodeOptions(batch_size=8, device="cpu")
    assert type(extract.encoding()) is EncodeOptions

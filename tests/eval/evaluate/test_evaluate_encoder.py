"""`EvaluateConfig` is checked when made; `result_paths` names the files `evaluate_encoder` writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.evaluate import EvaluateConfig, result_paths
from plstitch_eval.extract import ExtractOptions
from plstitch_eval.knn_vote import KnnConfig


def test_result_paths_name_one_json_per_protocol(tmp_path: Path) -> None:
    assert result_paths(tmp_path) == {"knn": tmp_path / "knn.json", "linear": tmp_path / "linear.json"}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"dataset": ""}, "dataset"),
        ({"dataset_options": {"fps": 2.0}}, "fps"),
        ({"extract": {"fps": 2.0}}, "extract"),
        ({"knn": ExtractOptions()}, "knn"),
        ({"linear": KnnConfig()}, "linear"),
    ],
)
def test_bad_config_is_a_one_line_config_error(changes, field) -> None:
    with pytest.raises(ConfigError, match=field) as info:
        EvaluateConfig(**changes)
    assert "\n" not in str(info.value)

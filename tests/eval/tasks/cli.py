"""What the task tests share: the store a synthetic variant gives through extraction, and a refusal's line."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.store.features import FeatureStore

runner = CliRunner()


def synthetic_store(dataset: str, tmp: Path, **tiny: object) -> FeatureStore:
    """A small `dataset` (a synthetic variant, `tiny` its options) extracted with the raw-pixels encoder."""
    adapter = get_dataset(dataset, root=tmp / "synthetic", **tiny)
    options = ExtractOptions(num_workers=0, device="cpu", progress=False)
    assert extract_features(adapter, "raw-pixels", tmp / "store", options).ok
    return FeatureStore(tmp / "store")


def refused(*args: str) -> str:
    """The one `error: ...` line of a command that must refuse (exit 1, no traceback)."""
    result = runner.invoke(app, list(args))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]

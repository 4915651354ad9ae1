"""`plstitch temporal`'s choices, in `plstitch_eval/protocols/temporal.py` without the CLI: `--threads` over
the config (None keeps it, 0 is torch's default, N is N), one run or several seeds, and the table's title (the
fits are stand-ins: `run_temporal` and `run_temporal_seeds` replaced)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plstitch_eval.protocols import temporal as protocol
from plstitch_eval.protocols.temporal import TemporalRun, temporal_run, with_threads
from plstitch_eval.temporal.fit import DEFAULT_THREADS, TemporalConfig, TemporalProbeResult


def _fit(epoch: int, threads: int = 1) -> TemporalProbeResult:
    return TemporalProbeResult(model=None, best_epoch=epoch, val_scores=[], threads=threads, device="cpu")


def test_threads_none_keeps_the_config_0_is_torchs_default_n_is_n() -> None:
    config = TemporalConfig()
    assert with_threads(config, None) is config and config.num_threads == DEFAULT_THREADS
    assert with_threads(config, 0).num_threads is None
    assert with_threads(config, 3).num_threads == 3
    assert with_threads(TemporalConfig(num_threads=4), None).num_threads == 4


@pytest.fixture
def fits(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Stand-ins for the two fits; the calls they received."""
    calls: list[tuple] = []

    def one(features, config, **options):
        calls.append(("one", options))
        return {"metrics": {"accuracy": 0.5}}, _fit(7)

    def seeds(features, config, count, **options):
        calls.append(("seeds", count, options))
        return {"metrics": {"accuracy": 0.6}}, [_fit(3, threads=4), _fit(5, threads=4)]

    monkeypatch.setattr(protocol, "run_temporal", one)
    monkeypatch.setattr(protocol, "run_temporal_seeds", seeds)
    return calls


def test_one_seed_is_one_fit_titled_with_its_epoch(fits) -> None:
    options = {"scheme": None, "val_fraction": 0.2, "relaxed": False}
    for seeds in (None, 1):
        run = temporal_run(Path("store"), TemporalConfig(), seeds, **options)
        assert isinstance(run, TemporalRun) and run.fit.best_epoch == 7
        assert run.title == "temporal (MS-TCN 4x10x64, epoch 7, cpu, 1 thread)"
    assert fits == [("one", options), ("one", options)]


def test_several_seeds_keep_the_first_fit_and_say_mean_and_std(fits) -> None:
    run = temporal_run(Path("store"), TemporalConfig(causal=True, stages=2), 2, relaxed=True)
    assert run.fit.best_epoch == 3 and run.results["metrics"]["accuracy"] == 0.6
    assert run.title == "temporal (causal MS-TCN 2x10x64, mean ± std over 2 seeds, cpu, 4 threads)"
    assert fits == [("seeds", 2, {"relaxed": True})]

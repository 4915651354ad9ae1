"""The protocol registry: lookups name the known protocols in one line, a name is registered once, and the
shipped protocols keep their order, labels, titles, settings and probe kinds."""

from __future__ import annotations

import pytest

from plstitch_eval.benchmark import BenchmarkConfig, parse_protocols
from plstitch_eval.benchmark.datasets_file import parse_datasets
from plstitch_eval.errors import ConfigError
from plstitch_eval.probes.kinds import probe_kinds
from plstitch_eval.protocols import (
    CV_PROTOCOLS,
    TASK_LABELS,
    TASK_TITLES,
    Protocol,
    benchmark_protocols,
    cv_protocols,
    get_protocol,
    register_protocol,
    registered_protocols,
    task_label,
    task_title,
    unregister_protocol,
)
from plstitch_eval.protocols.registry import PROTOCOLS
from plstitch_eval.protocols.temporal import temporal_settings
from plstitch_eval.registry import SHIPPED_PACKAGE
from plstitch_eval.temporal.fit import DEFAULT_THREADS, TemporalConfig

# the strings results tables and model cards showed before the registry (they must not change)
OLD_LABELS = {
    "knn": "k-NN",
    "linear": "linear",
    "linear-tools": "linear (tools)",
    "temporal": "MS-TCN",
    "cv-knn": "CV k-NN",
    "cv-linear": "CV linear",
    "cv-temporal": "CV MS-TCN",
}
OLD_TITLES = {
    "knn": "k-NN",
    "linear": "Linear probe",
    "linear-tools": "Tool presence (linear probe, AP)",
    "temporal": "MS-TCN on frozen features",
    "cv": "Cross-validated linear probe",
    "score": "Scored",
}


def test_unknown_name_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        get_protocol("tcn")
    message = str(caught.value)
    assert "\n" not in message and "'tcn'" in message
    assert all(name in message for name in ("knn", "majority", "linear", "temporal", "cv", "linear-tools"))
    with pytest.raises(
        ConfigError, match=r"^--cv-protocol must be one of knn, linear, temporal, got 'cv'\.$"
    ):
        get_protocol("cv", "cv-protocol", shipped(cv_protocols()))  # registered, but not among the choices


def test_a_second_protocol_of_the_same_name_is_refused() -> None:
    shipped = get_protocol("knn")
    assert register_protocol(shipped) is shipped  # the same object again: a no-op
    with pytest.raises(ConfigError, match="'knn' is already registered"):
        register_protocol(Protocol(name="knn", label="other", title="Other"))
    assert get_protocol("knn") is shipped


def test_unregistering_a_name_removes_it_from_every_listing() -> None:
    register_protocol(Protocol(name="scratch", label="S", title="Scratch"))
    try:
        assert "scratch" in TASK_LABELS and task_title("scratch") == "Scratch"
    finally:
        unregister_protocol("scratch")
    assert "scratch" not in TASK_LABELS and task_label("scratch") == "scratch"
    assert [p.name for p in registered_protocols()][:6] == [
        "knn", "majority", "linear", "temporal", "cv", "linear-tools"
    ]  # fmt: skip


def shipped(names: tuple[str, ...]) -> tuple[str, ...]:
    """The shipped ones among `names` (an installed plugin's protocols come after them)."""
    return tuple(name for name in names if PROTOCOLS.package(name) == SHIPPED_PACKAGE)


def test_shipped_order_labels_and_titles_are_unchanged() -> None:
    assert shipped(benchmark_protocols()) == ("knn", "linear", "temporal", "cv", "linear-tools")
    assert shipped(cv_protocols()) == shipped(CV_PROTOCOLS) == ("knn", "linear", "temporal")
    assert {task: TASK_LABELS[task] for task in OLD_LABELS} == OLD_LABELS
    assert {task: TASK_TITLES[task] for task in OLD_TITLES} == OLD_TITLES
    assert task_label("cv-linear") == "CV linear" and task_title("unheard-of") == "unheard-of"
    with pytest.raises(ConfigError, match="choose from knn, linear, temporal, cv, linear-tools[ ,]"):
        parse_protocols("knn,nope")


def test_probe_kinds_are_registered_probe_kinds() -> None:
    kinds = {p.name: p.probe_kind for p in registered_protocols() if p.probe_kind is not None}
    assert kinds == {"linear": "linear", "temporal": "temporal"}
    assert set(kinds.values()) <= set(probe_kinds())


def test_benchmark_settings_come_from_each_protocol(tmp_path) -> None:
    """What each cell's settings record, written out by hand as `BenchmarkConfig.settings` recorded it."""
    config = BenchmarkConfig(
        "plstitch-tiny-synthetic",
        parse_datasets("synthetic"),
        tmp_path,
        "knn,linear,temporal,cv,linear-tools",
    )
    dataset = config.datasets[0]
    knn = {"k": config.knn.k, "temperature": config.knn.temperature, "weighting": config.knn.weighting}
    settings = {p: config.settings("m", dataset, p) for p in config.protocols}
    assert {k: settings["knn"]["knn"][k] for k in knn} == knn
    assert not {"device", "num_threads", "chunk_size"} & set(settings["knn"]["knn"])
    assert settings["linear"]["val_fraction"] == 0.2 and settings["temporal"]["val_fraction"] == 0.2
    tools = {**settings["linear"]["linear"], "balance_classes": True, "select_metric": "mAP"}  # chosen on mAP
    assert settings["linear-tools"]["linear"] == tools
    assert settings["cv"]["folds"] == 5 and settings["cv"]["inner"] == "knn" and settings["cv"]["seed"] == 0
    assert settings["cv"]["knn"] == settings["knn"]["knn"] and "linear" not in settings["cv"]
    assert {s["protocol"] for s in settings.values()} == set(config.protocols)


def test_temporal_cell_settings_name_threads_and_device_only_off_their_defaults() -> None:
    """MS-TCN's results follow its thread count and device (docs/temporal.md): a benchmark cell made with
    other values must not be reused as if made at the defaults; cells made at the defaults keep their key."""
    default = temporal_settings(TemporalConfig())
    assert "num_threads" not in default and "device" not in default and "chunk_size" not in default
    more = DEFAULT_THREADS + 1
    assert temporal_settings(TemporalConfig(num_threads=more))["num_threads"] == more
    assert temporal_settings(TemporalConfig(device="cuda"))["device"] == "cuda"
    assert temporal_settings(TemporalConfig(num_threads=4)) != default

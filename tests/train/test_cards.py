"""Model cards: metadata parses back with huggingface_hub and holds the evaluation results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, metadata_load
from huggingface_hub.repocard_data import model_index_to_eval_results

from plstitch_eval.errors import ConfigError
from plstitch_eval.tables import load_results
from plstitch_train.publishing.cards import (
    MODEL_CARDS_DIR,
    CardInfo,
    eval_results_from_results,
    load_paper_results,
    render_card,
    render_reference_cards,
)
from tests.train.test_export import make_results

# Values typed in from the paper's Tables 1 and 2 (independent of model_cards/paper_results.json).
PAPER_SPOT_CHECKS = [
    ("PL-Stitch", "Cholec80", "knn_accuracy", 81.7),
    ("PL-Stitch", "AutoLaparo", "linear_f1", 69.0),
    ("iBOT", "M2CAI16", "linear_accuracy", 71.0),
    ("LemonFM", "Cholec80", "linear_f1", 65.8),
    ("EndoViT", "AutoLaparo", "knn_accuracy", 40.2),
    ("PL-Stitch", "Breakfast", "linear_accuracy", 21.6),
    ("DINO", "Breakfast", "linear_f1@50", 3.6),
    ("PL-Stitch", "GTEA", "linear_edit", 60.2),
    ("T-CoRe", "GTEA", "knn_accuracy", 42.7),
]


def _card_info(results: list[dict]) -> CardInfo:
    return CardInfo(
        model_name="tiny-plstitch",
        title="PL-Stitch: tiny",
        description="A tiny test encoder.",
        architecture="ViT",
        feature="32-d CLS",
        preprocessing="32 px",
        usage="import timm",
        eval_results=eval_results_from_results(results),
        training_config={"dataset": "synthetic"},
    )


def test_card_metadata_round_trips_with_eval_results(tmp_path: Path) -> None:
    results = load_results(
        [
            make_results(tmp_path / "knn.json"),
            make_results(tmp_path / "lin.json", task="linear", dataset="gtea"),
        ]
    )
    path = tmp_path / "README.md"
    path.write_text(str(render_card(_card_info(results))), encoding="utf-8")

    card = ModelCard.load(path)
    parsed = {(r.dataset_type, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert parsed == {
        ("cholec80", "knn_accuracy"): 71.25,
        ("cholec80", "knn_macro_f1_pooled"): 60.5,
        ("cholec80", "knn_macro_f1_video"): 58.0,
        ("gtea", "linear_accuracy"): 71.25,
        ("gtea", "linear_macro_f1_pooled"): 60.5,
        ("gtea", "linear_macro_f1_video"): 58.0,
    }
    assert card.data.license == "mit" and card.data.library_name == "timm"
    meta = metadata_load(path)
    name, flat = model_index_to_eval_results(meta["model-index"])
    assert name == "tiny-plstitch" and len(flat) == 6
    knn = next(r for r in flat if r.metric_type == "knn_accuracy")
    assert knn.dataset_name == "Cholec80" and knn.metric_args == {"k": 20, "temperature": 0.07}
    text = card.text
    assert "Not a medical device" in text and "@inproceedings{che2026stitch" in text
    assert '"dataset": "synthetic"' in text


def test_results_of_another_schema_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "something/v2", "task": "knn"}))
    with pytest.raises(ConfigError, match=r"bad\.json.*schema"):
        load_results([bad])


@pytest.mark.parametrize(("method", "dataset", "metric", "value"), PAPER_SPOT_CHECKS)
def test_paper_results_data_matches_the_paper(method, dataset, metric, value) -> None:
    rows = [r for r in load_paper_results()["rows"] if r["method"] == method and r["dataset"] == dataset]
    assert len(rows) == 1
    assert rows[0]["metrics"][metric] == value


def test_reference_cards_label_paper_numbers(tmp_path: Path) -> None:
    paths = {p.stem: p for p in render_reference_cards(tmp_path)}
    assert {"pl-stitch-lemon", "pl-stitch-breakfast", "pl-stitch-gtea", "dino-vitb16", "lemonfm"} <= set(
        paths
    )

    lemon = ModelCard.load(paths["pl-stitch-lemon"])
    values = {(r.dataset_name, r.metric_type): r.metric_value for r in lemon.data.eval_results}
    assert values[("Cholec80", "knn_accuracy")] == 81.7
    assert values[("M2CAI16", "linear_f1")] == 69.1
    assert {r.dataset_name for r in lemon.data.eval_results} == {"AutoLaparo", "Cholec80", "M2CAI16"}
    assert all("Reported by the PL-Stitch paper" in r.source_name for r in lemon.data.eval_results)
    assert "as reported by the PL-Stitch paper" in lemon.text

    gtea = ModelCard.load(paths["pl-stitch-gtea"])
    assert {(r.dataset_name, r.metric_type, r.metric_value) for r in gtea.data.eval_results} >= {
        ("GTEA", "knn_accuracy", 62.4),
        ("GTEA", "linear_f1@10", 61.7),
    }

    dino = ModelCard.load(paths["dino-vitb16"])  # paper numbers are for LEMON-pretrained DINO: no model-index
    assert dino.data.eval_results is None and dino.data.license == "apache-2.0"
    assert "not for this ImageNet checkpoint" in dino.text and "| DINO | LEMON | Cholec80 |" in dino.text


def test_committed_reference_cards_are_up_to_date(tmp_path: Path) -> None:
    fresh = {p.name: p.read_text(encoding="utf-8") for p in render_reference_cards(tmp_path)}
    committed = {p.name: p.read_text(encoding="utf-8") for p in (MODEL_CARDS_DIR / "reference").glob("*.md")}
    assert committed == fresh, (
        "re-render with: python -c 'from plstitch_train.publishing.cards import "
        "render_reference_cards; render_reference_cards()'"
    )

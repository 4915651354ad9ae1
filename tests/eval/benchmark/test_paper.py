"""The paper's reported numbers for a cell: keyed by our metric names, only where the paper measured this
checkpoint's method on this dataset with this protocol, flagged where it measured another checkpoint."""

from __future__ import annotations

from plstitch_eval.benchmark.paper import PAPER_METRICS, paper_numbers, paper_results


def test_paper_numbers() -> None:
    assert paper_numbers("pl-stitch-lemon", "cholec80", "knn")["metrics"] == {"accuracy": 81.7}
    linear = paper_numbers("pl-stitch-lemon", "cholec80", "linear")
    assert linear["metrics"] == {"accuracy": 80.4, "macro_f1_pooled": 73.0, "macro_f1_video": 73.0}
    assert linear["same_checkpoint"] and linear["table"] == "Table 1"
    assert paper_numbers("pl-stitch-lemon", "gtea", "knn") is None  # GTEA's PL-Stitch is pl-stitch-gtea
    assert paper_numbers("pl-stitch-gtea", "gtea", "linear")["metrics"]["edit"] == 60.2
    assert paper_numbers("dino-vitb16", "cholec80", "knn")["same_checkpoint"] is False
    assert paper_numbers("plstitch-tiny-synthetic", "synthetic", "knn") is None
    assert paper_numbers("pl-stitch-lemon", "cholec80", "cv") is None


def test_the_papers_f1_is_both_of_ours_and_the_file_is_read_once() -> None:
    assert PAPER_METRICS["f1"] == ("macro_f1_pooled", "macro_f1_video")
    assert paper_results() is paper_results() and paper_results()["rows"]
    lemon = paper_numbers("pl-stitch-lemon", "cholec80", "knn")
    assert paper_numbers("pl-stitch-lemon", "CHOLEC80", "knn") == lemon  # adapter names in any case

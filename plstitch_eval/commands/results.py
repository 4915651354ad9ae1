"""What every evaluation command does with its results: print the metrics table(s), write the results JSON.

Shared by `knn`, `linear`, `cv`, `score` (commands/evaluate.py) and `temporal` (commands/temporal.py). The
command modules import this one inside their commands: it loads scoring and the dataset adapters, seconds
of start-up (measured 13 s against 0.5 s for `import plstitch_eval.cli` on a loaded 2-core box) that
`plstitch --help` should not pay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plstitch_eval.results_json import write_results
from plstitch_eval.tables import metrics_by_k_table, metrics_table, regression_table
from plstitch_eval.utils.console import console, result_console

__all__ = ["print_and_write_results"]


def print_and_write_results(results: dict[str, Any], json_path: Path | None, title: str) -> None:
    """Print the metrics table (and the relaxed one, if any) on stdout and write the results JSON if asked.

    A k-NN result with several k gets one value column per k. With `--json -` the JSON alone goes to stdout
    and the table to stderr, so stdout parses as JSON.
    """
    to_stdout = json_path is not None and str(json_path) == "-"
    out = console if to_stdout else result_console()
    several_k = len(results.get("metrics_by_k") or {}) > 1
    table = (
        regression_table if "references" in results else metrics_by_k_table if several_k else metrics_table
    )
    out.print(table(results, title=title))
    if "relaxed" in results:
        block = results["relaxed"]
        relaxed = {"metrics": block["metrics"], "metrics_std": block["metrics_std"], "headline_metrics": []}
        rules = f"{block['dataset']}, {block['tolerance_s']:g} s = {block['window_frames']} frames"
        out.print(metrics_table(relaxed, title=f"relaxed ({rules}; mean ± std over videos)"))
    if json_path is not None:
        write_results(json_path, results)
        if not to_stdout:
            console.print(f"results written to {json_path}", highlight=False)

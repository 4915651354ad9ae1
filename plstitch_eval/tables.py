"""Paper-style tables from results JSON files: rows = models, columns = dataset / protocol / metric.

Each result contributes its dataset's headline metrics (``headline_metrics`` in the file, else the dataset
default); cross-validation results show ``mean ± std``. The best value of each column is bold.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.metrics.scoring import default_metrics
from plstitch_eval.results_json import SCHEMA

METRIC_LABELS = {
    "accuracy": "Acc",
    "macro_f1_pooled": "F1 (frames)",
    "macro_f1_video": "F1 (videos)",
    "macro_precision_pooled": "Prec (frames)",
    "macro_precision_video": "Prec (videos)",
    "macro_recall_pooled": "Rec (frames)",
    "macro_recall_video": "Rec (videos)",
    "macro_jaccard_pooled": "Jacc (frames)",
    "macro_jaccard_video": "Jacc (videos)",
    "edit": "Edit",
    "f1@10": "F1@10",
    "f1@25": "F1@25",
    "f1@50": "F1@50",
}


@dataclass
class ComparisonTable:
    """Cells keyed by (row, column); columns are (dataset, task, metric) triples."""

    rows: list[str] = field(default_factory=list)
    columns: list[tuple[str, str, str]] = field(default_factory=list)
    values: dict[tuple[str, tuple[str, str, str]], tuple[float, float | None]] = field(default_factory=dict)

    def cell(self, row: str, col: tuple[str, str, str], pm: str = " ± ", bold=("", "")) -> str:
        """Formatted value of a cell ('-' when absent), bold when it is the column's best."""
        if (row, col) not in self.values:
            return "-"
        mean, std = self.values[(row, col)]
        text = f"{mean:.1f}" if std is None else f"{mean:.1f}{pm}{std:.1f}"
        best = max(v[0] for (r, c), v in self.values.items() if c == col)
        count = sum(1 for (_r, c) in self.values if c == col)
        return f"{bold[0]}{text}{bold[1]}" if count > 1 and mean == best else text

    def headers(self) -> list[str]:
        return [f"{d} {t} {METRIC_LABELS.get(m, m)}" for d, t, m in self.columns]


def load_results(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Read results JSON files (`plstitch.results/v1`); another schema or a missing key is a `ConfigError`."""
    out = []
    for path in paths:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: not a readable results JSON ({exc}).") from exc
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise ConfigError(
                f"{path}: key 'schema' is {found!r}, expected {SCHEMA!r}; pass results written by "
                "`plstitch knn/linear/cv/score`."
            )
        for key in ("task", "dataset", "metrics"):
            if key not in data:
                raise ConfigError(f"{path}: results JSON lacks the key {key!r}.")
        data["_path"] = str(path)
        out.append(data)
    return out


def model_label(result: dict[str, Any]) -> str:
    """Row name of a result: the model spec, else the feature store / prediction folder name."""
    spec = (result.get("model") or {}).get("spec")
    if spec:
        return str(spec)
    if result.get("features"):
        return Path(result["features"]).name
    pred_dir = (result.get("protocol") or {}).get("pred_dir")
    return Path(pred_dir).name if pred_dir else Path(result.get("_path", "?")).stem


def build_table(results: Sequence[dict[str, Any]], metrics: Sequence[str] | None = None) -> ComparisonTable:
    """Arrange results into a table; `metrics` overrides each dataset's headline metrics."""
    if not results:
        raise EvaluationError("No results files given; pass e.g. results/*.json.")
    table = ComparisonTable()
    for res in results:
        row = model_label(res)
        if row not in table.rows:
            table.rows.append(row)
        task = res.get("task", "?")
        if task == "cv":
            task = f"cv-{(res.get('protocol') or {}).get('inner', '?')}"
        dataset = str(res.get("dataset") or "?")
        names = metrics or res.get("headline_metrics") or default_metrics(dataset)
        for metric in names:
            value = (res.get("metrics") or {}).get(metric)
            if value is None:
                continue
            col = (dataset, task, metric)
            if col not in table.columns:
                table.columns.append(col)
            std = (res.get("metrics_std") or {}).get(metric)
            table.values[(row, col)] = (float(value), None if std is None else float(std))
    return table


def to_markdown(table: ComparisonTable) -> str:
    """GitHub markdown table."""
    lines = ["| Model | " + " | ".join(table.headers()) + " |", "|---" * (len(table.columns) + 1) + "|"]
    for row in table.rows:
        cells = [table.cell(row, c, bold=("**", "**")) for c in table.columns]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _tex(text: str) -> str:
    for a, b in (("\\", "\\textbackslash{}"), ("_", "\\_"), ("%", "\\%"), ("&", "\\&"), ("#", "\\#")):
        text = text.replace(a, b)
    return text


def to_latex(table: ComparisonTable) -> str:
    """LaTeX tabular (booktabs) with a dataset header row spanning its metric columns."""
    groups: list[tuple[str, int]] = []
    for d, t, _m in table.columns:
        name = f"{d} ({t})"
        if groups and groups[-1][0] == name:
            groups[-1] = (name, groups[-1][1] + 1)
        else:
            groups.append((name, 1))
    lines = [
        "\\begin{tabular}{l" + "c" * len(table.columns) + "}",
        "\\toprule",
        "Model & " + " & ".join(f"\\multicolumn{{{n}}}{{c}}{{{_tex(g)}}}" for g, n in groups) + " \\\\",
        " & " + " & ".join(_tex(METRIC_LABELS.get(m, m)) for _d, _t, m in table.columns) + " \\\\",
        "\\midrule",
    ]
    for row in table.rows:
        cells = [table.cell(row, c, pm=" $\\pm$ ", bold=("\\textbf{", "}")) for c in table.columns]
        lines.append(_tex(row) + " & " + " & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def to_rich(table: ComparisonTable, title: str | None = None, headers: Sequence[str] | None = None) -> Table:
    """A rich Table for the terminal; names, headers and title are plain `Text`, never markup.

    `headers` replaces the column headers (one per column), e.g. shorter ones when the title names them.
    """
    out = Table(title=None if title is None else Text(title, style="table.title"))
    out.add_column("Model")
    headers = list(headers) if headers is not None else table.headers()
    if len(headers) != len(table.columns):
        raise ConfigError(f"to_rich got {len(headers)} headers for {len(table.columns)} columns.")
    for header in headers:
        out.add_column(Text(header), justify="right")
    for row in table.rows:
        cells = (table.cell(row, c, bold=("[bold]", "[/bold]")) for c in table.columns)
        out.add_row(Text(row), *(Text.from_markup(cell) for cell in cells))  # cells: numbers + [bold] only
    return out


def metrics_table(results: dict[str, Any], title: str | None = None) -> Table:
    """A two-column rich table (metric, value) of one result, headline metrics first (bold)."""
    return _metric_rows_table(results, {"value": results.get("metrics") or {}}, title)


def regression_table(results: dict[str, Any], title: str | None = None) -> Table:
    """A regression result (anticipation, RSD) beside its reference rows: a column each (minutes).

    Why: an MAE means something only beside what a probe-free reference scores (docs/tasks.md).
    """
    head = list(results.get("headline_metrics") or [])
    shown = [*head, *(f"{m}_per_video" for m in head)]  # the rest (pMAE, eMAE, ...) is in the JSON

    def rows(metrics: dict[str, Any]) -> dict[str, Any]:
        return {m: metrics[m] for m in shown if m in metrics}

    references = results.get("references") or {}
    refs = {name: rows(ref["metrics"]) for name, ref in references.items()}
    stds = {"probe": results.get("metrics_std") or {}}
    stds.update({name: ref.get("metrics_std") or {} for name, ref in references.items()})
    return _metric_rows_table(results, {"probe": rows(results.get("metrics") or {}), **refs}, title, stds)


def metrics_by_k_table(results: dict[str, Any], title: str | None = None) -> Table:
    """One k-NN result with several k: a row per metric, a column per k used (``metrics_by_k``).

    Why: `plstitch knn --k 10 --k 20` scores every k; printing the first alone hides the others.
    """
    by_k = results.get("metrics_by_k") or {}
    return _metric_rows_table(results, {f"k={k}": metrics for k, metrics in by_k.items()}, title)


def _metric_rows_table(
    results: dict[str, Any],
    columns: dict[str, dict[str, Any]],
    title: str | None,
    stds: dict[str, dict[str, Any]] | None = None,
) -> Table:
    """Rows = metrics (headline first, bold), one value column per entry of `columns` (``± std`` if any:
    each column's own in `stds`, else the results' `metrics_std` for every column)."""
    out = Table(title=None if title is None else Text(title, style="table.title"))
    out.add_column("metric")
    for header in columns:
        out.add_column(Text(header), justify="right")
    std = results.get("metrics_std") or {}
    names = list(dict.fromkeys(m for metrics in columns.values() for m in metrics))
    head = [m for m in results.get("headline_metrics", []) if m in names]
    for name in head + [m for m in names if m not in head]:
        cells = []
        for column, metrics in columns.items():
            value, own = metrics.get(name), std if stds is None else stds.get(column, {})
            text = "-" if value is None else f"{value:.2f}"
            if value is not None and own.get(name) is not None:
                text += f" ± {own[name]:.2f}"
            cells.append(text)
        out.add_row(Text(name, style="bold" if name in head else ""), *cells)
    return out

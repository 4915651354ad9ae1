"""Paired comparisons of `plstitch reproduce` rows: per-seed differences with a Student t interval.

Every trained run of a seed starts from the same shared initialisation, so two trained rows are compared seed
by seed: the difference a - b of each seed both rows have, then `paired_difference` (mean, 95 % t interval
with n - 1 degrees of freedom). A reference trained from nothing shared (random init: fresh weights per seed)
is compared unpaired: difference of means with Welch's interval (`welch_difference`). Row keys, column values
and formats are those of `plstitch_train.reproduce.tables`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.stats import paired_difference, welch_difference
from plstitch_train.reproduce.tables import COLUMNS, RANDOM_INIT, row_key, run_values

COLUMN_FORMATS = {key: (header, decimals) for key, header, decimals in COLUMNS}  # key -> (header, decimals)
DEFAULT_COLUMNS = ("knn/accuracy", "linear/accuracy")
LEGEND = (
    "paired: mean over seeds of (a − b), runs paired by seed (same shared initialisation), {pct} % CI a "
    "Student t interval with n − 1 degrees of freedom over the per-seed differences; unpaired (Welch): "
    "mean(a) − mean(b) over all seeds of each (the random-init reference shares no initialisation with the "
    "trained rows), Welch's t interval; n/a: undefined (one seed gives no interval, no shared seed no "
    "difference)."
)


@dataclass(frozen=True)
class Comparison:
    """Row `a` minus row `b` (row keys: a row slug, `<slug>-reversed`, or a reference such as random-init);
    `paired` False: independent samples (Welch), for a reference that shares no initialisation with a."""

    a: str
    b: str
    label: str
    paired: bool = True


# the readings of the README, each a paired difference; one whose rows a reproduction lacks is skipped
COMPARISONS = (
    Comparison("mim", RANDOM_INIT, "MIM only − random init", paired=False),
    Comparison("mim-vid", "mim", "MIM + L_vid − MIM only"),
    Comparison("mim-jigsaw", "mim", "MIM + L_jigsaw − MIM only"),
    Comparison("pl", "mim-vid", "PL-Stitch − MIM + L_vid (what the jigsaw adds)"),
    Comparison("pl", "pairwise", "Plackett-Luce − pairwise hinge (all three branches, k = 4)"),
    Comparison("pl", "permutation", "Plackett-Luce − permutation classification (all three branches, k = 4)"),
    Comparison("mim-pl-k8", "mim-pairwise-k8", "Plackett-Luce − pairwise hinge (k = 8, jigsaw off)"),
    Comparison("mim-pl-k8", "mim-permutation-k8", "Plackett-Luce − permutation classification (k = 8)"),
    Comparison(
        "mim-pairwise-k8", "mim-permutation-k8", "pairwise hinge − permutation classification (k = 8)"
    ),
    Comparison("mim-permutation-k8", "mim", "permutation classification (k = 8) − MIM only"),
    Comparison("pl-k8", "mim-pl-k8", "PL-Stitch − MIM + L_vid at k = 8 (what the jigsaw adds)"),
    Comparison("pl-k8", "mim", "PL-Stitch (k = 8) − MIM only"),
    Comparison("pl", "pl-k8", "k = 4 − k = 8 (full model)"),
    Comparison("pl-k12", "pl-k8", "k = 12 − k = 8 (full model)"),
    Comparison("pl-k16", "pl-k8", "k = 16 − k = 8 (full model)"),
)


def _check_column(column: str) -> None:
    if column not in COLUMN_FORMATS:
        raise ConfigError(f"Unknown column {column!r}; use one of {', '.join(COLUMN_FORMATS)}.")


def values_by_seed(runs: dict[str, dict[str, Any]], column: str) -> dict[str, dict[int, float]]:
    """Row key -> seed -> the column's value; runs without metrics or without that number are left out."""
    _check_column(column)
    out: dict[str, dict[int, float]] = {}
    seen: set[tuple[str, int]] = set()
    for name, run in runs.items():
        if "metrics" not in run:
            continue
        key, seed = row_key(run), int(run["seed"])
        if (key, seed) in seen:
            raise ConfigError(f"Row {key!r} has two runs of seed {seed} (one is {name!r}); cannot pair them.")
        seen.add((key, seed))
        value = run_values(run)[column]
        if value is not None:
            out.setdefault(key, {})[seed] = float(value)
    return out


def _rows(runs: dict[str, dict[str, Any]]) -> set[str]:
    return {row_key(run) for run in runs.values() if "metrics" in run}


def paired_comparisons(
    runs: dict[str, dict[str, Any]],
    comparisons: Sequence[Comparison],
    columns: Sequence[str] = DEFAULT_COLUMNS,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """Per comparison and column: runs of rows a and b paired by seed, and the paired difference a - b.

    Each result holds label, a, b, column, paired, seeds (used: paired, both rows have a value; unpaired,
    either has), missing_in_a and missing_in_b (paired only: seeds only the other row has), a_values and
    b_values (per used seed of that row) and difference (`paired_difference`, or `welch_difference` for an
    unpaired comparison; None when no seed is shared). A comparison whose row a or b has no run is skipped.
    """
    for column in columns:
        _check_column(column)
    present = _rows(runs)
    by_column = {column: values_by_seed(runs, column) for column in columns}
    results = []
    for comparison in comparisons:
        if comparison.a not in present or comparison.b not in present:
            continue
        for column in columns:
            a = by_column[column].get(comparison.a, {})
            b = by_column[column].get(comparison.b, {})
            results.append(_compare(comparison, column, a, b, confidence))
    return results


def _compare(
    comparison: Comparison, column: str, a: dict[int, float], b: dict[int, float], confidence: float
) -> dict[str, Any]:
    """One comparison on one column: `a` and `b` map seed -> value."""
    if comparison.paired:
        seeds_a = seeds_b = sorted(set(a) & set(b))
        pairs = ([a[s] for s in seeds_a], [b[s] for s in seeds_a])
        difference = paired_difference(*pairs, confidence) if seeds_a else None
        missing_in_a, missing_in_b = sorted(set(b) - set(a)), sorted(set(a) - set(b))
    else:
        seeds_a, seeds_b = sorted(a), sorted(b)
        difference = (
            welch_difference([a[s] for s in seeds_a], [b[s] for s in seeds_b], confidence)
            if a and b
            else None
        )
        missing_in_a = missing_in_b = []
    return {
        "label": comparison.label,
        "a": comparison.a,
        "b": comparison.b,
        "column": column,
        "paired": comparison.paired,
        "seeds": sorted(set(seeds_a) | set(seeds_b)),
        "missing_in_a": missing_in_a,
        "missing_in_b": missing_in_b,
        "a_values": [a[s] for s in seeds_a],
        "b_values": [b[s] for s in seeds_b],
        "difference": difference,
        "confidence": confidence,
    }


def _number(value: float | None, decimals: int, sign: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.{decimals}f}" if sign else f"{value:.{decimals}f}"


def _plural(word: str, seeds: Sequence[int]) -> str:
    return f"{word}{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def _seeds_cell(result: dict[str, Any]) -> str:
    text = ", ".join(str(s) for s in result["seeds"]) or "none"
    notes = [
        f"{_plural('seed', result[f'missing_in_{side}'])} missing in {result[side]}"
        for side in ("a", "b")
        if result[f"missing_in_{side}"]
    ]
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _percent(confidence: float) -> str:
    return f"{100 * confidence:g}"


def comparisons_markdown(results: Sequence[dict[str, Any]]) -> str:
    """The paired differences as a GitHub markdown table, with a one-line legend under it."""
    pct = _percent(results[0]["confidence"]) if results else "95"
    if any(_percent(r["confidence"]) != pct for r in results):
        raise ConfigError("Comparisons at different confidence levels cannot share one table; use one level.")
    lines = [
        f"| comparison | metric | difference (a − b) | {pct} % CI | test | seeds |",
        "|---|---|---:|---:|---|---|",
    ]
    for r in results:
        header, decimals = COLUMN_FORMATS[r["column"]]
        d = r["difference"] or {}
        mean = _number(d.get("mean"), decimals, sign=True)
        low, high = d.get("ci_low"), d.get("ci_high")
        ci = "n/a" if low is None else f"[{_number(low, decimals)}, {_number(high, decimals)}]"
        test = "paired" if r.get("paired", True) else "unpaired (Welch)"
        lines.append(f"| {r['label']} | {header} | {mean} | {ci} | {test} | {_seeds_cell(r)} |")
    lines += ["", LEGEND.format(pct=pct)]
    return "\n".join(lines)


def per_seed_markdown(
    runs: dict[str, dict[str, Any]],
    row_keys_and_labels: Sequence[tuple[str, str]],
    column: str = "knn/accuracy",
) -> str:
    """One line per row (rows without runs left out), one column per seed with its value ("-": none)."""
    by_row = values_by_seed(runs, column)  # checks the column
    header, decimals = COLUMN_FORMATS[column]
    present = _rows(runs)
    rows = [(key, label) for key, label in row_keys_and_labels if key in present]
    seeds = sorted({s for key, _ in rows for s in by_row.get(key, {})})
    lines = [
        "| " + " | ".join([f"Row ({header})", *(f"seed {s}" for s in seeds)]) + " |",
        "|---|" + "---:|" * len(seeds),
    ]
    for key, label in rows:
        values = by_row.get(key, {})
        cells = [_number(values[s], decimals) if s in values else "-" for s in seeds]
        lines.append("| " + " | ".join([label, *cells]) + " |")
    return "\n".join(lines)


def _seed_of(run: str) -> int:
    """The seed of a run folder name (`pl-k8-seed3` -> 3)."""
    match = re.search(r"-seed(\d+)$", run)
    if match is None:
        raise ConfigError(f"Run name {run!r} does not end in -seed<N>.")
    return int(match.group(1))


def awareness_comparison(
    awareness: dict[str, dict[str, Any]], baseline: str = "mim", confidence: float = 0.95
) -> dict[str, Any]:
    """Per-seed awareness contrasts (twin distance - same-direction spread) of each awareness row, and each
    row's paired difference from `baseline` (the paper's Fig. 1b: PL-Stitch's contrast above MIM's).

    `awareness` maps a row to its summary, whose `seed_contrasts` map a forward run to twin/control/contrast.
    """
    rows = {
        row: {_seed_of(run): c["contrast"] for run, c in (summary.get("seed_contrasts") or {}).items()}
        for row, summary in awareness.items()
    }
    rows = {row: values for row, values in rows.items() if values}
    differences = {}
    for row, values in rows.items():
        if row == baseline or baseline not in rows:
            continue
        seeds = sorted(set(values) & set(rows[baseline]))
        if seeds:
            differences[row] = {
                "seeds": seeds,
                "difference": paired_difference(
                    [values[s] for s in seeds], [rows[baseline][s] for s in seeds], confidence
                ),
            }
    return {
        "rows": rows,
        "differences": differences,
        "markdown": _awareness_markdown(rows, differences, baseline),
    }


def _awareness_markdown(
    rows: dict[str, dict[int, float]], differences: dict[str, dict[str, Any]], baseline: str
) -> str:
    if not rows:
        return ""
    seeds = sorted({s for values in rows.values() for s in values})
    lines = [
        "**Awareness per seed** (cosine distance of the forward run to its time-reversed twin minus the mean "
        "distance of the same-direction pairs that involve either; > 0: reversing time moves the features "
        "more than changing the seed)",
        "",
        "| Row | "
        + " | ".join(f"seed {s}" for s in seeds)
        + " | paired difference from "
        + baseline
        + " | 95 % CI |",
        "|---|" + "---:|" * (len(seeds) + 2),
    ]
    for row, values in rows.items():
        cells = [_number(values.get(s), 3) if s in values else "-" for s in seeds]
        diff = (differences.get(row) or {}).get("difference")
        interval = (
            f"[{_number(diff['ci_low'], 3, True)}, {_number(diff['ci_high'], 3, True)}]"
            if diff and diff.get("ci_low") is not None
            else "n/a"
        )
        mean = _number(diff["mean"], 3, True) if diff else "-"
        lines.append("| " + " | ".join([row, *cells, mean, interval]) + " |")
    return "\n".join(lines)

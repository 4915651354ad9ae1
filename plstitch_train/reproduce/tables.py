"""Tables of `plstitch reproduce`: per-row mean +- sample std over seeds, in markdown.

A run record (one trained or reference encoder) holds `row`, `seed`, `reverse_time`, `metrics` (protocol ->
accuracy / macro_f1_video, None where a protocol has no such number), `order` (t/T probe R^2, Kendall tau
of the temporal head, held-out jigsaw loss minus chance; None where the run has no such head) and `gradients`
(backbone gradient norm of each weighted loss on the run's first batches; `plstitch_train.gradient_scale`).
"""

from __future__ import annotations

from typing import Any

from plstitch_eval.results_json import MAJORITY_ROW, RANDOM_INIT_ROW, RAW_PIXELS_ROW
from plstitch_eval.utils.stats import mean_std

METRICS = ("accuracy", "macro_f1_video")
PROTOCOLS = ("knn", "linear")
ORDER_MEASURES = ("time_r2", "tau", "jigsaw_minus_chance")
RANDOM_INIT, RAW_PIXELS, MAJORITY = RANDOM_INIT_ROW, RAW_PIXELS_ROW, MAJORITY_ROW
ORACLE_TIME = "oracle-time"
REVERSED = "-reversed"

SHARED_INIT = "shared-init"
# reference rows measured once, whatever the seed count (deterministic: no training, no sampled init)
ONE_OFF_ROWS = frozenset({MAJORITY, RAW_PIXELS, SHARED_INIT, ORACLE_TIME})

# (title, [(row key, label)]); a row key is a row slug, `<slug>-reversed`, or a reference. A table shows the
# rows a reproduction has, so one list serves every preset.
TABLES = (
    (
        "References",
        [
            (MAJORITY, "majority class of the training split"),
            (RAW_PIXELS, "raw pixels (8x8x3)"),
            (RANDOM_INIT, "no pretraining (random init)"),
            (SHARED_INIT, "shared initialisation: MIM pretraining, no further training"),
            (ORACLE_TIME, "oracle: normalised time t/T only"),
            ("mim-init", "MIM pretraining (24 epochs, Sinkhorn-Knopp targets, teacher 0.02)"),
        ],
    ),
    (
        "Components",
        [
            ("mim", "MIM only"),
            ("mim-vid", "MIM + L_vid"),
            ("mim-jigsaw", "MIM + L_jigsaw"),
            ("pl", "MIM + L_vid + L_jigsaw (PL-Stitch)"),
        ],
    ),
    (
        "Temporal objective (all three branches)",
        [
            ("pairwise", "pairwise hinge"),
            ("permutation", "permutation classification"),
            ("pl", "Plackett-Luce (PL-Stitch)"),
        ],
    ),
    (
        "Temporal objective (MIM + L_vid, jigsaw off, k = 8; the paper's Table 4)",
        [
            ("mim-pl-k8", "Plackett-Luce"),
            ("mim-pairwise-k8", "pairwise hinge (margin 1)"),
            ("mim-permutation-k8", "permutation classification (1000 sampled orders)"),
        ],
    ),
    (
        "Clip length k (full model; the paper's Table 5)",
        [("pl", "k = 4"), ("pl-k8", "k = 8"), ("pl-k12", "k = 12"), ("pl-k16", "k = 16")],
    ),
    (
        "Time direction (awareness runs)",
        [
            ("mim", "MIM only, forward videos"),
            (f"mim{REVERSED}", "MIM only, time-reversed videos"),
            ("pl", "PL-Stitch, forward videos"),
            (f"pl{REVERSED}", "PL-Stitch, time-reversed videos"),
            ("pl-k8", "PL-Stitch (k = 8), forward videos"),
            (f"pl-k8{REVERSED}", "PL-Stitch (k = 8), time-reversed videos"),
        ],
    ),
)
COLUMNS = (  # (aggregated key, header, decimals)
    ("knn/accuracy", "k-NN Acc", 1),
    ("knn/macro_f1_video", "k-NN F1 (videos)", 1),
    ("linear/accuracy", "Linear Acc", 1),
    ("linear/macro_f1_video", "Linear F1 (videos)", 1),
    ("order/time_r2", "t/T probe R²", 2),
    ("order/tau", "Kendall τ (head)", 2),
    ("order/jigsaw_minus_chance", "L_jig − chance (held out)", 3),
    ("grad/vid", "‖∇θ λ·L_vid‖ at init", 3),
)


def row_key(run: dict[str, Any]) -> str:
    """The table row a run belongs to: its row slug, with `-reversed` for time-reversed runs."""
    return run["row"] + (REVERSED if run.get("reverse_time") else "")


def run_values(run: dict[str, Any]) -> dict[str, float | None]:
    values: dict[str, float | None] = {
        f"{p}/{m}": run["metrics"].get(p, {}).get(m) for p in PROTOCOLS for m in METRICS
    }
    order = run.get("order") or {}
    values.update({f"order/{m}": order.get(m) for m in ORDER_MEASURES})
    vid = ((run.get("gradients") or {}).get("branches") or {}).get("vid") or {}
    values["grad/vid"] = vid.get("backbone_grad_norm")
    return values


def aggregate(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per row key, per column: mean, std and per-seed values; a column missing in any seed is left out."""
    by_row: dict[str, list[dict[str, Any]]] = {}
    for run in runs.values():
        if "metrics" in run:
            by_row.setdefault(row_key(run), []).append(run)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key, items in by_row.items():
        items = sorted(items, key=lambda r: r["seed"])
        columns = [run_values(r) for r in items]
        out[key] = {}
        for name in columns[0]:
            values = [c[name] for c in columns]
            if any(v is None for v in values):
                continue
            mean, std = mean_std(values)
            out[key][name] = {"mean": mean, "std": std, "values": values}
    return out


def _cell(stats: dict[str, Any] | None, decimals: int) -> str:
    if stats is None:
        return "-"
    mean = f"{stats['mean']:.{decimals}f}"
    return mean if stats["std"] is None else f"{mean} ± {stats['std']:.{decimals}f}"


def shown_tables(aggregated: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The tables a reproduction has rows for: (title, [(row key, label)]) in TABLES order.

    A time-direction row needs its twin (forward and reversed); a table of one row is left out when that row
    is already in a table of several (a preset with no objective rows prints no one-row objective table).
    """
    present = []
    for title, rows in TABLES:
        keys = [(key, label) for key, label in rows if key in aggregated]
        if title.startswith("Time direction"):
            keys = [(k, lb) for k, lb in keys if _twin(k) in aggregated]
        present.append((title, keys))
    in_larger = {key for _, keys in present if len(keys) > 1 for key, _ in keys}
    return [(t, keys) for t, keys in present if len(keys) > 1 or (keys and keys[0][0] not in in_larger)]


def _twin(key: str) -> str:
    return key[: -len(REVERSED)] if key.endswith(REVERSED) else key + REVERSED


def _n_seeds(row: dict[str, dict[str, Any]]) -> int:
    return max((len(stats["values"]) for stats in row.values()), default=0)


def _seed_phrase(counts: list[int], n_seeds: int) -> str:
    """How many seeds a table's rows average: the preset's count, or what is finished while runs go on."""
    if all(c == n_seeds for c in counts):  # also a table of one-off references only
        return f"mean ± std over {n_seeds} seeds" if n_seeds != 1 else "one seed"
    done = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"
    return f"mean ± std over the seeds finished so far: {done} of {n_seeds}"


def markdown_tables(aggregated: dict[str, dict[str, dict[str, Any]]], n_seeds: int) -> str:
    """The reference and comparison tables a reproduction has rows for, in GitHub markdown (mean ± std)."""
    header = "| Row | " + " | ".join(h for _, h, _ in COLUMNS) + " |"
    rule = "|---|" + "---:|" * len(COLUMNS)
    lines = []
    for title, present in shown_tables(aggregated):
        over = _seed_phrase(
            [_n_seeds(aggregated[key]) for key, _ in present if key not in ONE_OFF_ROWS], n_seeds
        )
        lines += [f"**{title}** (synthetic test split, {over})", "", header, rule]
        for key, label in present:
            cells = [_cell(aggregated[key].get(name), decimals) for name, _, decimals in COLUMNS]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)

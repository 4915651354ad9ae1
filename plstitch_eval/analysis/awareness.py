"""Procedural awareness (Fig. 1b): how differently forward- and time-reversed-trained encoders see frames.

For each frame, `d = 1 - cos(f_fwd(x), f_bwd(x))`. The distance is only meaningful when both encoders share a
feature space, e.g. both fine-tuned from the same initialisation (the paper's setting); it is computed as is.
A model that ignores temporal order gives the same features either way (d near 0). Two runs of the same
direction differ too, so `control_distances` adds forward-vs-forward and reversed-vs-reversed pairs: only the
forward-vs-reversed distance minus the same-direction one says something (see `render_awareness_controls`).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.analysis.frames import dataset_records, encode_records
from plstitch_eval.analysis.style import class_colors, new_figure, write_outputs
from plstitch_eval.errors import ConfigError, FeatureStoreError
from plstitch_eval.hub import load_encoder
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.device import resolve_device, resolve_precision

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass
class ModelPair:
    """A forward-trained and a backward (time-reversed) trained encoder, given as specs or run folders."""

    name: str
    forward: str
    backward: str


@dataclass
class AwarenessConfig:
    """Settings of `plstitch analyze awareness`."""

    pairs: list[ModelPair]
    dataset: str = "synthetic"
    root: str | None = None
    split: str | None = "test"
    fps: float | None = None
    max_videos: int = 4
    max_frames_per_video: int = 64
    out: Path = Path("figs")
    name: str = "awareness"
    device: str = "auto"
    precision: str = "auto"
    batch_size: int = 32


def parse_pair(text: str) -> ModelPair:
    """Parse `NAME=FWD,BWD` (the `--pair` option) into a `ModelPair`."""
    name, sep, rest = text.partition("=")
    fwd, sep2, bwd = rest.partition(",")
    if not sep or not sep2 or not name or not fwd or not bwd:
        raise ConfigError(f"--pair {text!r}: expected NAME=FORWARD,BACKWARD (e.g. pl=runs/fwd,runs/bwd).")
    return ModelPair(name.strip(), fwd.strip(), bwd.strip())


def cosine_distances(a: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Row-wise cosine distance `1 - <a_i, b_i> / (|a_i| |b_i|)` of two [N, D] arrays (in [0, 2])."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ConfigError(
            f"Forward and backward features differ in shape ({a.shape} vs {b.shape}); the two encoders must "
            "have the same feature dimension (e.g. the same architecture fine-tuned from one init)."
        )
    num = (a * b).sum(axis=1)
    den = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), eps)
    return np.clip(1.0 - num / den, 0.0, 2.0)  # rounding can push identical vectors to -1e-16


def summarize(distances: np.ndarray) -> dict[str, Any]:
    """Mean, median, std (population), min, max and quantiles of a distance sample."""
    d = np.asarray(distances, dtype=np.float64)
    return {
        "n": int(d.size),
        "mean": float(d.mean()),
        "median": float(np.median(d)),
        "std": float(d.std()),
        "min": float(d.min()),
        "max": float(d.max()),
        "quantiles": {f"q{int(q * 100):02d}": float(np.quantile(d, q)) for q in QUANTILES},
    }


def plot_awareness(
    distances: dict[str, np.ndarray],
    dataset: str,
    title: str | None = None,
    xlabel: str = "model pair (forward vs. time-reversed pretraining)",
):
    """Violins of the per-frame cosine distances, one per pair (or pair group), median and mean marked."""
    names = list(distances)
    fig = new_figure(max(4.0, 1.4 * len(names) + 2.0), 4.0)
    ax = fig.add_subplot(1, 1, 1)
    data = [np.asarray(distances[n], dtype=np.float64) for n in names]
    positions = np.arange(1, len(names) + 1)
    parts = ax.violinplot(data, positions=positions, showmedians=True, showextrema=True)
    colors = class_colors(len(names))
    for body, color in zip(parts["bodies"], colors, strict=True):
        body.set_facecolor(color)
        body.set_edgecolor("black")
        body.set_alpha(0.7)
    for key in ("cmedians", "cmins", "cmaxes", "cbars"):
        parts[key].set_color("black")
        parts[key].set_linewidth(1.0)
    ax.scatter(
        positions, [d.mean() for d in data], marker="D", color="white", edgecolors="black", s=18, zorder=3
    )
    ax.set_xticks(positions, [textwrap.fill(n, 16) for n in names], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("cosine distance per frame")
    ax.set_title(title or f"Procedural awareness on {dataset}")
    ax.text(
        0.99, 0.01, "line: median, diamond: mean", transform=ax.transAxes, ha="right", va="bottom", fontsize=7
    )
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def compute_distances(
    pair_features: dict[str, tuple[np.ndarray, np.ndarray]],
) -> dict[str, np.ndarray]:
    """Per-frame cosine distances for each pair from already-extracted (forward, backward) features."""
    return {name: cosine_distances(fwd, bwd) for name, (fwd, bwd) in pair_features.items()}


def render_awareness(
    distances: dict[str, np.ndarray], out: Path, name: str, meta: dict[str, Any]
) -> tuple[Path, Path, dict[str, Any]]:
    """Draw the violins and write PNG + JSON (per-pair statistics and the raw distances)."""
    stats = {pair: summarize(d) for pair, d in distances.items()}
    fig = plot_awareness(distances, meta.get("dataset", ""))
    data = {
        "analysis": "awareness",
        **meta,
        "metric": "cosine_distance = 1 - cos(f_forward(x), f_backward(x))",
        "stats": stats,
        "distances": {pair: np.round(d, 6).tolist() for pair, d in distances.items()},
    }
    png, js = write_outputs(fig, data, out, name)
    return png, js, stats


def run_awareness(config: AwarenessConfig) -> tuple[Path, Path, dict[str, Any]]:
    """Load every pair's encoders, encode the same frames with all of them, draw and save the violins."""
    if not config.pairs:
        raise ConfigError("No model pair given: pass --forward and --backward, or one or more --pair.")
    device = resolve_device(config.device)
    precision = resolve_precision(config.precision, device)
    encoders = {}
    for pair in config.pairs:
        for spec in (pair.forward, pair.backward):
            if spec not in encoders:
                logger.info("loading encoder %s", spec)
                encoders[spec] = load_encoder(spec, device=str(device))
    adapter, records = dataset_records(config.dataset, config.root, config.split, config.fps)
    if config.max_videos > 0:
        records = records[: config.max_videos]
    feats: dict[str, list[np.ndarray]] = {spec: [] for spec in encoders}
    videos = []
    for item in encode_records(
        records, encoders, adapter.eval_fps, device, precision, config.batch_size, config.max_frames_per_video
    ):
        logger.info("encoded %d frames of %s", len(item.frame_times), item.video)
        videos.append(item.video)
        for spec in encoders:
            feats[spec].append(item.features[spec])
    stacked = {spec: np.concatenate(chunks) for spec, chunks in feats.items()}
    distances = compute_distances({p.name: (stacked[p.forward], stacked[p.backward]) for p in config.pairs})
    meta = {
        "dataset": config.dataset,
        "split": config.split,
        "fps": adapter.eval_fps,
        "videos": videos,
        "pairs": [{"name": p.name, "forward": p.forward, "backward": p.backward} for p in config.pairs],
    }
    return render_awareness(distances, config.out, config.name, meta)


# Same-direction controls: two runs trained in the same direction differ too (seeds, data order), so the
# forward-vs-reversed distance only means something relative to the forward-vs-forward and
# reversed-vs-reversed spread. Features come from feature stores of the same frames, one store per run.
GROUPS = ("forward vs reversed", "forward vs forward", "reversed vs reversed")
CONTRAST = "forward-vs-reversed minus mean same-direction distance"


def check_run_names(forward: dict[str, Any], reverse: dict[str, Any]) -> None:
    """Refuse a run name used for both a forward and a reversed run (pairs would be ambiguous)."""
    if set(forward) & set(reverse):
        raise ConfigError(f"Run names are both forward and reversed: {sorted(set(forward) & set(reverse))}.")


def control_distances(
    forward: dict[str, np.ndarray], reverse: dict[str, np.ndarray]
) -> dict[str, dict[str, np.ndarray]]:
    """Per-frame distances of every (Fi, Rj), (Fi, Fj) and (Ri, Rj) pair, i < j: group -> "A vs B" -> [N]."""
    if not forward or not reverse:
        raise ConfigError("Awareness with controls needs at least one forward and one reversed run.")
    if len(forward) + len(reverse) < 3:
        raise ConfigError("Same-direction controls need two forward or two reversed runs (got one of each).")
    check_run_names(forward, reverse)

    def same(runs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = list(runs)
        return {
            f"{a} vs {b}": cosine_distances(runs[a], runs[b])
            for i, a in enumerate(names)
            for b in names[i + 1 :]
        }

    cross = {f"{f} vs {r}": cosine_distances(forward[f], reverse[r]) for f in forward for r in reverse}
    return dict(zip(GROUPS, (cross, same(forward), same(reverse)), strict=True))


def control_summary(
    groups: dict[str, dict[str, np.ndarray]], matched: dict[str, str] | None = None
) -> dict[str, Any]:
    """Per-group statistics of the pooled frames, per-pair means and the cross-minus-same contrast.

    `matched` (forward run -> its reversed twin: same seed, heads, data order, masks) splits the cross pairs
    into those that differ only in the direction of time and those that also differ in seed, and adds
    `seed_contrasts` (see `seed_contrasts`) when every matched run has a same-direction pair.
    """
    pooled = {g: np.concatenate(list(p.values())) for g, p in groups.items() if p}
    same = np.concatenate([pooled[g] for g in GROUPS[1:] if g in pooled])
    cross = pooled[GROUPS[0]]
    summary: dict[str, Any] = {
        "stats": {g: summarize(d) for g, d in pooled.items()},
        "pair_means": {g: {k: float(d.mean()) for k, d in p.items()} for g, p in groups.items()},
        "same_direction_mean": float(same.mean()),
        "contrast": float(cross.mean() - same.mean()),
        "contrast_definition": CONTRAST,
    }
    if matched:
        twins = {f"{f} vs {r}" for f, r in matched.items()}
        missing = sorted(twins - set(groups[GROUPS[0]]))
        if missing:
            raise ConfigError(f"Matched pairs {missing} are not forward-vs-reversed pairs of these runs.")
        split = {
            "direction only (same seed)": [d for k, d in groups[GROUPS[0]].items() if k in twins],
            "direction and seed": [d for k, d in groups[GROUPS[0]].items() if k not in twins],
        }
        summary["cross_split"] = {k: summarize(np.concatenate(v)) for k, v in split.items() if v}
        pair_means = summary["pair_means"]
        if all(_same_direction_means(pair_means, f, r) for f, r in matched.items()):
            summary["seed_contrasts"] = seed_contrasts(pair_means, matched)
    return summary


def _involves(pair: str, run: str) -> bool:
    return pair.startswith(f"{run} vs ") or pair.endswith(f" vs {run}")


def _same_direction_means(pair_means: dict[str, dict[str, float]], forward: str, reverse: str) -> list[float]:
    """Means of the forward-forward pairs with `forward` and the reversed-reversed pairs with `reverse`."""
    fwd = [m for k, m in pair_means.get(GROUPS[1], {}).items() if _involves(k, forward)]
    rev = [m for k, m in pair_means.get(GROUPS[2], {}).items() if _involves(k, reverse)]
    return fwd + rev


def seed_contrasts(
    pair_means: dict[str, dict[str, float]], matched: dict[str, str]
) -> dict[str, dict[str, float]]:
    """Per matched forward run: its twin distance, its same-direction control and their difference.

    `pair_means` is `control_summary(...)["pair_means"]` (group -> "A vs B" -> mean distance), `matched` maps
    each forward run to its reversed twin (same seed). twin = mean distance of "f vs r"; control = mean of the
    forward-forward pair means that involve f and the reversed-reversed pair means that involve r; contrast =
    twin - control. One number per seed, so two methods can be compared seed by seed.
    """
    cross = pair_means.get(GROUPS[0], {})
    out: dict[str, dict[str, float]] = {}
    for f, r in matched.items():
        twin_key = f"{f} vs {r}"
        if twin_key not in cross:
            raise ConfigError(f"Seed contrast of {f!r}: no {GROUPS[0]} pair {twin_key!r} in the pair means.")
        controls = _same_direction_means(pair_means, f, r)
        if not controls:
            raise ConfigError(
                f"Seed contrast of {f!r}: no same-direction pair involves {f!r} or {r!r} (needs two runs "
                "of one direction)."
            )
        twin, control = float(cross[twin_key]), float(np.mean(controls))
        out[f] = {"twin": twin, "control": control, "contrast": twin - control}
    return out


def render_awareness_controls(
    groups: dict[str, dict[str, np.ndarray]],
    out: Path,
    name: str,
    meta: dict[str, Any],
    matched: dict[str, str] | None = None,
) -> tuple[Path, Path, dict[str, Any]]:
    """Violins of the pair groups side by side; PNG + JSON (group stats, pair means, contrast).

    With `matched` twins, the forward-vs-reversed group is drawn twice more: same seed, and other seeds.
    """
    summary = control_summary(groups, matched)
    pooled = {g: np.concatenate(list(p.values())) for g, p in groups.items() if p}
    if matched:
        twins = {f"{f} vs {r}" for f, r in matched.items()}
        cross = groups[GROUPS[0]]
        same_seed = [d for k, d in cross.items() if k in twins]
        other_seed = [d for k, d in cross.items() if k not in twins]
        pooled = {
            GROUPS[0]: pooled[GROUPS[0]],
            "forward vs reversed, same seed": np.concatenate(same_seed),
            **({"forward vs reversed, other seeds": np.concatenate(other_seed)} if other_seed else {}),
            **{g: pooled[g] for g in GROUPS[1:] if g in pooled},
        }
    title = f"Awareness with controls: {CONTRAST} = {summary['contrast']:+.4f}"
    fig = plot_awareness(pooled, meta.get("dataset", ""), title=title, xlabel="pair group (all pairs pooled)")
    data = {
        "analysis": "awareness_controls",
        **meta,
        "metric": "cosine_distance = 1 - cos(f_a(x), f_b(x)) per frame",
        **summary,
    }
    png, js = write_outputs(fig, data, out, name)
    return png, js, summary


def aligned_store_features(
    stores: dict[str, str | Path], split: str | None = "test"
) -> dict[str, np.ndarray]:
    """Run name -> [N, D] features of one split, checked to hold the same videos and frame times."""
    feats: dict[str, np.ndarray] = {}
    ref_name, ref = None, None
    for run, root in stores.items():
        store = FeatureStore(root)
        names = store.splits().get(split, []) if split else store.videos()
        if not names:
            raise ConfigError(f"{root}: split {split!r} is missing or empty.")
        items = store.read_many(names)
        key = [(v.video, np.asarray(v.frame_times)) for v in items]
        if ref is None:
            ref_name, ref = run, key
        elif [k[0] for k in key] != [k[0] for k in ref] or not all(
            len(a[1]) == len(b[1]) and np.allclose(a[1], b[1]) for a, b in zip(key, ref, strict=True)
        ):
            raise FeatureStoreError(f"Stores of {run!r} and {ref_name!r} hold different {split} frames.")
        feats[run] = np.concatenate([v.features for v in items])
    return feats


def run_awareness_controls(
    forward: dict[str, str | Path],
    reverse: dict[str, str | Path],
    out: Path,
    name: str = "awareness_controls",
    split: str | None = "test",
    matched: dict[str, str] | None = None,
) -> tuple[Path, Path, dict[str, Any]]:
    """Awareness from feature stores (run name -> store) of forward and reversed runs, with controls.

    `matched` maps a forward run to its reversed twin (same seed) when there is one.
    """
    check_run_names(forward, reverse)
    feats = aligned_store_features({**forward, **reverse}, split)
    groups = control_distances({r: feats[r] for r in forward}, {r: feats[r] for r in reverse})
    meta = {
        "split": split,
        "forward": {k: str(v) for k, v in forward.items()},
        "reversed": {k: str(v) for k, v in reverse.items()},
    }
    if matched:
        meta["matched"] = dict(matched)
    return render_awareness_controls(groups, out, name, meta, matched)

"""Label efficiency: a fraction of the training videos, drawn per seed, nested across fractions.

Surgical self-supervised papers report each encoder at 12.5 %, 25 % and 100 % of the labelled training videos
(SelfSupSurg); `--train-fraction F --fraction-seeds S` on `knn`, `linear`, `temporal`, `cv` and
`benchmark --fractions` draw those subsets here, one rule for all.

The rule (`subset_order`): the training videos are ranked by a seeded hash of their names, so a video's rank
depends on the seed and its name only (never on the features, so every encoder gets the same subsets and
comparisons are paired); walking that ranking, each video that brings a class no earlier video has moves to
the front, in that order. The subset at fraction F is the first `max(1, ceil(F * n))` videos of this order:
for one seed the 1/8 subset is a prefix of the 1/4 subset, which is a prefix of the 1/2 (they nest), and a
subset holds every class of the training videos once it is as long as the videos moved to the front; a
shorter one leaves classes out, which `over_subsets` says in one line and the results record.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.utils.console import ONE_LINE, logger
from plstitch_eval.utils.stats import mean_std_by_key

__all__ = [
    "DEFAULT_SEEDS",
    "SubsetDraw",
    "TrainFraction",
    "TrainSubset",
    "draw_subset",
    "fraction_config",
    "fraction_label",
    "fraction_of",
    "fraction_title",
    "over_subsets",
    "parse_fraction_seeds",
    "parse_fractions",
    "refuse_save",
    "subset_order",
    "subset_size",
    "subset_sizes",
]

FRACTION_FLAG, SEEDS_FLAG = "--train-fraction", "--fraction-seeds"
DEFAULT_SEEDS = (0, 1, 2)  # `--fraction-seeds 3`: three subsets per fraction, mean ± std over them
RULE = "nested: seeded hash rank of the video names, class-bringing videos first"  # recorded in the results


@dataclass(frozen=True)
class TrainFraction:
    """Train on `fraction` of the training videos (0 < fraction <= 1), once per seed of `seeds`.

    Fraction 1 is the whole training split, run once: exactly the results without a fraction.
    """

    fraction: float = 1.0
    seeds: tuple[int, ...] = DEFAULT_SEEDS

    def __post_init__(self) -> None:
        if isinstance(self.fraction, bool) or not isinstance(self.fraction, (int, float)):
            raise ConfigError(f"{FRACTION_FLAG} must be a number in (0, 1], got {self.fraction!r}.")
        if not 0 < self.fraction <= 1:  # NaN fails too
            raise ConfigError(
                f"{FRACTION_FLAG} must be in (0, 1] (a share of the training videos, e.g. 0.25), "
                f"got {self.fraction:g}."
            )
        object.__setattr__(self, "seeds", parse_fraction_seeds(self.seeds))

    @property
    def full(self) -> bool:
        """True for fraction 1: the whole training split, one run, no subset drawn."""
        return self.fraction >= 1


@dataclass(frozen=True)
class TrainSubset:
    """One drawn subset: its training videos (in the order given), out of how many, classes it lacks."""

    fraction: float
    seed: int
    videos: tuple[str, ...]
    of: int
    missing_classes: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """The subset as the results JSON records it."""
        return {
            "videos": list(self.videos),
            "videos_of": self.of,
            "missing_classes": list(self.missing_classes),
        }


def subset_size(n_videos: int, fraction: float) -> int:
    """`max(1, ceil(fraction * n))`, the float product rounded first (0.1 * 30 is 3, not 4)."""
    return max(1, min(n_videos, math.ceil(round(fraction * n_videos, 9))))


def _rank(seed: int, video: str) -> str:
    return hashlib.sha256(f"{seed}\0{video}".encode()).hexdigest()


def subset_order(classes: Mapping[str, Collection[str]], seed: int) -> list[str]:
    """The videos (keys; values: the classes each has) in drawing order for `seed`: every subset is a prefix.

    Seeded hash rank of the names, then each video bringing a class not yet covered moved to the front.
    """
    ranked = sorted(classes, key=lambda video: (_rank(seed, video), video))
    covered: set[str] = set()
    front = []
    for video in ranked:
        if set(classes[video]) - covered:
            front.append(video)
            covered |= set(classes[video])
    return front + [video for video in ranked if video not in set(front)]


def draw_subset(classes: Mapping[str, Collection[str]], fraction: float, seed: int) -> TrainSubset:
    """The subset of the videos (keys of `classes`, kept in that order) at `fraction` for `seed`.

    Depends only on the names, their classes, the seed and the fraction; nested across fractions.
    """
    if not classes:
        raise EvaluationError("No training videos to draw a fraction of.")
    order = subset_order(classes, seed)
    chosen = set(order[: subset_size(len(order), fraction)])
    videos = tuple(video for video in classes if video in chosen)
    everything = {c for video in classes for c in classes[video]}
    present = {c for video in videos for c in classes[video]}
    missing = tuple(sorted(everything - present, key=str))
    return TrainSubset(fraction, seed, videos, len(classes), missing)


@dataclass
class SubsetDraw:
    """One seed's draw inside a protocol run: `take` draws a subset and keeps it (a CV run draws per fold)."""

    fraction: float
    seed: int
    drawn: list[TrainSubset] = field(default_factory=list)

    def take(self, classes: Mapping[str, Collection[str]]) -> TrainSubset:
        """`draw_subset` at this draw's fraction and seed, remembered for the results."""
        subset = draw_subset(classes, self.fraction, self.seed)
        self.drawn.append(subset)
        return subset

    def record(self) -> dict[str, Any]:
        """The subset(s) drawn: one subset's record, or a CV run's `folds` of them."""
        if len(self.drawn) == 1:
            return {"seed": self.seed, **self.drawn[0].record()}
        missing = sorted({c for s in self.drawn for c in s.missing_classes}, key=str)
        folds = [s.record() for s in self.drawn]
        return {"seed": self.seed, "folds": folds, "missing_classes": missing}


def over_subsets(
    run: Callable[[SubsetDraw | None], dict[str, Any]], train_fraction: TrainFraction | None
) -> dict[str, Any]:
    """`run(None)` for no fraction or fraction 1 (today's results exactly); else `run` once per seed, each
    drawing its own subset, combined: `metrics` / `metrics_std` the mean and sample std over the seeds,
    `per_video` each test video's mean over them, the rest the first seed's, and a `train_fraction` block.

    Classes left out of a subset are said in one line on stderr (and recorded per subset).
    """
    if train_fraction is None or train_fraction.full:
        return run(None)
    runs = []
    for seed in train_fraction.seeds:
        draw = SubsetDraw(train_fraction.fraction, seed)
        results = run(draw)
        if not draw.drawn:
            raise EvaluationError(
                f"protocol {results.get('task')!r} drew no training subset: it does not take {FRACTION_FLAG}."
            )
        runs.append((draw, results))
    _say_rounded(train_fraction, [draw for draw, _ in runs])
    _say_missing(train_fraction, [draw for draw, _ in runs])
    return _combine(train_fraction, runs)


def _say_rounded(train_fraction: TrainFraction, draws: list[SubsetDraw]) -> None:
    """One line when the fraction is less than one video of some draw, so each subset got one video."""
    short = sorted({s.of for d in draws for s in d.drawn if train_fraction.fraction * s.of < 1})
    if not short:
        return
    of = " or ".join(str(n) for n in short)
    logger.warning(
        "%s %g of %s training videos is less than one video; each subset holds 1 video (1 of %s).",
        FRACTION_FLAG,
        train_fraction.fraction,
        of,
        of,
        extra=ONE_LINE,
    )


def _say_missing(train_fraction: TrainFraction, draws: list[SubsetDraw]) -> None:
    lacking = [d for d in draws if any(s.missing_classes for s in d.drawn)]
    if not lacking:
        return
    classes = sorted({c for d in lacking for s in d.drawn for c in s.missing_classes}, key=str)
    sizes = sorted({f"{len(s.videos)} of {s.of}" for d in lacking for s in d.drawn})
    logger.warning(
        "%s %g (%s training videos) leaves class(es) %s out of the subsets of seed(s) %s: too few videos to "
        "hold every class; recorded as missing_classes in the results.",
        FRACTION_FLAG,
        train_fraction.fraction,
        ", ".join(sizes),
        ", ".join(repr(c) for c in classes),
        ", ".join(str(d.seed) for d in lacking),
        extra=ONE_LINE,
    )


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _mean_records(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Key by key (those of the first record), the mean over the records (None counts as NaN)."""
    return {key: float(np.mean([_number(r.get(key)) for r in records])) for key in records[0]}


def _combine(train_fraction: TrainFraction, runs: list[tuple[SubsetDraw, dict[str, Any]]]) -> dict[str, Any]:
    results = [r for _, r in runs]
    mean, std = mean_std_by_key([{k: _number(v) for k, v in r["metrics"].items()} for r in results])
    combined = dict(results[0])
    combined["metrics"] = mean
    combined.pop("metrics_std", None)
    if len(runs) > 1:
        combined["metrics_std"] = std
    videos = results[0].get("per_video") or {}
    combined["per_video"] = {v: _mean_records([r["per_video"][v] for r in results]) for v in videos}
    if "metrics_by_k" in combined:
        combined["metrics_by_k"] = {
            k: _mean_records([r["metrics_by_k"][k] for r in results]) for k in combined["metrics_by_k"]
        }
    combined["train_fraction"] = {
        "fraction": train_fraction.fraction,
        "seeds": list(train_fraction.seeds),
        "rule": RULE,
        "subsets": [{**draw.record(), "metrics": r["metrics"]} for draw, r in runs],
        "metrics_mean": mean,
        "metrics_std": std if len(runs) > 1 else None,
    }
    return combined


def parse_fraction_seeds(value: str | int | Sequence[int], option: str = SEEDS_FLAG) -> tuple[int, ...]:
    """`3` (a count: seeds 0, 1, 2) or `0,4,9` (those seeds; one seed alone: `7,`) as a tuple of seeds."""
    if isinstance(value, bool):
        raise ConfigError(f"{option} must be a count (3) or a list of seeds (0,4,9), got {value!r}.")
    if isinstance(value, int):
        if value < 1:
            raise ConfigError(f"{option} {value}: give a count >= 1 (3: seeds 0, 1, 2) or seeds like 0,4,9.")
        return tuple(range(value))
    if isinstance(value, str):
        text = value.strip()
        if "," not in text:
            try:
                return parse_fraction_seeds(int(text), option)
            except ValueError:
                raise ConfigError(
                    f"{option} {value!r}: give a count (3: seeds 0, 1, 2) or a list of seeds (0,4,9)."
                ) from None
        value = [item for item in text.split(",") if item.strip()]
    try:
        seeds = tuple(int(str(item).strip()) for item in value)
    except (TypeError, ValueError):
        raise ConfigError(f"{option} {value!r}: seeds are whole numbers, e.g. 0,4,9.") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ConfigError(f"{option} {value!r}: give distinct seeds >= 0, e.g. 0,4,9 (or a count: 3).")
    return seeds


def parse_fractions(value: str | float | Sequence[float], option: str = "--fractions") -> tuple[float, ...]:
    """`0.125,0.25,0.5,1` (or `1/8,1/4,1/2,1`) as sorted distinct fractions in (0, 1]."""
    items = (
        value.split(",") if isinstance(value, str) else [value] if isinstance(value, (int, float)) else value
    )
    fractions = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        try:
            number = float(Fraction(text))
        except (ValueError, ZeroDivisionError):
            raise ConfigError(f"{option}: {text!r} is not a fraction; write e.g. 0.125,0.25,0.5,1.") from None
        if not 0 < number <= 1:
            raise ConfigError(f"{option}: {text} is not in (0, 1]; each is a share of the training videos.")
        fractions.append(number)
    if not fractions:
        raise ConfigError(f"{option} names no fraction; write e.g. 0.125,0.25,0.5,1.")
    return tuple(sorted(set(fractions)))


def fraction_config(fraction: float | None, seeds: str | None) -> TrainFraction | None:
    """The `--train-fraction` / `--fraction-seeds` a command was given (None: neither, today's run)."""
    if fraction is None:
        if seeds is not None:
            raise ConfigError(
                f"{SEEDS_FLAG} needs {FRACTION_FLAG} (e.g. {FRACTION_FLAG} 0.25 {SEEDS_FLAG} 3)."
            )
        return None
    return TrainFraction(fraction, DEFAULT_SEEDS if seeds is None else parse_fraction_seeds(seeds))


def fraction_of(config: Any) -> TrainFraction | None:
    """The training fraction a benchmark cell runs at (`BenchmarkConfig.train_fraction`; None: all)."""
    return getattr(config, "train_fraction", None)


def fraction_label(fraction: float) -> str:
    """`1/8`, `1/4`, `1/2`, `all` (or `0.3`): a fraction as tables and figures name it."""
    if fraction >= 1:
        return "all"
    exact = Fraction(fraction).limit_denominator(64)
    return (
        f"{exact.numerator}/{exact.denominator}" if abs(float(exact) - fraction) < 1e-9 else f"{fraction:g}"
    )


def fraction_title(train_fraction: TrainFraction | None, results: Mapping[str, Any] | None = None) -> str:
    """What a command's metrics title adds for a fraction: `, 1/4 of train (4 of 16 videos), mean ± std over 3
    subsets`; the videos drawn come from `results` (its `train_fraction` block), so that a fraction rounded up
    (0.01 of 16 is 1 video) says how many videos were trained on."""
    if train_fraction is None or train_fraction.full:
        return ""
    share, subsets = fraction_label(train_fraction.fraction), len(train_fraction.seeds)
    sizes = subset_sizes(results or {})
    drawn = f" ({', '.join(sizes)} videos)" if sizes else ""
    return f", {share} of train{drawn}, mean ± std over {subsets} subset{'' if subsets == 1 else 's'}"


def subset_sizes(results: Mapping[str, Any]) -> list[str]:
    """`["1 of 16"]`: the distinct sizes of the subsets a run's results record (a CV run's folds can differ:
    `["3 of 12", "4 of 13"]`), [] without a `train_fraction` block."""
    block = results.get("train_fraction") or {}
    drawn = [fold for subset in block.get("subsets") or [] for fold in subset.get("folds") or [subset]]
    sizes = {(len(s["videos"]), s["videos_of"]) for s in drawn if "videos" in s and "videos_of" in s}
    return [f"{size} of {of}" for size, of in sorted(sizes)]


def refuse_save(train_fraction: TrainFraction | None, trained: str) -> None:
    """One line refusing `--save` with a fraction below 1: one `trained` model per subset, none to keep."""
    if train_fraction is not None and not train_fraction.full:
        raise ConfigError(
            f"--save does not go with {FRACTION_FLAG} below 1 (one {trained} is trained per subset); "
            "drop one of them."
        )

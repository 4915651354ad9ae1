"""The `skill` task: one score per video (JIGSAWS' global rating score, or one of its six parts), regressed
from the video's frozen features - mean-pooled (ridge) or over time (`plstitch temporal --task skill`, a small
dilated temporal conv over the features and their frame differences); Spearman's rho and MAE over the
held-out videos.

The scores are the store manifest's `skill` ({video: {name: score}}, names in `skill_names`), written by
extraction for a dataset that rates skill (`extract/store.py: skill_record`). The fit (ridge regression,
`protocols/skill.py`) and the folds (LOSO, LOUO: `metrics/skill.py`) live apart; this module says which
numbers a run reads and how its predictions are scored, beside the two reference rows the skill literature
asks a representation to beat: the training mean (rho undefined) and a duration-only regressor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError
from plstitch_eval.metrics.remaining import video_end_s
from plstitch_eval.metrics.skill import duration_prediction, skill_scores, training_mean_prediction
from plstitch_eval.tasks.registry import VIDEO_REGRESSION, Task, register_task

SKILL, SKILL_NAMES = "skill", "skill_names"  # the manifest's keys: {video: {name: score}} and the names
DEFAULT_SCORE = "grs"
METRICS = ("spearman_rho", "MAE")
MEAN_NOTE = "the same score for every held-out video: Spearman's rho is undefined (no rank order)"


def video_scores(manifest: Mapping[str, Any], root: str, name: str = DEFAULT_SCORE) -> dict[str, float]:
    """{video: score `name`} from a store's manifest; one line naming the manifest and the fix when the store
    holds no skill scores or not that one."""
    scores, names = manifest.get(SKILL) or {}, list(manifest.get(SKILL_NAMES) or [])
    if not scores:
        raise ConfigError(
            f"{root}/manifest.json records no skill scores (dataset {manifest.get('dataset')!r}); --task "
            "skill needs a store extracted from a dataset that rates each video's skill: plstitch extract "
            "--dataset jigsaws (or synthetic-skill)."
        )
    if name not in names:
        raise ConfigError(
            f"--skill-score {name!r} is not in {root}/manifest.json; it has {', '.join(names)}."
        )
    return {video: float(own[name]) for video, own in scores.items() if name in own}


def check_scored(videos: Sequence[str], scores: Mapping[str, float], root: str) -> None:
    """Refuse (one line) videos the manifest gives no score."""
    missing = [v for v in videos if v not in scores]
    if missing:
        raise ConfigError(
            f"{root}/manifest.json gives no skill score for {', '.join(missing[:3])}"
            f"{' ...' if len(missing) > 3 else ''}; extract the store again from the dataset's meta files."
        )


def duration_s(frame_times: np.ndarray) -> float:
    """A video's duration in seconds from its stored frame times (its end: `video_end_s`)."""
    return video_end_s(np.asarray(frame_times, np.float64))


def score(predicted: Mapping[str, float], scores: Mapping[str, float]) -> dict[str, Any]:
    """`{"spearman_rho", "MAE"}` of per-video predictions (rho None, with a `note`, where undefined)."""
    own = skill_scores(predicted, scores)
    out: dict[str, Any] = {"spearman_rho": own["spearman_rho"], "MAE": own["mae"]}
    if "note" in own:
        out["note"] = own["note"]
    return out


def references(
    train: Sequence[str], test: Sequence[str], scores: Mapping[str, float], durations: Mapping[str, float]
) -> dict[str, tuple[str, dict[str, float]]]:
    """{name: (description, {test video: prediction})}: the training mean and the duration-only regressor."""
    mean = training_mean_prediction([scores[v] for v in train], test)
    timed = duration_prediction(
        [durations[v] for v in train], [scores[v] for v in train], {v: durations[v] for v in test}
    )
    return {
        "training-mean": (f"the mean training score for every video ({MEAN_NOTE})", mean),
        "duration": (
            "least squares of the training scores on video duration (skill correlates with time)",
            timed,
        ),
    }


TASK = register_task(
    Task(
        name="skill",
        summary="surgical skill: one score per video (GRS or a part) from its frozen features",
        head=VIDEO_REGRESSION,
        labels="per-video skill scores (jigsaws, synthetic-skill)",
        metrics=METRICS,
        select_metric="ridge alpha by leave-one-out error on the training videos",
        protocols=("linear", "cv", "temporal"),
        needs=(SKILL,),
    )
)

"""The skill task's runs behind `linear|cv|temporal --task skill`: the ridge on mean-pooled features (the
store's split, or over folds; `--train-fraction` cuts its training videos) and the temporal skill head.

One module that `commands/evaluate.py` and `commands/temporal.py` both call, so neither imports the other
for it. Library imports sit inside the functions for `plstitch --help`'s start-up (see commands/evaluate.py).
"""

from __future__ import annotations

from plstitch_eval.commands.task_options import refuse_for_video_task, refuse_temporal

__all__ = ["SKILL_OPTIONS", "skill_cv", "skill_run", "temporal_skill"]

SKILL_OPTIONS = ("layers", "channels", "dropout", "lr", "epochs", "weight_decay", "seed")


def temporal_skill(
    features, skill_score, scheme, folds, seed, json_path, model=None, threads=None, used=None
) -> None:  # noqa: ANN001
    """`temporal --task skill` (the store's split; `folds` None) or `cv --task skill --protocol temporal
    --folds loso|louo|K`: the temporal skill head beside the reference rows. `model`: the temporal options
    given (those of SKILL_OPTIONS set the head; the others are refused)."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols.skill import run_skill_cv, run_skill_linear, temporal_head
    from plstitch_eval.tasks.skill import DEFAULT_SCORE
    from plstitch_eval.temporal.skill_head import SkillHeadConfig

    given = {k: v for k, v in (model or {}).items() if v is not None}
    other = {k.replace("_", "-"): True for k in given if k not in SKILL_OPTIONS}
    refuse_temporal(
        "skill", {**other, **(used or {})}, "one score per video from a small temporal conv, fixed epochs"
    )
    own = {k: given[k] for k in SKILL_OPTIONS if k in given}
    if threads is not None:
        own["num_threads"] = threads or None
    head, name = temporal_head(SkillHeadConfig(**own)), skill_score or DEFAULT_SCORE
    if folds is None:
        results = run_skill_linear(features, name, scheme, head)
        title = f"skill ({name}; temporal head) on {features}"
    else:
        results = run_skill_cv(features, folds, name, seed or 0, head)
        title = f"skill ({name}; temporal head) CV by video, folds {folds}: mean ± std over folds"
    print_and_write_results(results, json_path, title)


def skill_cv(features, skill_score, protocol, folds, seed, json_path, relaxed, fraction) -> None:  # noqa: ANN001
    """`cv --task skill`: the ridge (its training videos cut to `fraction` if given) or, with `--protocol
    temporal`, the temporal skill head (no fractions) over `folds`."""
    temporal = protocol == "temporal"
    refuse_for_video_task("skill", {"relaxed": relaxed, "train-fraction": temporal and fraction is not None})
    if temporal:
        return temporal_skill(features, skill_score, None, folds, seed, json_path)
    return skill_run(features, skill_score, None, folds, seed, json_path, fraction)


def skill_run(features, skill_score, scheme, folds, seed, json_path, fraction=None) -> None:  # noqa: ANN001
    """`linear --task skill` (the store's split; `folds` None) or `cv --task skill --folds loso|louo|K`;
    `fraction`: the training videos cut to `--train-fraction`, once per `--fraction-seeds` seed."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols.fractions import fraction_title
    from plstitch_eval.protocols.skill import run_skill_cv, run_skill_linear
    from plstitch_eval.tasks.skill import DEFAULT_SCORE

    name = skill_score or DEFAULT_SCORE
    if folds is None:
        results = run_skill_linear(features, name, scheme, train_fraction=fraction)
        what = f"ridge, alpha={results['protocol']['chosen_alpha']:g}{fraction_title(fraction, results)}"
        title = f"skill ({name}; {what}) on {features}"
    else:
        results = run_skill_cv(features, folds, name, seed, train_fraction=fraction)
        cut = fraction_title(fraction, results)  # then mean ± std over its subsets, not the folds
        title = f"skill ({name}; ridge) CV by video, folds {folds}{cut or ': mean ± std over folds'}"
    print_and_write_results(results, json_path, title)

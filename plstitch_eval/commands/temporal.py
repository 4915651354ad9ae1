"""CLI command `temporal`: options -> `TemporalConfig` -> the temporal protocol; print and save results.

Every model option defaults to "not given" (None), so `TemporalConfig`'s defaults (MS-TCN as published) win;
`--threads` too (a fixed 1 thread: the thread count changes the numbers), `--threads 0` = torch's default.
Library imports sit inside the command for `plstitch --help`'s start-up (see commands/evaluate.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from plstitch_eval.commands.evaluate import SkillScoreOpt
from plstitch_eval.commands.options import (
    AnticipateOpt,
    ElapsedOpt,
    FeaturesOpt,
    FractionSeedsOpt,
    HorizonOpt,
    JsonOpt,
    OverwriteProbeOpt,
    RelaxedOpt,
    SaveProbeOpt,
    SchemeOpt,
    TaskOpt,
    TrainFractionOpt,
    ValFractionOpt,
)
from plstitch_eval.commands.probe_configs import temporal_config
from plstitch_eval.commands.skill_runs import temporal_skill
from plstitch_eval.commands.task_options import (
    refuse_for_regression,
    refuse_temporal,
    task_settings,
    video_task,
)

__all__ = ["register", "temporal", "temporal_config", "temporal_multilabel"]

StagesOpt = Annotated[int | None, typer.Option(help="Stages S (MS-TCN 4; TeCNO 2).")]
LayersOpt = Annotated[int | None, typer.Option(help="Dilated layers per stage L (MS-TCN 10).")]
ChannelsOpt = Annotated[int | None, typer.Option(help="Feature maps F (MS-TCN 64; TeCNO 45).")]
DropoutOpt = Annotated[float | None, typer.Option(help="Dropout in every layer (0.5).")]
CausalConvOpt = Annotated[
    bool | None,
    typer.Option("--causal/--no-causal", help="TeCNO's causal convolutions: frame t sees frames <= t."),
]
LrOpt = Annotated[float | None, typer.Option("--lr", help="Adam learning rate (MS-TCN 5e-4).")]
EpochsOpt = Annotated[int | None, typer.Option(help="Epochs (MS-TCN 50); the best on val is kept.")]
BatchSizeOpt = Annotated[int | None, typer.Option(help="Videos per step (MS-TCN 1).")]
SmoothWeightOpt = Annotated[
    float | None, typer.Option(help="Weight of the truncated-MSE smoothing loss (0.15).")
]
TauOpt = Annotated[
    float | None,
    typer.Option(help="Smoothing loss truncation: squared differences clamped at tau^2 (4)."),
]
WeightDecayOpt = Annotated[float | None, typer.Option(help="Adam weight decay (0).")]
EpochMetricOpt = Annotated[
    str | None, typer.Option(help="Validation metric choosing the epoch: accuracy, macro_f1 or edit.")
]
SeedOpt = Annotated[int | None, typer.Option(help="Seed of init, dropout, video order and hold-out.")]
SeedsOpt = Annotated[
    int | None, typer.Option(help="Train seeds --seed .. --seed+N-1 on the same splits: mean ± std.")
]
FitDeviceOpt = Annotated[str | None, typer.Option(help="cpu (default), auto or cuda[:N].")]
FitPrecisionOpt = Annotated[
    str | None, typer.Option(help="fp32 (default), bf16, fp16 (autocast, CUDA) or auto.")
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        help="CPU threads: they change the float rounding, so the results (recorded as "
        "protocol.threads). Default 1 on any machine; 0 = torch's default (physical cores or "
        "OMP_NUM_THREADS)."
    ),
]


def temporal(
    features: FeaturesOpt,
    stages: StagesOpt = None,
    layers: LayersOpt = None,
    channels: ChannelsOpt = None,
    dropout: DropoutOpt = None,
    causal: CausalConvOpt = None,
    lr: LrOpt = None,
    epochs: EpochsOpt = None,
    batch_size: BatchSizeOpt = None,
    smooth_weight: SmoothWeightOpt = None,
    tau: TauOpt = None,
    weight_decay: WeightDecayOpt = None,
    select_metric: EpochMetricOpt = None,
    seed: SeedOpt = None,
    seeds: SeedsOpt = None,
    device: FitDeviceOpt = None,
    precision: FitPrecisionOpt = None,
    threads: ThreadsOpt = None,
    val_fraction: ValFractionOpt = 0.2,
    split_scheme: SchemeOpt = None,
    relaxed: RelaxedOpt = False,
    train_fraction: TrainFractionOpt = None,
    fraction_seeds: FractionSeedsOpt = None,
    task: TaskOpt = "phases",
    skill_score: SkillScoreOpt = None,
    horizon: HorizonOpt = None,
    anticipate: AnticipateOpt = None,
    elapsed: ElapsedOpt = False,
    json_path: JsonOpt = None,
    save: SaveProbeOpt = None,  # with --seeds: the first seed's model
    overwrite: OverwriteProbeOpt = False,
) -> None:
    """MS-TCN on the train videos' features, epoch chosen on val, every metric on test (docs/temporal.md);
    --task tools|triplets|cvs|skill: their temporal heads (docs/tasks.md)."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.probes import check_probe_target
    from plstitch_eval.protocols.fractions import fraction_config, refuse_save
    from plstitch_eval.protocols.temporal import save_temporal_probe, temporal_run, with_threads
    from plstitch_eval.utils.console import console

    fraction = fraction_config(train_fraction, fraction_seeds)
    if save is not None:
        refuse_save(fraction, "model")
        check_probe_target(save, overwrite)  # refuse before training, not after
    model = dict(stages=stages, layers=layers, channels=channels, dropout=dropout, causal=causal, lr=lr,
                 epochs=epochs, batch_size=batch_size, smooth_weight=smooth_weight, tau=tau,
                 weight_decay=weight_decay, select_metric=select_metric, seed=seed, device=device,
                 precision=precision)  # fmt: skip
    settings = task_settings(task, "temporal", horizon, anticipate, elapsed)
    used = {"relaxed": relaxed, "select-metric": select_metric is not None, "seeds": (seeds or 1) > 1}
    if video_task(task, skill_score):  # skill: the temporal skill head, on the store's split
        used |= {"save": save is not None, "train-fraction": fraction is not None}
        return temporal_skill(
            features, skill_score, split_scheme, None, seed, json_path, model, threads, used
        )
    config = with_threads(
        temporal_config(**model), threads
    )  # 0: torch's default, which depends on the machine
    if settings is not None:
        refuse_for_regression(task, used)
        return temporal_regression(
            features, task, settings, config, split_scheme, val_fraction, fraction, json_path, save, overwrite
        )
    if task != "phases":  # a multi-label task: tools, triplets, cvs
        return temporal_multilabel(
            task, features, config, split_scheme, val_fraction, fraction, json_path, used, save, overwrite
        )
    options = {"scheme": split_scheme, "val_fraction": val_fraction, "relaxed": relaxed}
    run = temporal_run(features, config, seeds, fraction, **options)
    print_and_write_results(run.results, json_path, run.title)
    if save is not None:
        save_temporal_probe(save, features, run.results, run.fit, config, overwrite=overwrite)
        console.print(f"probe saved to {save}", highlight=False)


def temporal_regression(
    features, task, settings, config, scheme, val_fraction, fraction, json_path, save=None, overwrite=False
) -> None:  # fmt: skip
    """`temporal --task anticipation|rsd`: the MS-TCN regressing the task's targets, beside its references;
    `--save` keeps it as a probe that gives minutes (causal: it runs live)."""
    from plstitch_eval.commands.evaluate import fit_and_save
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols.fractions import fraction_title
    from plstitch_eval.utils.console import console

    results = fit_and_save(
        "temporal", features, task, settings, config, scheme, val_fraction, fraction, save, overwrite
    )
    proto = results["protocol"]
    epoch = f", epoch {proto['best_epoch']}" if "best_epoch" in proto else ""
    causal = "causal " if config.causal else ""
    horizon = f", horizon {settings.horizon_min:g} min" if task == "anticipation" else ""
    title = f"{task} ({causal}MS-TCN{epoch}{horizon}{fraction_title(fraction, results)}; minutes)"
    print_and_write_results(results, json_path, title)
    if save is not None:
        console.print(f"probe saved to {save}", highlight=False, soft_wrap=True)


def temporal_multilabel(
    task, features, config, scheme, val_fraction, fraction, json_path, used, save=None, overwrite=False
) -> None:  # noqa: ANN001
    """`temporal --task tools|triplets|cvs`: the multi-label MS-TCN, epoch chosen on the task's validation
    metric, scored by the task's own metrics (results task `temporal-<task>`); `--save` keeps it as a probe
    that says which labels are present (causal with --causal: it runs live)."""
    from plstitch_eval.commands.evaluate import MULTILABEL_TITLES
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols.fractions import fraction_title
    from plstitch_eval.protocols.multilabel_probe import save_temporal_multilabel_probe
    from plstitch_eval.protocols.temporal_multilabel import fit_multilabel_temporal, run_multilabel_temporal
    from plstitch_eval.tasks import get_task
    from plstitch_eval.utils.console import console

    chosen = get_task(task)
    refuse_temporal(task, used, f"its MS-TCN is chosen on validation {chosen.select_metric}, one seed")
    options = {"scheme": scheme, "val_fraction": val_fraction, "progress": True}
    if save is None:
        results, fitted = (
            run_multilabel_temporal(chosen, features, config, **options, train_fraction=fraction),
            None,
        )
    else:
        results, fitted = fit_multilabel_temporal(chosen, features, config, **options)
    shape = f"{config.stages}x{config.layers}x{config.channels}"
    epoch = f"epoch {results['protocol']['chosen_epoch']}" if "chosen_epoch" in results["protocol"] else ""
    what = MULTILABEL_TITLES.get(task, task)
    title = f"{what} (multi-label MS-TCN {shape}, {epoch}{fraction_title(fraction, results)})"
    print_and_write_results(results, json_path, title)
    if fitted is not None:
        save_temporal_multilabel_probe(save, chosen, features, results, fitted, config, overwrite=overwrite)
        console.print(f"probe saved to {save}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `plstitch temporal` to the app."""
    app.command("temporal")(temporal)

"""CLI command `temporal`: options -> `TemporalConfig` -> the temporal protocol; print and save results.

Every model option defaults to "not given" (None), so `TemporalConfig`'s defaults (MS-TCN as published) win;
`--threads` too (a fixed 1 thread: the thread count changes the numbers), `--threads 0` = torch's default.
Library imports sit inside the command for `plstitch --help`'s start-up (see commands/evaluate.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer

from plstitch_eval.commands.options import (
    FeaturesOpt,
    JsonOpt,
    OverwriteProbeOpt,
    RelaxedOpt,
    SaveProbeOpt,
    SchemeOpt,
    ValFractionOpt,
)
from plstitch_eval.commands.probe_configs import temporal_config

__all__ = ["register", "temporal", "temporal_config"]


def temporal(
    features: FeaturesOpt,
    stages: Annotated[int | None, typer.Option(help="Stages S (MS-TCN 4; TeCNO 2).")] = None,
    layers: Annotated[int | None, typer.Option(help="Dilated layers per stage L (MS-TCN 10).")] = None,
    channels: Annotated[int | None, typer.Option(help="Feature maps F (MS-TCN 64; TeCNO 45).")] = None,
    dropout: Annotated[float | None, typer.Option(help="Dropout in every layer (0.5).")] = None,
    causal: Annotated[
        bool | None,
        typer.Option("--causal/--no-causal", help="TeCNO's causal convolutions: frame t sees frames <= t."),
    ] = None,
    lr: Annotated[float | None, typer.Option("--lr", help="Adam learning rate (MS-TCN 5e-4).")] = None,
    epochs: Annotated[int | None, typer.Option(help="Epochs (MS-TCN 50); the best on val is kept.")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Videos per step (MS-TCN 1).")] = None,
    smooth_weight: Annotated[
        float | None, typer.Option(help="Weight of the truncated-MSE smoothing loss (0.15).")
    ] = None,
    tau: Annotated[
        float | None,
        typer.Option(help="Smoothing loss truncation: squared differences clamped at tau^2 (4)."),
    ] = None,
    weight_decay: Annotated[float | None, typer.Option(help="Adam weight decay (0).")] = None,
    select_metric: Annotated[
        str | None, typer.Option(help="Validation metric choosing the epoch: accuracy, macro_f1 or edit.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of init, dropout, video order and hold-out.")] = None,
    seeds: Annotated[
        int | None, typer.Option(help="Train seeds --seed .. --seed+N-1 on the same splits: mean ± std.")
    ] = None,
    device: Annotated[str | None, typer.Option(help="cpu (default), auto or cuda[:N].")] = None,
    precision: Annotated[
        str | None, typer.Option(help="fp32 (default), bf16, fp16 (autocast, CUDA) or auto.")
    ] = None,
    threads: Annotated[
        int | None,
        typer.Option(
            help="CPU threads: they change the float rounding, so the results (recorded as "
            "protocol.threads). Default 1 on any machine; 0 = torch's default (physical cores or "
            "OMP_NUM_THREADS)."
        ),
    ] = None,
    val_fraction: ValFractionOpt = 0.2,
    split_scheme: SchemeOpt = None,
    relaxed: RelaxedOpt = False,
    json_path: JsonOpt = None,
    save: SaveProbeOpt = None,  # with --seeds: the first seed's model
    overwrite: OverwriteProbeOpt = False,
) -> None:
    """MS-TCN on the train videos' features, epoch chosen on val, every metric on test (docs/temporal.md)."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.probes import check_probe_target
    from plstitch_eval.protocols.temporal import run_temporal, run_temporal_seeds, save_temporal_probe
    from plstitch_eval.utils.console import console

    if save is not None:
        check_probe_target(save, overwrite)  # refuse before training, not after
    config = temporal_config(
        stages=stages,
        layers=layers,
        channels=channels,
        dropout=dropout,
        causal=causal,
        lr=lr,
        epochs=epochs,
        batch_size=batch_size,
        smooth_weight=smooth_weight,
        tau=tau,
        weight_decay=weight_decay,
        select_metric=select_metric,
        seed=seed,
        device=device,
        precision=precision,
        num_threads=threads or None,
    )
    if threads == 0:
        config = replace(config, num_threads=None)  # torch's setting: depends on the machine
    options: dict[str, Any] = {"scheme": split_scheme, "val_fraction": val_fraction, "relaxed": relaxed}
    if seeds is not None and seeds != 1:
        results, fits = run_temporal_seeds(features, config, seeds, **options)
        fit, over = fits[0], f", mean ± std over {seeds} seeds"
    else:
        results, fit = run_temporal(features, config, **options)
        over = f", epoch {fit.best_epoch}"
    over += f", {fit.device}, {fit.threads} thread{'' if fit.threads == 1 else 's'}"
    kind = "causal " if config.causal else ""
    shape = f"{config.stages}x{config.layers}x{config.channels}"
    print_and_write_results(results, json_path, f"temporal ({kind}MS-TCN {shape}{over})")
    if save is not None:
        save_temporal_probe(save, features, results, fit, config, overwrite=overwrite)
        console.print(f"probe saved to {save}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `plstitch temporal` to the app."""
    app.command("temporal")(temporal)

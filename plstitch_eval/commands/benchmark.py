"""CLI command `benchmark`: models x datasets x protocols in one resumable run, then the paper-style table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import CropMarginOpt, DecodeDeviceOpt, DecoderOpt


def benchmark(
    models: Annotated[
        str,
        typer.Option(
            "--models",
            "-m",
            help="Comma-separated encoder specs (registry names, hf-hub:..., random-init:SPEC, folders, "
            "checkpoints) or collections: paper-surgical, paper-cooking, 2026 (docs/benchmark.md).",
        ),
    ],
    datasets: Annotated[
        str,
        typer.Option(
            "--datasets",
            "-d",
            help="Comma-separated NAME or NAME=ROOT (adapters of `plstitch datasets`), or a .toml/.yaml file "
            "of datasets with their roots and options (docs/benchmark.md).",
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output folder: features/, results/, table.md, table.json.")
    ],
    protocols: Annotated[
        str,
        typer.Option(
            "--protocols",
            "-p",
            help="knn, linear, temporal (MS-TCN), cv and/or linear-tools (tool presence, mAP).",
        ),
    ] = "knn,linear",
    metrics: Annotated[
        str | None,
        typer.Option("--metrics", help="Table columns, e.g. accuracy,macro_f1_video (default: per dataset)."),
    ] = None,
    k: Annotated[int, typer.Option("--k", help="k-NN neighbours.")] = 20,
    temperature: Annotated[float, typer.Option(help="k-NN temperature T in exp(sim / T).")] = 0.07,
    weighting: Annotated[str, typer.Option(help="k-NN weighting: exp, similarity or uniform.")] = "exp",
    lr: Annotated[
        list[float] | None, typer.Option("--lr", help="Linear-probe learning rates (repeat).")
    ] = None,
    wd: Annotated[
        list[float] | None, typer.Option("--wd", help="Linear-probe weight decays (repeat).")
    ] = None,
    optimizer: Annotated[str, typer.Option(help="Linear probe: sgd (momentum 0.9) or adamw.")] = "sgd",
    epochs: Annotated[int, typer.Option(help="Linear-probe epochs.")] = 20,
    select_metric: Annotated[
        str, typer.Option(help="Linear-probe validation metric: accuracy or macro_f1.")
    ] = "accuracy",
    seed: Annotated[int, typer.Option(help="Seed of the linear probe, the MS-TCN and the CV folds.")] = 0,
    folds: Annotated[int, typer.Option(help="cv: number of folds (split by video).")] = 5,
    cv_protocol: Annotated[str, typer.Option("--cv-protocol", help="cv: knn, linear or temporal.")] = "knn",
    temporal_epochs: Annotated[
        int | None, typer.Option("--temporal-epochs", help="temporal: MS-TCN epochs (default 50).")
    ] = None,
    causal: Annotated[bool, typer.Option("--causal", help="temporal: causal convolutions (online).")] = False,
    fps: Annotated[
        float | None, typer.Option(help="Sampling rate in frames/s (default: each dataset's eval fps).")
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", help="Frames per forward.")] = 64,
    num_workers: Annotated[
        int | None,
        typer.Option(
            "--num-workers",
            "-j",
            help="Decoding workers (default: one per core on a GPU, min(4, cores) on CPU).",
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    crop_black_margin: CropMarginOpt = False,
    decoder: DecoderOpt = "pyav",
    decode_device: DecodeDeviceOpt = "auto",
    precision: Annotated[
        str, typer.Option(help="auto (bf16 on CUDA, fp32 on CPU), fp32, bf16 or fp16.")
    ] = "auto",
    trust_pickle: Annotated[
        bool, typer.Option("--trust-pickle", help="Allow loading pickle checkpoints (runs their code).")
    ] = False,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite", help="Recompute results made with other settings; replace stores made differently."
        ),
    ] = False,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json", help="Also write the table JSON to this file; - prints it on stdout.", dir_okay=False
        ),
    ] = None,
) -> None:
    """Evaluate every model on every dataset with every protocol; print the paper-style table.

    One feature store per (model, dataset), one results JSON per cell, the table in OUT/table.md and
    OUT/table.json with the paper's numbers beside ours. Rerunning the same command finishes only what is
    missing. A failing cell is named in the table and the exit code is 1. Under torchrun
    (`torchrun ... -m plstitch_eval benchmark ...`) each store's extraction is sharded over the ranks.
    """
    from plstitch_eval.benchmark import BenchmarkConfig, run_benchmark
    from plstitch_eval.extract import ExtractOptions
    from plstitch_eval.knn import KnnConfig
    from plstitch_eval.linear import LinearConfig
    from plstitch_eval.temporal.fit import TemporalConfig
    from plstitch_eval.utils.console import console, print_error, result_console
    from plstitch_eval.utils.device import resolve_device
    from plstitch_eval.utils.io import write_json_output

    resolved = str(resolve_device(device))
    linear_defaults = LinearConfig()
    config = BenchmarkConfig(
        models=models,
        datasets=datasets,
        out=out,
        protocols=protocols,
        metrics=metrics,
        extract=ExtractOptions(
            fps=fps,
            batch_size=batch_size,
            num_workers=num_workers,
            device=device,
            precision=precision,
            crop_black_margin=crop_black_margin,
            decoder=decoder,
            decode_device=decode_device,
        ),
        knn=KnnConfig(k=k, temperature=temperature, weighting=weighting, device=resolved),
        linear=LinearConfig(
            lrs=tuple(lr) if lr else linear_defaults.lrs,
            weight_decays=tuple(wd) if wd else linear_defaults.weight_decays,
            optimizer=optimizer,
            epochs=epochs,
            select_metric=select_metric,
            seed=seed,
            device=resolved,
        ),
        temporal=TemporalConfig(
            **({"epochs": temporal_epochs} if temporal_epochs is not None else {}),
            causal=causal,
            seed=seed,
            device=resolved,
        ),
        cv_folds=folds,
        cv_protocol=cv_protocol,
        cv_seed=seed,
        overwrite=overwrite,
        trust_pickle=trust_pickle,
    )
    try:
        result = run_benchmark(config)
    except KeyboardInterrupt:
        print_error(
            f"{out} holds every cell finished so far; rerun the same command to finish the rest.",
            label="interrupted",
            style="yellow",
        )
        raise typer.Exit(code=130) from None
    if result.table is None:  # a torchrun rank other than 0: it extracted its share, rank 0 reports
        raise typer.Exit(code=0)
    to_stdout = json_path is not None and str(json_path) == "-"
    (console if to_stdout else result_console(soft_wrap=True)).print(result.markdown, highlight=False)
    if json_path is not None:
        write_json_output(json_path, result.table)
    console.print(f"table: {result.table_md}, {result.table_json}", highlight=False)
    if not result.ok:
        names = ", ".join(cell.name for cell in result.failed[:3]) + (
            " ..." if len(result.failed) > 3 else ""
        )
        print_error(
            f"{len(result.failed)} of {len(result.cells)} cell(s) failed ({names}); the table names each "
            "error. Fix them and rerun the same command to finish only those."
        )
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Add `benchmark` to the top-level app."""
    app.command("benchmark")(benchmark)

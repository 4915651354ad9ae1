"""CLI command `benchmark`: models x datasets x protocols in one resumable run, then the paper-style table.

Library imports sit inside the commands, for start-up time (`plstitch_eval/commands/__init__.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import (
    BenchmarkSetOpt,
    CausalOpt,
    CropMarginOpt,
    DecodeDeviceOpt,
    DecoderOpt,
    EncodeBatchOpt,
    EncodeDeviceOpt,
    FpsOpt,
    KnnKOpt,
    LrGridOpt,
    NumWorkersOpt,
    OptimizerOpt,
    PrecisionOpt,
    SelectMetricOpt,
    TemperatureOpt,
    TrustPickleOpt,
    WdGridOpt,
    WeightingOpt,
    encode_settings,
    given,
)
from plstitch_eval.commands.probe_configs import knn_config, linear_config, temporal_config


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
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="A .toml/.yaml file of [protocols.NAME] tables: any protocol's settings, e.g. "
            "[protocols.knn] k = 10 (docs/benchmark.md).",
            dir_okay=False,
        ),
    ] = None,
    set_items: BenchmarkSetOpt = None,
    k: KnnKOpt = None,
    temperature: TemperatureOpt = None,
    weighting: WeightingOpt = None,
    lr: LrGridOpt = None,
    wd: WdGridOpt = None,
    optimizer: OptimizerOpt = None,
    epochs: Annotated[int | None, typer.Option(help="Linear-probe epochs (default 20).")] = None,
    select_metric: SelectMetricOpt = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed of the linear probe, the MS-TCN and the CV folds (default 0).")
    ] = None,
    folds: Annotated[int, typer.Option(help="cv: number of folds (split by video).")] = 5,
    cv_protocol: Annotated[str, typer.Option("--cv-protocol", help="cv: knn, linear or temporal.")] = "knn",
    temporal_epochs: Annotated[
        int | None, typer.Option("--temporal-epochs", help="temporal: MS-TCN epochs (default 50).")
    ] = None,
    causal: CausalOpt = False,
    fps: FpsOpt = None,
    batch_size: EncodeBatchOpt = None,
    num_workers: NumWorkersOpt = None,
    device: EncodeDeviceOpt = None,
    crop_black_margin: CropMarginOpt = False,
    decoder: DecoderOpt = None,
    decode_device: DecodeDeviceOpt = None,
    precision: PrecisionOpt = None,
    trust_pickle: TrustPickleOpt = False,
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
    from plstitch_eval.benchmark.config import BenchmarkConfig
    from plstitch_eval.benchmark.config_file import read_config_file
    from plstitch_eval.benchmark.runner import run_benchmark
    from plstitch_eval.extract import ExtractOptions
    from plstitch_eval.protocols.settings import (
        merge_tables,
        parse_set_items,
        section_configs,
        table_device,
        unsectioned_tables,
    )
    from plstitch_eval.utils.console import console, print_error, result_console
    from plstitch_eval.utils.device import resolve_device
    from plstitch_eval.utils.io import write_json_output

    file_tables = read_config_file(config_file) if config_file is not None else {}
    tables = merge_tables(file_tables, parse_set_items(set_items or []))
    bases = section_configs(tables)  # knn, linear, temporal from the file and --set; the flags go over them
    devices = {s: str(resolve_device(table_device(tables, s, device))) for s in bases}
    config = BenchmarkConfig(
        models=models,
        datasets=datasets,
        out=out,
        protocols=protocols,
        metrics=metrics,
        extract=ExtractOptions(
            **encode_settings(
                batch_size=batch_size,
                num_workers=num_workers,
                device=device,
                precision=precision,
                decoder=decoder,
                decode_device=decode_device,
            ),
            **given(fps=fps),
            crop_black_margin=crop_black_margin,
        ),
        knn=knn_config(k, temperature, weighting, device=devices["knn"], base=bases["knn"]),
        linear=linear_config(
            lr,
            wd,
            optimizer,
            epochs,
            select_metric=select_metric,
            seed=seed,
            device=devices["linear"],
            base=bases["linear"],
        ),
        temporal=temporal_config(
            bases["temporal"],
            epochs=temporal_epochs,
            causal=causal or None,
            seed=seed,
            device=devices["temporal"],
        ),
        protocol_configs=unsectioned_tables(tables),
        cv_folds=folds,
        cv_protocol=cv_protocol,
        **given(cv_seed=seed),
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

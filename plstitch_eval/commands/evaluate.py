"""CLI commands knn, linear, cv, score, table: parse options, call protocols, print/save results.

Library imports sit inside the commands: `plstitch --help` imports every command module, and the protocols
with their results and tables load scoring and the dataset adapters, seconds of start-up (measured 13 s
against 0.5 s for `import plstitch_eval.cli` on a loaded 2-core box).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import (
    AnticipateOpt,
    CausalOpt,
    CvSetOpt,
    DeviceOpt,
    ElapsedOpt,
    FeaturesOpt,
    FractionSeedsOpt,
    HorizonOpt,
    JsonOpt,
    KnnKOpt,
    LrGridOpt,
    OptimizerOpt,
    OverwriteProbeOpt,
    RelaxedOpt,
    SaveProbeOpt,
    SchemeOpt,
    SelectMetricOpt,
    TaskOpt,
    TemperatureOpt,
    TrainFractionOpt,
    ValFractionOpt,
    WdGridOpt,
    WeightingOpt,
    out_opt,
)
from plstitch_eval.commands.probe_configs import knn_config, linear_config, temporal_config
from plstitch_eval.commands.skill_runs import skill_cv, skill_run
from plstitch_eval.commands.task_options import (
    cv_protocol,
    fold_count,
    multilabel_cv,
    refuse_for_regression,
    refuse_for_video_task,
    task_settings,
    video_task,
)
from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import is_quiet

_knn_config, _linear_config = knn_config, linear_config  # their names before commands/probe_configs.py
SkillScoreOpt = Annotated[
    str | None, typer.Option("--skill-score", help="--task skill: the score regressed (default grs, GRS).")
]
CvFoldsOpt = Annotated[
    str,
    typer.Option(
        help="Number of folds (split by video); --task skill also loso or louo (JIGSAWS); --task tools, "
        "triplets or cvs also official (the store's crossval-* split schemes, e.g. CholecT45's 5 folds)."
    ),
]
TableOutOpt = out_opt("Also write the table to this file.", kind=Path | None, short=False, file=True)


def knn(
    features: FeaturesOpt,
    k: Annotated[
        list[int] | None, typer.Option("--k", help="Neighbours (default 20); repeat for several k.")
    ] = None,
    temperature: TemperatureOpt = None,
    weighting: WeightingOpt = None,
    train_on: Annotated[
        list[str] | None, typer.Option("--train-on", help="Splits of the memory bank (default train).")
    ] = None,
    split_scheme: SchemeOpt = None,
    device: DeviceOpt = "auto",
    chunk_size: Annotated[int | None, typer.Option(help="Queries per search chunk (default 4096).")] = None,
    threads: Annotated[int | None, typer.Option(help="FAISS threads (default: all cores).")] = None,
    relaxed: RelaxedOpt = False,
    train_fraction: TrainFractionOpt = None,
    fraction_seeds: FractionSeedsOpt = None,
    task: TaskOpt = "phases",
    horizon: HorizonOpt = None,
    anticipate: AnticipateOpt = None,
    json_path: JsonOpt = None,
) -> None:
    """Weighted k-NN on frozen features (DINO protocol): train split votes, test split is scored."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols import run_knn
    from plstitch_eval.protocols.fractions import fraction_config, fraction_title

    config = knn_config(k[0] if k else None, temperature, weighting, device, chunk_size, threads)
    fraction = fraction_config(train_fraction, fraction_seeds)
    settings = task_settings(task, "knn", horizon, anticipate, False)
    if settings is not None:
        refuse_for_regression(task, {"relaxed": relaxed, "train-on": bool(train_on), "k": len(k or []) > 1})
        return _regression_run(features, task, "knn", settings, config, split_scheme, fraction, json_path)
    train_on = train_on or ["train"]
    k = k or [config.k]
    options = {"scheme": split_scheme, "train_on": train_on, "relaxed": relaxed, "train_fraction": fraction}
    results = run_knn(features, config, extra_ks=k[1:], **options)
    ks = results["protocol"]["ks"]  # the k used: a k above the training frames is clamped (and warned)
    setting = f"k={ks[0]}, " if len(ks) == 1 else ""
    title = f"k-NN ({setting}{config.weighting}{fraction_title(fraction, results)}) on {features}"
    print_and_write_results(results, json_path, title)


def linear(
    features: FeaturesOpt,
    lr: LrGridOpt = None,
    wd: WdGridOpt = None,
    optimizer: OptimizerOpt = None,
    epochs: Annotated[int | None, typer.Option(help="Passes over the training frames (default 20).")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Frames per step (default 1024).")] = None,
    standardize: Annotated[
        bool | None, typer.Option(help="Standardise features with train statistics (default on).")
    ] = None,
    balance: Annotated[
        bool | None, typer.Option(help="Class-balanced (inverse frequency) cross-entropy (default off).")
    ] = None,
    select_metric: SelectMetricOpt = None,
    task: TaskOpt = "phases",
    val_fraction: ValFractionOpt = 0.2,
    seed: Annotated[
        int | None, typer.Option(help="Seed of init, shuffling and hold-out (default 0).")
    ] = None,
    split_scheme: SchemeOpt = None,
    device: DeviceOpt = "auto",
    relaxed: RelaxedOpt = False,
    train_fraction: TrainFractionOpt = None,
    fraction_seeds: FractionSeedsOpt = None,
    horizon: HorizonOpt = None,
    anticipate: AnticipateOpt = None,
    elapsed: ElapsedOpt = False,
    json_path: JsonOpt = None,
    save: SaveProbeOpt = None,
    overwrite: OverwriteProbeOpt = False,
    skill_score: SkillScoreOpt = None,
) -> None:
    """Linear probe: a grid of heads trained in one pass, best on validation, reported on test."""
    from plstitch_eval.protocols.fractions import fraction_config

    fraction = fraction_config(train_fraction, fraction_seeds)
    if video_task(task, skill_score):  # skill: a ridge on each video's mean-pooled features
        used = {"lr": bool(lr), "wd": bool(wd), "relaxed": relaxed, "save": save is not None}
        refuse_for_video_task(task, used | {"horizon": horizon is not None})
        return skill_run(features, skill_score, split_scheme, None, None, json_path, fraction)
    settings = task_settings(task, "linear", horizon, anticipate, elapsed)
    if settings is not None:
        refuse_for_regression(
            task,
            {"relaxed": relaxed, "select-metric": select_metric is not None, "balance": balance is not None},
        )
        config = linear_config(
            lr, wd, optimizer, epochs, batch_size, standardize, balance, None, seed, device
        )
        return _regression_run(
            features, task, "linear", settings, config, split_scheme, fraction, json_path, val_fraction,
            save, overwrite,
        )  # fmt: skip
    run = _phase_linear if task == "phases" else partial(_multilabel_linear, task)  # multi-label: tools, ...
    run(
        features, lr, wd, optimizer, epochs, batch_size, standardize, balance, select_metric, seed,
        device, split_scheme, val_fraction, relaxed, json_path, save, overwrite, fraction,
    )  # fmt: skip


def _phase_linear(
    features, lr, wd, optimizer, epochs, batch_size, standardize, balance, select_metric, seed, device,
    split_scheme, val_fraction, relaxed, json_path, save, overwrite, fraction,
) -> None:  # fmt: skip
    """`linear --task phases`: the phase probe (the `linear` protocol); `--save` keeps its chosen head."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.probes import check_probe_target, save_linear_probe
    from plstitch_eval.protocols import fit_linear_protocol, run_linear
    from plstitch_eval.protocols.fractions import fraction_title, refuse_save
    from plstitch_eval.utils.console import console

    if save is not None:
        refuse_save(fraction, "probe")
        check_probe_target(save, overwrite)  # refuse before training, not after
    config = linear_config(
        lr, wd, optimizer, epochs, batch_size, standardize, balance, select_metric, seed, device
    )
    options = {"scheme": split_scheme, "val_fraction": val_fraction, "relaxed": relaxed, "progress": True}
    # the grid's bar on stderr (plain lines off a terminal; -q mutes it)
    if fraction is None or fraction.full:
        results, fitted = fit_linear_protocol(features, config, **options)
    else:
        results, fitted = run_linear(features, config, **options, train_fraction=fraction), None
    proto = results["protocol"]
    chosen = f"lr={proto['chosen_lr']:g}, wd={proto['chosen_weight_decay']:g}"
    chosen += fraction_title(fraction, results)
    title = f"linear ({chosen})"
    print_and_write_results(results, json_path, title)
    if save is not None:
        save_linear_probe(save, features, results, fitted, overwrite=overwrite)
        console.print(f"probe saved to {save}", highlight=False, soft_wrap=True)


def cv(
    features: FeaturesOpt,
    folds: CvFoldsOpt = "5",
    protocol: Annotated[
        str, typer.Option(help="knn, linear or temporal (MS-TCN, defaults as `plstitch temporal`).")
    ] = "knn",
    k: KnnKOpt = None,
    temperature: TemperatureOpt = None,
    weighting: WeightingOpt = None,
    epochs: Annotated[
        int | None,
        typer.Option(help="Training epochs of the linear probe (default 20) or the temporal model (50)."),
    ] = None,
    causal: CausalOpt = False,
    seed: Annotated[
        int | None,
        typer.Option(
            help="Seed of the fold assignment (default 0) and of the probe (default: --set seed=S, else 0)."
        ),
    ] = None,
    device: Annotated[str | None, typer.Option("--device", help="auto (default), cpu or cuda[:N].")] = None,
    relaxed: RelaxedOpt = False,
    json_path: JsonOpt = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="A .toml/.yaml file of [protocols.NAME] tables (as benchmark --config); the table of "
            "--protocol is read, under --set.",
            dir_okay=False,
        ),
    ] = None,
    set_items: CvSetOpt = None,
    train_fraction: TrainFractionOpt = None,
    fraction_seeds: FractionSeedsOpt = None,
    task: TaskOpt = "phases",
    horizon: HorizonOpt = None,
    anticipate: AnticipateOpt = None,
    elapsed: ElapsedOpt = False,
    skill_score: SkillScoreOpt = None,
) -> None:
    """k-fold cross-validation by video; prints mean ± std over folds."""
    from plstitch_eval.benchmark.config_file import read_config_file
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols import run_cv
    from plstitch_eval.protocols.fractions import fraction_config, fraction_title
    from plstitch_eval.protocols.settings import cv_config, merge_tables, parse_set_items, section_configs

    if video_task(task, skill_score):
        fraction = fraction_config(train_fraction, fraction_seeds)
        return skill_cv(features, skill_score, protocol, folds, seed or 0, json_path, relaxed, fraction)
    file_tables = read_config_file(config_file) if config_file is not None else {}
    own_table = {protocol: file_tables[protocol]} if protocol in file_tables else {}
    tables = merge_tables(own_table, parse_set_items(set_items or [], protocol=protocol))
    bases = section_configs(tables)  # --set's fields; the flags given go over them
    fold_seed, folds = 0 if seed is None else seed, fold_count(folds, task)
    configs = cv_head_configs(tables, bases, k, temperature, weighting, epochs, causal, seed, device)
    fraction = fraction_config(train_fraction, fraction_seeds)
    settings = task_settings(task, cv_protocol(task, protocol), horizon, anticipate, elapsed)
    if settings is not None:
        refuse_for_regression(task, {"relaxed": relaxed, "train-fraction": fraction is not None})
        return regression_cv(features, task, settings, protocol, configs, folds, fold_seed, json_path)
    if task != "phases":  # tools, triplets, cvs: the multi-label cv (commands/task_options.py)
        return multilabel_cv(
            features, task, protocol, configs, tables, folds, fold_seed, fraction, relaxed, json_path
        )
    results = run_cv(
        features, folds, protocol, configs["knn"], configs["linear"], seed=fold_seed, relaxed=relaxed,
        temporal_config=configs["temporal"], progress=not is_quiet(),
        config=cv_config(protocol, tables, fold_seed), train_fraction=fraction,
    )  # fmt: skip
    print_and_write_results(
        results, json_path, f"{folds}-fold CV by video ({protocol}{fraction_title(fraction, results)})"
    )


def cv_head_configs(tables, bases, k, temperature, weighting, epochs, causal, seed, device) -> dict:  # noqa: ANN001
    """The knn, linear and temporal configs of `cv`: --set's fields (`bases`), then the flags given."""
    from plstitch_eval.protocols.settings import table_device

    return {
        "knn": knn_config(k, temperature, weighting, table_device(tables, "knn", device), base=bases["knn"]),
        "linear": linear_config(
            epochs=epochs, seed=seed, device=table_device(tables, "linear", device), base=bases["linear"]
        ),
        "temporal": temporal_config(
            bases["temporal"],
            epochs=epochs,
            causal=causal or None,
            seed=seed,
            device=table_device(tables, "temporal", device),
        ),
    }


def regression_cv(features, task, settings, protocol, configs, folds, seed, json_path) -> None:  # noqa: ANN001
    """`cv --task anticipation|rsd`: --protocol's head cross-validated on the task, beside its references."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols.regression_cv import run_regression_cv

    if protocol not in configs:
        raise ConfigError(f"--protocol {protocol} has no regression head; use knn, linear or temporal.")
    results = run_regression_cv(
        features, task, settings, protocol, configs[protocol], folds, seed, progress=not is_quiet()
    )
    print_and_write_results(results, json_path, f"{folds}-fold CV by video ({task}, {protocol}; minutes)")


def score(
    pred: Annotated[Path, typer.Option("--pred", help="Folder of MS-TCN-format prediction files.")],
    gt: Annotated[Path, typer.Option("--gt", help="Folder of ground-truth label files.")],
    bg: Annotated[
        list[str] | None,
        typer.Option("--bg", help="Background classes dropped from segment metrics (default background)."),
    ] = None,
    mapping: Annotated[Path | None, typer.Option(help="mapping.txt ('<id> <name>' per line).")] = None,
    dataset: Annotated[str | None, typer.Option(help="Dataset name recorded in the JSON.")] = None,
    relaxed: RelaxedOpt = False,
    fps: Annotated[
        float | None,
        typer.Option(
            "--fps", help="Frame rate of the label files; --relaxed turns 10 s into frames with it."
        ),
    ] = None,
    json_path: JsonOpt = None,
) -> None:
    """Score action-segmentation predictions with MS-TCN semantics (accuracy, Edit, F1@10/25/50)."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols.prediction_files import score_files

    bg = ["background"] if bg is None else bg
    results = score_files(pred, gt, bg_classes=bg, mapping=mapping, dataset=dataset, relaxed=relaxed, fps=fps)
    print_and_write_results(results, json_path, f"{pred} vs {gt}")


def table(
    results: Annotated[list[Path], typer.Argument(help="Results JSON files.")],
    fmt: Annotated[str, typer.Option("--format", help="markdown, latex or rich.")] = "rich",
    metric: Annotated[
        list[str] | None, typer.Option("--metric", help="Metrics to show (default: per dataset).")
    ] = None,
    out: TableOutOpt = None,
) -> None:
    """Paper-style table: rows = models, columns = dataset / protocol / metric."""
    from plstitch_eval.tables import build_table, load_results, to_latex, to_markdown, to_rich
    from plstitch_eval.utils.console import result_console
    from plstitch_eval.utils.io import write_text_atomic

    built = build_table(load_results(results), metric or None)
    if fmt == "rich":
        result_console().print(to_rich(built))
        text = to_markdown(built)
    elif fmt in ("markdown", "md"):
        text = to_markdown(built)
        typer.echo(text, nl=False)
    elif fmt in ("latex", "tex"):
        text = to_latex(built)
        typer.echo(text, nl=False)
    else:
        raise ConfigError(f"--format must be markdown, latex or rich, got {fmt!r}.")
    if out is not None:
        write_text_atomic(out, text)


def _multilabel_linear(
    task, features, lr, wd, optimizer, epochs, batch_size, standardize, balance, select_metric, seed, device,
    split_scheme, val_fraction, relaxed, json_path, save, overwrite, fraction,
) -> None:  # fmt: skip
    """`linear --task tools|triplets|cvs`: the multi-label probe (balanced unless --no-balance), chosen on the
    task's validation metric (mAP; mAP_IVT); `--save` keeps its chosen head (labels present per frame)."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.probes import check_probe_target
    from plstitch_eval.protocols.fractions import fraction_title, refuse_save
    from plstitch_eval.protocols.multilabel import fit_multilabel_linear, run_multilabel_linear
    from plstitch_eval.protocols.multilabel_probe import save_multilabel_probe
    from plstitch_eval.tasks import get_task
    from plstitch_eval.utils.console import console

    chosen_task = get_task(task)
    refused = {"relaxed": relaxed, "select-metric": select_metric is not None}
    named = [f"--{option}" for option, used in refused.items() if used]
    if named:
        raise ConfigError(
            f"{', '.join(named)}: only with --task phases (the {task} probe is chosen on validation "
            f"{chosen_task.select_metric}); drop {'them' if len(named) > 1 else 'it'}."
        )
    if save is not None:
        refuse_save(fraction, "probe")
        check_probe_target(save, overwrite)  # refuse before training, not after
    balance = True if balance is None else balance
    config = linear_config(lr, wd, optimizer, epochs, batch_size, standardize, balance, None, seed, device)
    options = {"scheme": split_scheme, "val_fraction": val_fraction, "progress": True}
    if fraction is None or fraction.full:
        results, fitted = fit_multilabel_linear(chosen_task, features, config, **options)
    else:
        results, fitted = (
            run_multilabel_linear(chosen_task, features, config, **options, train_fraction=fraction),
            None,
        )
    proto = results["protocol"]
    chosen = f"lr={proto['chosen_lr']:g}, wd={proto['chosen_weight_decay']:g}"
    chosen += fraction_title(fraction, results)
    title = f"{MULTILABEL_TITLES.get(task, task)} (linear, {chosen})"
    print_and_write_results(results, json_path, title)
    if save is not None:
        save_multilabel_probe(save, chosen_task, features, results, fitted, overwrite=overwrite)
        console.print(f"probe saved to {save}", highlight=False, soft_wrap=True)


MULTILABEL_TITLES = {
    "tools": "tool presence",
    "triplets": "action triplets",
    "cvs": "critical view of safety",
}


def _regression_run(
    features, task, protocol, settings, config, scheme, fraction, json_path, val_fraction=0.2, save=None,
    overwrite=False,
) -> None:  # fmt: skip
    """`knn` / `linear --task anticipation|rsd`: the regression head, its metrics beside the references;
    `--save` keeps the linear head as a probe that gives minutes."""
    from plstitch_eval.commands.results import print_and_write_results
    from plstitch_eval.protocols.fractions import fraction_title
    from plstitch_eval.protocols.regression import run_knn_regression

    if protocol == "knn":
        results = run_knn_regression(features, task, settings, config, scheme, fraction)
        chosen = f"k={results['protocol'].get('k_used', config.k)}"
    else:
        results = fit_and_save(
            "linear", features, task, settings, config, scheme, val_fraction, fraction, save, overwrite
        )
        proto = results["protocol"]
        chosen = (
            f"lr={proto['chosen_lr']:g}, wd={proto['chosen_weight_decay']:g}" if "chosen_lr" in proto else ""
        )
    horizon = f", horizon {settings.horizon_min:g} min" if task == "anticipation" else ""
    setting = (
        ", ".join(part for part in (protocol, chosen) if part) + horizon + fraction_title(fraction, results)
    )
    title = f"{task} ({setting}; minutes)"
    print_and_write_results(results, json_path, title)
    if save is not None:
        from plstitch_eval.utils.console import console

        console.print(f"probe saved to {save}", highlight=False, soft_wrap=True)


def fit_and_save(
    head, features, task, settings, config, scheme, val_fraction, fraction, save=None, overwrite=False
) -> dict:  # fmt: skip
    """A linear / temporal regression head's results; with `save`, the fitted head saved as a probe (the
    target checked before training)."""
    from plstitch_eval.probes import check_probe_target
    from plstitch_eval.protocols.fractions import refuse_save
    from plstitch_eval.protocols.regression import fit_validated, run_validated
    from plstitch_eval.protocols.regression_probe import save_regression_probe
    from plstitch_eval.utils.console import is_quiet

    progress = not is_quiet()
    if save is None:
        return run_validated(head, features, task, settings, config, scheme, val_fraction, progress, fraction)
    refuse_save(fraction, "probe")
    check_probe_target(save, overwrite)  # refuse before training, not after
    results, fitted, data = fit_validated(
        head, features, task, settings, config, scheme, val_fraction, progress
    )
    save_regression_probe(save, features, results, fitted, data, overwrite)
    return results


def protocols(json_path: JsonOpt = None) -> None:
    """List the evaluation protocols: where each runs, its config's settings and their defaults.

    Those settings are what `benchmark --set NAME.FIELD=VALUE`, `benchmark --config FILE`'s
    [protocols.NAME] tables and `cv --set FIELD=VALUE` set.
    """
    from rich.text import Text

    from plstitch_eval.protocols.settings import describe_protocols
    from plstitch_eval.utils.console import result_console
    from plstitch_eval.utils.io import write_json_output

    rows = describe_protocols()
    if json_path is not None:
        write_json_output(json_path, {"protocols": rows})
        if str(json_path) == "-":
            return
    out = result_console(soft_wrap=True)
    out.print(Text("Evaluation protocols", style="bold"))
    for row in rows:
        runs = [where for where, ok in (("benchmark", row["benchmark"]), ("cv", row["cv"])) if ok]
        if row["probe_kind"]:
            runs.append(f"--save ({row['probe_kind']} probe)")
        out.print()
        where = ", ".join(runs) or "a reference row (quickstart, reproduce)"
        out.print(Text(f"{row['name']}  ({row['label']}; runs in: {where}; from {row['package']})"))
        for setting in row["settings"]:
            note = "  (speed only)" if setting["runtime"] else ""
            if setting.get("choices"):
                note += f"  (one of {', '.join(setting['choices'])})"
            out.print(Text(f"  {row['name']}.{setting['name']} = {setting['default']!r}{note}", style="dim"))
        if row["shares_settings_of"]:
            out.print(Text(f"  the settings of {row['shares_settings_of']} (one config)", style="dim"))
        elif not row["settings"]:
            out.print(Text("  no settings of its own", style="dim"))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("protocols")(protocols)
    app.command("knn")(knn)
    app.command("linear")(linear)
    app.command("cv")(cv)
    app.command("score")(score)
    app.command("table")(table)

"""CLI command `train`: parse options into a `TrainConfig`, hand it to `plstitch_train.launch`, print JSON.

Every setting has a flag or `--set NAME=VALUE` (a flat name as `base_lr`, or `optim.base_lr`).

What a rerun, `--resume` or `--overwrite` does is decided in `plstitch_train.launch`; SIGINT/SIGTERM print
where the checkpoint is and how to resume (docs/training.md).

Library imports sit inside the commands, for start-up time (`plstitch_eval/commands/__init__.py`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from plstitch_eval.commands.options import (
    JsonOpt,
    TrainDecoderOpt,
    dataset_opt,
    device_opt,
    out_opt,
    root_opt,
    split_opt,
)
from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import console, print_error
from plstitch_train.config import LOSS_KEYS, RunConfig
from plstitch_train.presets import OBJECTIVES, PRESETS

if TYPE_CHECKING:
    from plstitch_train.trainer import TrainResult

_RUN = RunConfig()  # defaults of the run section, quoted in the help texts
_PRESET_HELP = "Preset: " + ", ".join(PRESETS) + "."
_OBJECTIVE_HELP = "Ranking objective: " + ", ".join(OBJECTIVES) + "."
_SET_HELP = (
    "Any training setting, repeatable: NAME=VALUE with a setting's name (base_lr) or section.name "
    "(optim.base_lr); VALUE is read as JSON when it parses (6, 0.5, true, null, [1, 2], {...}), else as text."
)
_INIT_HELP = (
    "Start from a released PL-Stitch checkpoint (pl-stitch-lemon, a pl_*.pth: backbones, iBOT heads, temporal"
    " and jigsaw heads) or from any other encoder spec (backbone only)."
)


def train(
    data: Annotated[
        Path | None,
        typer.Option("--data", help="Folder of videos or frame folders, or a frames LMDB (authors' layout)."),
    ] = None,
    dataset: dataset_opt("Dataset adapter name.", kind=str | None) = None,
    root: root_opt("Dataset folder.") = None,
    split: split_opt("Dataset split to train on.") = None,
    preset: Annotated[str, typer.Option("--preset", help=_PRESET_HELP)] = "paper-vitb16",
    config_file: Annotated[
        Path | None, typer.Option("--config", help="Start from a train_config.json instead of --preset.")
    ] = None,
    init: Annotated[str | None, typer.Option("--init", help=_INIT_HELP)] = None,
    out: out_opt("Run folder.", kind=Path | None) = None,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Run folder or last.ckpt to resume with its saved settings."),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace the run in --out (its last.ckpt, log.jsonl, backbone/, train_config.json; the "
            "frame cache and other files stay) once the new settings have built a run.",
        ),
    ] = False,
    epochs: Annotated[int | None, typer.Option("--epochs", help="Training epochs.")] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="Cap on optimizer steps.")] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", help="Global batch size.")] = None,
    accum_steps: Annotated[int | None, typer.Option("--accum-steps", help="Gradient accumulation.")] = None,
    lr: Annotated[float | None, typer.Option("--lr", help="Base lr (scaled by batch/256).")] = None,
    objective: Annotated[str | None, typer.Option("--objective", help=_OBJECTIVE_HELP)] = None,
    clip_len: Annotated[int | None, typer.Option("--clip-len", help="Frames per clip (k).")] = None,
    lambda_vid: Annotated[
        float | None, typer.Option("--lambda-vid", help="Weight of L_vid (0 = off).")
    ] = None,
    lambda_mim: Annotated[
        float | None, typer.Option("--lambda-mim", help="Weight of L_MIM (0 = off).")
    ] = None,
    lambda_jigsaw: Annotated[
        float | None, typer.Option("--lambda-jigsaw", help="Weight of L_jigsaw (0 = off).")
    ] = None,
    reverse_time: Annotated[
        bool, typer.Option("--reverse-time", help="Train on time-reversed videos.")
    ] = False,
    fps: Annotated[
        float | None,
        typer.Option(
            "--fps",
            help="Frames per second trained on (default: the preset's; a frames LMDB: its own rate).",
        ),
    ] = None,
    context_seconds: Annotated[
        tuple[float, float] | None,
        typer.Option("--context-seconds", help="Past/future context offset range MIN MAX (seconds)."),
    ] = None,
    device: device_opt(kind=str | None) = None,
    precision: Annotated[str | None, typer.Option("--precision", help="auto, fp32, bf16 or fp16.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed.")] = None,
    num_workers: Annotated[
        int | None, typer.Option("--num-workers", "-j", help="DataLoader workers (decode the videos).")
    ] = None,
    checkpoint_every: Annotated[
        int | None, typer.Option("--checkpoint-every", help="Write last.ckpt every N steps.")
    ] = None,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help="Decoded-frame cache folder.")] = None,
    frame_store: Annotated[
        str | None,
        typer.Option("--frame-store", help="Decoded frames as lmdb (JPEG, default) or raw (uint8 arrays)."),
    ] = None,
    decoder: TrainDecoderOpt = None,
    compile_modules: Annotated[
        bool,
        typer.Option(
            "--compile",
            help="torch.compile the student and teacher (fused kernels on a GPU; the first steps compile).",
        ),
    ] = False,
    collapse_every: Annotated[
        int | None,
        typer.Option(
            "--collapse-every",
            help="Measure the iBOT teacher's collapse every N steps on a fixed probe batch (0 = never; "
            "default 50; only with L_MIM).",
        ),
    ] = None,
    stop_on_collapse: Annotated[
        bool,
        typer.Option(
            "--stop-on-collapse",
            help="End the run with its checkpoint saved once the collapse monitor warns (exit code 3).",
        ),
    ] = False,
    eval_every: Annotated[
        int | None,
        typer.Option(
            "--eval-every",
            help="Every N steps and at the last, the teacher's k-NN accuracy (plstitch knn's protocol) on "
            f"--eval-dataset, logged as knn_acc (0 = never; default {_RUN.eval_every}).",
        ),
    ] = None,
    eval_dataset: Annotated[
        str | None,
        typer.Option(
            "--eval-dataset",
            help="Dataset adapter of the k-NN evaluation (plstitch datasets; synthetic needs no root): its "
            "train split votes for the query split.",
        ),
    ] = None,
    eval_root: Annotated[Path | None, typer.Option("--eval-root", help="Folder of --eval-dataset.")] = None,
    eval_split: Annotated[
        str | None,
        typer.Option(
            "--eval-split",
            help="Query split of the k-NN evaluation: val or test (default: val if the dataset has one, "
            "else test). Recorded only: weights are never chosen by it.",
        ),
    ] = None,
    eval_fps: Annotated[
        float | None,
        typer.Option(
            "--eval-fps",
            help="Frames per second of the k-NN evaluation, as plstitch extract --fps (default "
            f"{_RUN.eval_fps:g}).",
        ),
    ] = None,
    set_values: Annotated[
        list[str] | None, typer.Option("--set", metavar="NAME=VALUE", help=_SET_HELP)
    ] = None,
) -> None:
    """Pretrain PL-Stitch (L_vid + L_MIM + L_jigsaw) on videos; resumable, DDP under torchrun.

    Rerunning the same command resumes the run in --out; a finished run is left as it is (exit 0).

    A run made with other settings is refused: --resume RUN continues it with its saved settings,
    --overwrite starts again. --device, --num-workers, --checkpoint-every, --cache-dir, --compile,
    --collapse-every, --stop-on-collapse and the --eval-* options may change.

    Ctrl-C or SIGTERM: checkpoint after the current step, print the resume command, exit 130 / 143.
    A second Ctrl-C stops at once. --stop-on-collapse: checkpoint, one line, exit 3.
    """
    from plstitch_eval.data.decoders import check_decoder_options
    from plstitch_train.launch import base_config, plan_launch, run_launch
    from plstitch_train.monitors.collapse import CollapseStop
    from plstitch_train.trainer import TrainingInterrupted

    if decoder is not None:
        check_decoder_options(decoder)  # a missing TorchCodec is one line before anything starts

    if context_seconds is not None and None in context_seconds:
        context_seconds = None
    settings = {
        "data": _str(data),
        "dataset": dataset,
        "root": _str(root),
        "split": split,
        "init": init,
        "epochs": epochs,
        "max_steps": steps,
        "batch_size": batch_size,
        "accum_steps": accum_steps,
        "base_lr": lr,
        "objective": objective,
        "clip_len": clip_len,
        "lambda_vid": lambda_vid,
        "lambda_mim": lambda_mim,
        "lambda_jigsaw": lambda_jigsaw,
        "reverse_time": reverse_time or None,
        "fps": fps,
        "context_seconds": context_seconds,
        "precision": precision,
        "seed": seed,
        "device": device,
        "num_workers": num_workers,
        "checkpoint_every": checkpoint_every,
        "cache_dir": _str(cache_dir),
        "frame_store": frame_store,
        "decoder": decoder,
        "compile": compile_modules or None,
        "collapse_every": collapse_every,
        "stop_on_collapse": stop_on_collapse or None,
        "eval_every": eval_every,
        "eval_dataset": eval_dataset,
        "eval_root": _str(eval_root),
        "eval_split": eval_split,
        "eval_fps": eval_fps,
    }
    given = [name for name, value in settings.items() if value is not None]
    overrides = _set_overrides(set_values or [], given)
    config = base_config(preset, config_file).with_changes(**overrides).replace(**settings)
    given += list(overrides)
    launch = plan_launch(config, out, resume=resume, overwrite=overwrite, given=given)
    try:
        result = run_launch(launch)
    except TrainingInterrupted as stop:
        if _is_rank_zero():
            print_error(stop.message(), label="interrupted", style="yellow")
        raise typer.Exit(code=stop.exit_code) from None
    except CollapseStop as stop:
        if _is_rank_zero():
            print_error(stop.message(), label="collapsed", style="yellow")
        raise typer.Exit(code=stop.exit_code) from None
    _print_summary(result)


def _print_summary(result: TrainResult) -> None:
    """Rank 0: a finished run's one-line notice on stderr; the JSON summary on stdout."""
    from plstitch_eval.hub.run_folder import backbone_dir
    from plstitch_train.monitors.knn import read_knn_best

    if result.already_finished and _is_rank_zero():
        console.print(
            f"{result.out_dir} already finished ({result.step} steps; backbone in "
            f"{backbone_dir(result.out_dir)}): nothing to do. Use --overwrite to train it again.",
            highlight=False,
            soft_wrap=True,
        )
    last = result.history[-1] if result.history else {}
    summary = {"out_dir": str(result.out_dir), "step": result.step, "total_steps": result.total_steps}
    summary["final"] = {k: v for k, v in last.items() if k in LOSS_KEYS}
    summary["already_finished"] = result.already_finished
    knn_best = read_knn_best(result.out_dir)
    if knn_best is not None:  # recorded, not used to choose weights (knn_eval.json)
        summary["knn_best"] = knn_best
    if _is_rank_zero():
        typer.echo(json.dumps(summary))


def _is_rank_zero() -> bool:
    """Whether this process prints (under torchrun every rank runs this command)."""
    return int(os.environ.get("RANK", "0")) == 0


def _set_overrides(items: list[str], flags: list[str]) -> dict[str, object]:
    """`--set NAME=VALUE` items as {flat name: value}; a setting given twice is refused."""
    from plstitch_train.config import setting_name

    out: dict[str, object] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE, e.g. --set optim.base_lr=0.001.")
        name = setting_name(key.strip())
        if name in out or name in flags:
            raise ConfigError(f"--set {item!r}: {name} is given twice; give each setting once.")
        try:
            out[name] = json.loads(text)
        except json.JSONDecodeError:
            out[name] = text
    return out


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)


def objectives(json_path: JsonOpt = None) -> None:
    """List the L_vid training objectives (`train --objective`): name, package and what each is."""
    from rich.text import Text

    from plstitch_eval.utils.console import result_console
    from plstitch_eval.utils.io import write_json_output
    from plstitch_train.losses.registry import OBJECTIVE_REGISTRY

    rows = [
        {
            "name": name,
            "package": OBJECTIVE_REGISTRY.package(name),
            "summary": ((cls.__doc__ or "").strip().splitlines() or [""])[0],
        }
        for name, cls in OBJECTIVE_REGISTRY.items()
    ]
    if json_path is not None:
        write_json_output(json_path, {"objectives": rows})
        if str(json_path) == "-":
            return
    out = result_console(soft_wrap=True)
    out.print(Text("Training objectives (train --objective NAME)", style="bold"))
    for row in rows:
        out.print(Text(f"{row['name']}  (from {row['package']}): {row['summary']}"))
    for name, why in OBJECTIVE_REGISTRY.failed.items():
        out.print(Text(f"{name}: did not load ({why})", style="yellow"))


def register(app: typer.Typer) -> None:
    """Add `train` to the top-level app."""
    app.command("train")(train)
    app.command("objectives")(objectives)

"""`plstitch analyze ...`: one command per figure; each writes NAME.png and NAME.json into --out (`run`: into
the run folder unless --out names a PNG)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import (
    DeviceOpt,
    dataset_opt,
    given,
    json_opt,
    out_opt,
    root_opt,
    split_opt,
)
from plstitch_eval.errors import ConfigError

# the defaults in these signatures are the analysis configs' (tests/eval/commands/test_signature_defaults.py
# holds them equal): reading them here would import the analysis modules (matplotlib, timm) at every
# start-up, measured +7 s or more on a 6 to 7 s start-up of `plstitch --help` (2 busy cores)
OutOpt = out_opt("Output folder for NAME.png and NAME.json.")
OrderJsonOpt = json_opt("Write the results as JSON (- = stdout).", kind=str | None)
RunCurvesOutOpt = out_opt(
    "PNG to write (JSON beside it) or a folder; default RUN_DIR/curves.png.",
    kind=Path | None,
    short=False,
    file_or_folder=True,
)
DatasetRootOpt = root_opt("Dataset root folder.", kind=str | None)
SplitOrAllOpt = split_opt("train, val, test or all.", kind=str)
DatasetNameOpt = dataset_opt("Dataset name.", short=False)
EncodeDatasetOpt = dataset_opt("Dataset to decode and encode.", kind=str | None, short=False)
ShowDatasetOpt = dataset_opt("Dataset, to show the frames.", kind=str | None, short=False)
RecordedSplitOpt = split_opt("Recorded split, or all.", kind=str)
SearchSplitOpt = split_opt("Search only this split.")
NameOpt = Annotated[
    str | None, typer.Option("--name", help="File stem of the outputs (default: the command).")
]
# lets `--frames a.jpg b.jpg` and `--pair NAME FWD BWD` pass their extra values as click's leftover args
_EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": False}


def _leftover(args: list[str]) -> list[str]:
    """Extra values after an option (`--frames a.jpg b.jpg`); stray options are errors."""
    bad = [a for a in args if a.startswith("-")]
    if bad:
        raise ConfigError(f"Unknown option(s) {bad}; see --help.")
    return list(args)


def _pairs_from(values: list[str], extra: list[str]) -> list:
    """Model pairs from `--pair NAME=FWD,BWD` values or `--pair NAME FWD BWD` (FWD BWD arrive as extras)."""
    from plstitch_eval.analysis.awareness import ModelPair, parse_pair

    pairs, extra = [], _leftover(extra)
    for value in values:
        if "=" in value:
            pairs.append(parse_pair(value))
        elif len(extra) >= 2:
            pairs.append(ModelPair(value, extra.pop(0), extra.pop(0)))
        else:
            raise ConfigError(f"--pair {value}: expected NAME FORWARD BACKWARD or NAME=FORWARD,BACKWARD.")
    if extra:
        raise ConfigError(f"Unexpected extra arguments {extra}; see --help.")
    return pairs


def _done(png: Path, js: Path, summary: str) -> None:
    """One short summary line and the written paths on stdout."""
    typer.echo(summary)
    typer.echo(f"wrote {png}")
    typer.echo(f"wrote {js}")


def awareness(
    ctx: typer.Context,
    forward: Annotated[
        str | None, typer.Option("--forward", help="Forward-trained encoder (run dir/spec).")
    ] = None,
    backward: Annotated[
        str | None, typer.Option("--backward", help="Time-reversed-trained encoder (run dir/spec).")
    ] = None,
    pair: Annotated[
        list[str] | None,
        typer.Option(
            "--pair", help="Extra pair: NAME FORWARD BACKWARD, or NAME=FORWARD,BACKWARD (repeatable)."
        ),
    ] = None,
    label: Annotated[str, typer.Option("--label", help="Name of the --forward/--backward pair.")] = "model",
    dataset: DatasetNameOpt = "synthetic",
    root: DatasetRootOpt = None,
    split: SplitOrAllOpt = "test",
    fps: Annotated[float | None, typer.Option("--fps", help="Sampling rate (default: dataset's).")] = None,
    max_videos: Annotated[int, typer.Option("--max-videos", help="Videos to use (0 = all).")] = 4,
    max_frames: Annotated[int, typer.Option("--max-frames", help="Frames per video at most (0 = all).")] = 64,
    batch_size: Annotated[int, typer.Option("--batch-size")] = 32,
    device: DeviceOpt = "auto",
    out: OutOpt = Path("figs"),
    name: NameOpt = None,
) -> None:
    """Violin plot of per-frame cosine distances between forward- and backward-trained encoders (Fig. 1b)."""
    from plstitch_eval.analysis.awareness import AwarenessConfig, ModelPair, run_awareness

    pairs = []
    if forward or backward:
        if not (forward and backward):
            raise ConfigError("--forward and --backward go together; give both or use --pair.")
        pairs.append(ModelPair(label, forward, backward))
    pairs += _pairs_from(pair or [], list(ctx.args))
    config = AwarenessConfig(
        pairs=pairs,
        dataset=dataset,
        root=root,
        split=split,
        fps=fps,
        max_videos=max_videos,
        max_frames_per_video=max_frames,
        batch_size=batch_size,
        device=device,
        out=out,
        **given(name=name or None),
    )
    png, js, stats = run_awareness(config)
    summary = "; ".join(
        f"{k}: mean {v['mean']:.4f} median {v['median']:.4f} (n={v['n']})" for k, v in stats.items()
    )
    _done(png, js, f"cosine distance  {summary}")


def progression(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="Model with a temporal head: run/exported folder, PL-Stitch .pth, or e.g. pl-stitch-lemon.",
        ),
    ],
    dataset: EncodeDatasetOpt = None,
    root: DatasetRootOpt = None,
    features: Annotated[
        str | None,
        typer.Option("--features", help="Feature store made with this model's backbone instead."),
    ] = None,
    split: SplitOrAllOpt = "test",
    fps: Annotated[float | None, typer.Option("--fps", help="Sampling rate (default: dataset's).")] = None,
    max_videos: Annotated[int, typer.Option("--max-videos", help="Videos to use (0 = all).")] = 0,
    window: Annotated[int, typer.Option("--window", help="Frames per scored list (0 = whole video).")] = 0,
    stride: Annotated[int, typer.Option("--stride", help="Step between windows, in frames.")] = 1,
    bins: Annotated[int, typer.Option("--bins", help="Bins of the normalised time axis.")] = 100,
    batch_size: Annotated[int, typer.Option("--batch-size")] = 32,
    device: DeviceOpt = "auto",
    out: OutOpt = Path("figs"),
    name: NameOpt = None,
) -> None:
    """Mean +- std progression score of the pretrained temporal head over normalised video time."""
    from plstitch_eval.analysis.progression import ProgressionConfig, run_progression

    if bins < 2:
        raise ConfigError(f"--bins must be >= 2, got {bins}.")
    config = ProgressionConfig(
        model=model,
        dataset=dataset,
        root=root,
        features=features,
        split=None if split == "all" else split,
        fps=fps,
        max_videos=max_videos,
        window=window,
        stride=stride,
        n_bins=bins,
        batch_size=batch_size,
        device=device,
        out=out,
        **given(name=name or None),
    )
    png, js, data = run_progression(config)
    _done(
        png, js, f"{len(data['per_video'])} videos, mean Spearman(progress, time) {data['mean_spearman']:.3f}"
    )


def order(
    model: Annotated[str, typer.Option("--model", help="Model with a temporal head (run folder or spec).")],
    features: Annotated[str, typer.Option("--features", help="Feature store of this model's features.")],
    clip_len: Annotated[int, typer.Option("--clip-len", help="Frames per scored clip (K).")] = 8,
    clips: Annotated[int, typer.Option("--clips", help="Clips per video, spread over it.")] = 16,
    alpha: Annotated[
        float | None,
        typer.Option(
            "--alpha", help="Ridge penalty of the time probe (default: chosen by CV over train videos)."
        ),
    ] = None,
    device: DeviceOpt = "auto",
    json_out: OrderJsonOpt = None,
) -> None:
    """Procedural order measured directly: temporal-head Kendall tau vs time and a linear time probe."""
    from plstitch_eval.analysis.order import model_order_tau
    from plstitch_eval.analysis.time_probe import time_probe
    from plstitch_eval.utils.device import resolve_device
    from plstitch_eval.utils.io import write_json_output

    tau = model_order_tau(model, features, "test", clip_len, clips, resolve_device(device))
    probe = time_probe(features, alpha=alpha)
    if json_out:
        write_json_output(json_out, {"order": tau, "time_probe": probe})
        if json_out == "-":
            return
    typer.echo(
        f"Kendall tau (head vs time)  {tau['tau_mean']:+.3f} +- {tau['tau_std']:.3f} over "
        f"{tau['n_videos']} videos (+1 = frames ranked in the order they happen)"
    )
    typer.echo(f"time probe (ridge, t/T)     R^2 {probe['r2']:.3f}  MAE {probe['mae']:.3f}")


def tsne(
    features: Annotated[str, typer.Option("--features", help="Feature store folder.")],
    perplexity: Annotated[
        list[float] | None, typer.Option("--perplexity", help="t-SNE perplexity (repeat for more panels).")
    ] = None,
    split: RecordedSplitOpt = "test",
    max_points: Annotated[
        int, typer.Option("--max-points", help="Random sample of frames (0 = all).")
    ] = 5000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    threads: Annotated[int, typer.Option("--threads", help="CPU threads for t-SNE/k-means (0 = all).")] = 0,
    out: OutOpt = Path("figs"),
    name: NameOpt = None,
) -> None:
    """t-SNE scatter per perplexity, coloured by phase, k-means ARI/NMI in the titles."""
    from plstitch_eval.analysis.tsne import TsneConfig, run_tsne

    config = TsneConfig(
        features=features,
        **given(perplexities=list(perplexity) if perplexity else None),
        split=split,
        max_points=max_points,
        seed=seed,
        threads=threads,
        out=out,
        **given(name=name or None),
    )
    png, js, data = run_tsne(config)
    c = data["clustering"]
    _done(png, js, f"{data['n_points']} frames, k-means (k={c['k']}) ARI {c['ari']:.2f} NMI {c['nmi']:.2f}")


def timeline(
    features: Annotated[str, typer.Option("--features", help="Feature store the predictions were made on.")],
    pred: Annotated[str, typer.Option("--pred", help="Results JSON with per-frame predictions.")],
    videos: Annotated[
        str | None, typer.Option("--videos", help="Comma-separated names or numbers (e.g. 41,42).")
    ] = None,
    max_videos: Annotated[int, typer.Option("--max-videos", help="Videos when --videos is not given.")] = 4,
    out: OutOpt = Path("figs"),
    name: NameOpt = None,
) -> None:
    """Ground-truth vs. predicted phase ribbons per video."""
    from plstitch_eval.analysis.timeline import TimelineConfig, run_timeline

    wanted = [v.strip() for v in videos.split(",") if v.strip()] if videos else None
    config = TimelineConfig(
        features=features,
        pred=pred,
        videos=wanted,
        max_videos=max_videos,
        out=out,
        **given(name=name or None),
    )
    png, js, data = run_timeline(config)
    acc = ", ".join(f"{v} {d['accuracy']:.1f}%" for v, d in data["per_video"].items())
    _done(png, js, f"accuracy: {acc}")


def attention(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", help="Encoder spec, timm folder or run folder (a ViT).")],
    frames: Annotated[
        list[Path], typer.Option("--frames", help="Image files (repeat, or list after one flag).")
    ],
    alpha: Annotated[float, typer.Option("--alpha", help="Opacity of the attention overlay.")] = 0.6,
    device: DeviceOpt = "cpu",
    out: OutOpt = Path("figs"),
    name: NameOpt = None,
) -> None:
    """Last-block CLS attention per head and averaged, overlaid on each frame."""
    from plstitch_eval.analysis.attention import AttentionConfig, run_attention

    config = AttentionConfig(
        model=model,
        frames=[str(f) for f in frames] + _leftover(ctx.args),
        alpha=alpha,
        device=device,
        out=out,
        **given(name=name or None),
    )
    png, js, data = run_attention(config)
    ent = "; ".join(f"{k}: {v['mean_entropy_bits']:.2f} bits" for k, v in data["frames"].items())
    _done(png, js, f"{data['n_heads']} heads, entropy of mean CLS attention {ent}")


def retrieval(
    features: Annotated[str, typer.Option("--features", help="Feature store folder.")],
    query: Annotated[str, typer.Option("--query", help="VIDEO:SECOND, e.g. video41:120.")],
    top: Annotated[int, typer.Option("--top", help="Neighbours to show.")] = 3,
    split: SearchSplitOpt = None,
    distinct_videos: Annotated[
        bool, typer.Option("--distinct-videos", help="At most one neighbour per video.")
    ] = False,
    dataset: ShowDatasetOpt = None,
    root: DatasetRootOpt = None,
    out: OutOpt = Path("figs"),
    name: NameOpt = None,
) -> None:
    """Nearest frames (cosine) in other videos to a query frame; wrong phases marked."""
    from plstitch_eval.analysis.retrieval import RetrievalConfig, run_retrieval

    config = RetrievalConfig(
        features=features,
        query=query,
        top=top,
        split=split,
        distinct_videos=distinct_videos,
        dataset=dataset,
        root=root,
        out=out,
        **given(name=name or None),
    )
    png, js, data = run_retrieval(config)
    q = data["query"]
    _done(
        png,
        js,
        f"query {q['video']}@{q['time']:.1f}s ({q['class_name']}): "
        f"precision@{top} {data['precision_at_k']:.2f}",
    )


def run(
    run_dir: Annotated[
        Path, typer.Argument(help="Training run folder (the --out of `plstitch train`; holds log.jsonl).")
    ],
    out: RunCurvesOutOpt = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace files at --out that `analyze run` did not write.")
    ] = False,
) -> None:
    """Training curves of a run from its log.jsonl: loss per branch, schedules, collapse measures, k-NN."""
    from plstitch_eval.analysis.run_curves import RunCurvesConfig, run_curves

    png, js, data = run_curves(RunCurvesConfig(run_dir=run_dir, out=out, overwrite=overwrite))
    summary = f"{data['records']} records, steps {data['first_step']}-{data['last_step']}"
    summary += f"; panels: {', '.join(data['panels']) or 'none'}"
    best = data["best_knn"]
    if best is not None:
        summary += f"; best k-NN {best['knn_acc']:.4g} at step {best['step']}"
    _done(png, js, summary)


def register(app: typer.Typer) -> None:
    """Add the `analyze` command group (a sub-app holding this module's commands) to the top-level app."""
    sub = typer.Typer(
        name="analyze",
        help="Figures and analyses: awareness, progression, order, tsne, timeline, attention, retrieval, "
        "run (training curves).",
        no_args_is_help=True,
    )
    sub.command("awareness", context_settings=_EXTRA_ARGS)(awareness)
    sub.command("progression")(progression)
    sub.command("order")(order)
    sub.command("tsne")(tsne)
    sub.command("timeline")(timeline)
    sub.command("attention", context_settings=_EXTRA_ARGS)(attention)
    sub.command("retrieval")(retrieval)
    sub.command("run")(run)
    app.add_typer(sub, name="analyze")

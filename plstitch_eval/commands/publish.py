"""CLI commands `export` (run -> timm folder + card) and `push-to-hub` (a model or probe folder -> Hub repo).

Library imports sit inside the commands, for start-up time (`plstitch_eval/commands/__init__.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import out_opt
from plstitch_eval.utils.console import console

ExportOutOpt = out_opt("Folder to create (timm format + README.md).", replaced=True)
ProbeOutOpt = out_opt(
    "A probe: keep the folder that is uploaded here (a new or empty folder).",
    kind=Path | None,
    short=False,
    replaced=True,
)


def export(
    ctx: typer.Context,
    source: Annotated[
        Path,
        typer.Argument(help="Training run directory (finished or not), its last.ckpt, or a timm folder."),
    ],
    out: ExportOutOpt,
    results: Annotated[
        list[Path] | None,
        typer.Option(
            "--results",
            "-r",
            help="Results JSON files to put in the card; each must be measured on the exported weights "
            "(features extracted from this run or export; checked by weights sha256).",
        ),
    ] = None,
    model_name: Annotated[
        str | None, typer.Option(help="Name in the card (default: the --out folder name).")
    ] = None,
    card_license: Annotated[
        str | None,
        typer.Option(
            "--license",
            help="Licence id for the card (default mit; weights trained from a non-commercial model keep its "
            "licence).",
        ),
    ] = None,
    repo_id: Annotated[str | None, typer.Option(help="ORG/NAME used in the card's usage snippet.")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing --out folder.")] = False,
) -> None:
    """Export a trained backbone as a folder plain timm loads, with temporal head, metadata and model card.

    An unfinished run (stopped before its end) exports its latest checkpoint, marked as unfinished.
    `--results results/*.json` works as the shell expands it: the extra file names count as results too.
    """
    from plstitch_eval.errors import ConfigError
    from plstitch_train.publishing.export import ExportOptions, export_model

    if ctx.args and not results:
        raise ConfigError(f"Unexpected arguments {ctx.args}; pass results files after --results.")
    results = [*(results or []), *(Path(arg) for arg in ctx.args)]

    options = ExportOptions(model_name=model_name, license=card_license, repo_id=repo_id, overwrite=overwrite)
    folder = export_model(source, out, results, options)
    console.print(
        f"Exported to {folder}; load it with timm.create_model('local-dir:{folder}', pretrained=True)"
    )
    typer.echo(str(folder))


def push_to_hub(
    folder: Annotated[
        Path,
        typer.Argument(
            help="Folder written by `plstitch export`, or a probe folder (linear/temporal --save)."
        ),
    ],
    repo_id: Annotated[str, typer.Option("--repo-id", help="Target repository, ORG/NAME.")],
    private: Annotated[bool, typer.Option("--private", help="Create the repository as private.")] = False,
    revision: Annotated[str, typer.Option(help="Branch to upload to.")] = "main",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check and list the files; upload nothing.")
    ] = False,
    commit_message: Annotated[str | None, typer.Option(help="Commit message on the Hub.")] = None,
    out: ProbeOutOpt = None,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results",
            help="A probe: the results JSON of the run that saved it (default: results.json in the folder), "
            "for per-video confidence intervals on the card.",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Upload an exported model or a probe to the Hugging Face Hub (token from HF_TOKEN or `hf auth login`).

    A model folder whose recorded results no longer belong to its model.safetensors is refused. A probe is
    published as config.json (its backbone pinned to a commit and sha256), probe.safetensors and a card.
    """
    from plstitch_eval.errors import ConfigError
    from plstitch_eval.hub.upload import format_file_table
    from plstitch_eval.probes.publish import is_probe_folder, push_probe

    if is_probe_folder(folder):
        result = push_probe(
            folder, repo_id, private=private, revision=revision, commit_message=commit_message,
            dry_run=dry_run, out=out, results=results,
        )  # fmt: skip
    else:
        from plstitch_train.publishing.publish import push_to_hub as push

        if out is not None or results is not None:
            raise ConfigError(
                f"--out and --results go with a probe folder; {folder} holds no probe.json (a model folder's "
                "results come from `plstitch export --results`)."
            )
        result = push(
            folder,
            repo_id,
            private=private,
            revision=revision,
            commit_message=commit_message,
            dry_run=dry_run,
        )
    typer.echo(format_file_table(result.files))
    if result.dry_run:
        kept = f"; the folder is {out}" if out is not None else ""
        console.print(f"Dry run: nothing uploaded to {repo_id}@{revision}{kept}.")
    else:
        typer.echo(result.commit_url)


def register(app: typer.Typer) -> None:
    """Add `export` and `push-to-hub` to the top-level app."""
    app.command("export", context_settings={"allow_extra_args": True})(export)
    app.command("push-to-hub")(push_to_hub)

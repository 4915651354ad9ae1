"""`plstitch extract --executor slurm --shards N`: the selected videos as N Slurm jobs (one job array), each
writing its videos into the store(s) a local run writes, recorded in `OUT.slurm/jobs.json`. A rerun
submits only the shards with videos missing whose job is not queued or running; once every shard has ended
(`--wait`, or a rerun) the summary is printed and written from the stores, as a local run's."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from plstitch_eval.cluster import (
    QUEUED,
    RUNNING,
    SlurmSettings,
    import_submitit,
    link_logs,
    slurm_executor,
    submit_array,
)
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract.options import ExtractOptions, select_videos
from plstitch_eval.extract.request import ExtractRequest, extract_session
from plstitch_eval.extract.slurm_shards import (
    DONE,
    FAILED,
    MISSING,
    ShardJob,
    ShardRecord,
    ShardStatus,
    logs_folder,
    plan_shards,
    read_records,
    shard_statuses,
    slurm_folder,
    stored_videos,
    submitit_folder,
    write_records,
)
from plstitch_eval.extract.summary import ExtractSummary, MultiExtractSummary, VideoResult, print_summary
from plstitch_eval.utils.console import console, print_error
from plstitch_eval.utils.io import write_json_output

__all__ = ["JOB_NAME", "extract_on_slurm", "extract_status", "extract_where", "print_extract_status"]

JOB_NAME = "plstitch-extract"
STATUS_SCHEMA = "plstitch.extract-status/v1"
RESUBMIT = (MISSING, FAILED)  # the shards a run submits; queued, running and done ones are left alone
ORDER = (DONE, RUNNING, QUEUED, FAILED, MISSING)


def extract_where(
    request: ExtractRequest, options: ExtractOptions, slurm: SlurmSettings | None, shards: int = 1
) -> int:
    """Run `request` here (`slurm` None: `extract_session`, as always) or as `shards` Slurm jobs; the exit
    code. `--shards` without `--executor slurm` is one line (under torchrun the ranks share the videos)."""
    if slurm is None:
        if shards != 1:
            raise ConfigError("--shards N is the number of Slurm jobs: it needs --executor slurm.")
        return extract_session(request, options)
    return extract_on_slurm(request, options, slurm, shards)


def extract_on_slurm(
    request: ExtractRequest, options: ExtractOptions, settings: SlurmSettings, shards: int
) -> int:
    """Submit the shards of `request` that are not done (nor queued, nor running) as one job array; with
    `settings.wait` wait for them. Once every shard has ended: the summary, exit code 0 (1 when a shard
    failed); while jobs are out: a line saying how to follow them, 0."""
    import_submitit()  # without the extra: one line, before anything is written
    if options.overwrite:
        raise ConfigError(
            "--overwrite with --executor slurm: every job would start the store again; delete the store "
            "folder first (or run once with --executor local --overwrite)."
        )
    adapter, targets = request.check(options)
    names = [r.name for r in select_videos(adapter, options.split, options.videos, options.split_scheme)]
    folder = slurm_folder(request.out)
    stores = [str(Path(t.out).expanduser().absolute()) for t in targets]
    records = _plan(folder, stores, plan_shards(names, shards))
    statuses = shard_statuses(folder, stores, records)
    todo = [record for record, status in zip(records, statuses, strict=True) if status.status in RESUBMIT]
    if todo:
        _submit(folder, settings, [ShardJob(request, options, r.videos) for r in todo], todo)
    write_records(folder, stores, records)
    statuses = shard_statuses(folder, stores, records) if todo else statuses
    while settings.wait and _out(statuses):
        time.sleep(settings.poll_seconds)
        statuses, before = shard_statuses(folder, stores, records), statuses
        if _counts(statuses) != _counts(before):
            console.print(f"slurm: {_counts(statuses)}", highlight=False)
    if _out(statuses):
        console.print(
            f"slurm: {_counts(statuses)}; rerun the same command when they have ended for the summary "
            f"(add --status to see each shard).",
            highlight=False,
            soft_wrap=True,
        )
        return 0
    return _finish(request, targets, names, records, statuses)


def _plan(folder: Path, stores: list[str], shards: list[list[str]]) -> list[ShardRecord]:
    """The shard records of this run: the recorded ones (and their jobs) when the recorded stores and
    shards are these; else new ones, unless a recorded job is still queued or running."""
    recorded_stores, recorded = read_records(folder)
    if recorded_stores == stores and [r.videos for r in recorded] == shards:
        return recorded
    if recorded and _out(shard_statuses(folder, recorded_stores, recorded)):
        raise ConfigError(
            f"{folder / 'jobs.json'} records jobs of other shards still queued or running; wait for them "
            "(or scancel them) before submitting other shards or models."
        )
    return [ShardRecord(index, videos) for index, videos in enumerate(shards)]


def _submit(folder: Path, settings: SlurmSettings, jobs: list[ShardJob], todo: list[ShardRecord]) -> None:
    """One job array of `todo`'s shards; each record gets its job id (the one before kept) and its log."""
    executor = slurm_executor(settings, submitit_folder(folder), JOB_NAME)
    job_ids = submit_array(executor, jobs)
    for record, job_id in zip(todo, job_ids, strict=True):
        if record.job_id is not None:
            record.earlier_jobs = [*record.earlier_jobs, record.job_id]
        record.job_id = job_id
        link = link_logs(submitit_folder(folder), job_id, logs_folder(folder), f"shard-{record.index}")
        record.log = link.relative_to(folder).as_posix()
    what = f"job array {job_ids[0].split('_')[0]}" if len(job_ids) > 1 else f"job {job_ids[0]}"
    console.print(
        f"slurm: submitted {len(todo)} shard(s) as {what}; logs in {logs_folder(folder)}",
        highlight=False,
        soft_wrap=True,
    )


def _out(statuses: list[ShardStatus]) -> bool:
    """True while some shard's job is queued or running."""
    return any(s.status in (QUEUED, RUNNING) for s in statuses)


def _counts(statuses: list[ShardStatus]) -> str:
    """`1 done, 1 running` (shards, in `ORDER`)."""
    counts = Counter(s.status for s in statuses)
    return ", ".join(f"{counts[name]} {name}" for name in ORDER if counts[name]) + " shard(s)"


def _finish(
    request: ExtractRequest,
    targets: list[Any],
    names: list[str],
    records: list[ShardRecord],
    statuses: list[ShardStatus],
) -> int:
    """Every shard has ended: each store's summary from what it holds (a video not stored is failed, with
    its shard's error), printed and written to `--json` as a local run's; 1 when a shard failed."""
    errors = {name: s.error for r, s in zip(records, statuses, strict=True) for name in r.videos}
    summaries = []
    for target in targets:
        held = stored_videos(Path(target.out))
        results = [
            VideoResult(name, "done", frames=held[name])
            if name in held
            else VideoResult(name, "failed", error=errors.get(name) or "not in the store")
            for name in names
        ]
        summaries.append(ExtractSummary(Path(target.out), results, 0.0, world_size=len(records)))
    summary = MultiExtractSummary(summaries, [t.name or str(t.out) for t in targets], 0.0, len(records))
    for store_summary in summary.stores:
        print_summary(store_summary)
    if request.json_path is not None:
        single = summary.stores[0].to_dict() if len(targets) == 1 else summary.to_dict()
        write_json_output(request.json_path, single)
    failed = [s for s in statuses if s.status != DONE]
    if failed:
        print_error(
            f"{len(failed)} shard(s) failed ({'; '.join(f'shard {s.index}: {s.error}' for s in failed)}); "
            "the other videos are in the store. Rerun the same command to submit them again."
        )
        return 1
    return 0


def extract_status(out: Path) -> dict[str, Any]:
    """The status report of the Slurm extraction into `out`: one record per shard and the counts."""
    import_submitit()
    folder = slurm_folder(out)
    stores, records = read_records(folder)
    if not records:
        raise ConfigError(
            f"{folder / 'jobs.json'} does not exist: {out} has no `--executor slurm` extraction "
            "(run `plstitch extract ... --executor slurm` first)."
        )
    statuses = shard_statuses(folder, stores, records)
    counts = Counter(s.status for s in statuses)
    return {
        "schema": STATUS_SCHEMA,
        "out": str(out),
        "stores": stores,
        "counts": {name: counts[name] for name in ORDER if counts[name]},
        "finished": not (counts[QUEUED] or counts[RUNNING]),
        "shards": [asdict(s) for s in statuses],
    }


def print_extract_status(out: Path) -> int:
    """Print the status of the Slurm extraction into `out`: JSON on stdout, a line a shard on stderr; 0."""
    report = extract_status(out)
    write_json_output("-", report)
    for shard in report["shards"]:
        why = f": {shard['error']}" if shard["status"] == FAILED and shard["error"] else ""
        line = f"shard {shard['index']}  {shard['status']:<8} {shard['job_id'] or '-'}  "
        console.print(f"{line}{shard['stored']}/{shard['videos']} videos stored{why}", highlight=False)
    return 0

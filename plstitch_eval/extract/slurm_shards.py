"""The shards of `plstitch extract --executor slurm --shards N`: the selected videos dealt over N jobs (video
i to shard i mod N, as torchrun deals them over ranks), the job that extracts one shard into the same
store(s) as a local run (`ShardJob`), the jobs record `OUT.slurm/jobs.json` and how each shard stands.

Requeue: a shard's job is `extract_many` over its videos, which skips every video the store already holds
(its file checks out), so a job that Slurm requeues (`scontrol requeue`, preemption) or that a rerun
submits again resumes from the store's finished videos; on a timeout signal `ShardJob.checkpoint` hands
submitit the same call, which requeues the job. Every shard opens the store under its lock, so the first
one creates it and the others resume it (the manifest's per-video records are written under that lock)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from plstitch_eval.cluster import ENDED, QUEUED, RUNNING, job_outcome, job_phase, job_states
from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.extract.options import ExtractOptions
from plstitch_eval.extract.request import ExtractRequest, failed_videos_line
from plstitch_eval.store.features import MANIFEST, VIDEO_FRAMES, feature_path
from plstitch_eval.utils.io import write_json_atomic

__all__ = [
    "DONE",
    "FAILED",
    "MISSING",
    "ShardFailedError",
    "ShardJob",
    "ShardRecord",
    "ShardStatus",
    "plan_shards",
    "read_records",
    "shard_statuses",
    "slurm_folder",
    "stored_videos",
    "submitit_folder",
    "write_records",
]

JOBS_SCHEMA = "plstitch.extract-slurm/v1"
JOBS_FILE, LOGS_DIR, SUBMITIT_DIR = "jobs.json", "logs", "submitit"
DONE, FAILED, MISSING = "done", "failed", "missing"  # and the job phases QUEUED, RUNNING
FAILED_PREFIX = "ShardFailedError: "  # how a failed shard's error ends its job's traceback


class ShardFailedError(EvaluationError):
    """A shard's job ended with videos that failed (the message names them)."""


def slurm_folder(out: Path) -> Path:
    """The folder of a Slurm extraction's jobs record, submitit files and logs: `OUT.slurm` beside `OUT`
    (not inside it: a store folder holds only what a store writes)."""
    out = Path(out).expanduser().absolute()
    return out.parent / f"{out.name}.slurm"


def submitit_folder(folder: Path) -> Path:
    """Where submitit keeps the jobs' pickles, scripts and logs (by job id)."""
    return folder / SUBMITIT_DIR


def logs_folder(folder: Path) -> Path:
    """Where each shard's log is linked by its name: `OUT.slurm/logs/shard-<k>.out`."""
    return folder / LOGS_DIR


def plan_shards(videos: list[str], shards: int) -> list[list[str]]:
    """The videos of each shard: video i goes to shard i mod `shards` (as `sharding.my_share` deals them
    over torchrun ranks); never more shards than videos (an empty shard would be a job for nothing)."""
    if shards < 1:
        raise ConfigError(f"--shards must be at least 1, got {shards}.")
    count = min(shards, len(videos))
    return [videos[k::count] for k in range(count)]


def stored_videos(store: Path) -> dict[str, int]:
    """The videos a store holds and their frame counts: a feature file and a frame count in its manifest
    (what a finished write leaves; `FeatureStore.check` verifies the bytes when a run resumes)."""
    try:
        manifest = json.loads((store / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    recorded = manifest.get(VIDEO_FRAMES) or {}
    return {name: int(frames) for name, frames in recorded.items() if feature_path(store, name).exists()}


class ShardJob:
    """Extract the videos `videos` of `request` into its store(s) (a Slurm job's whole work); raises
    `ShardFailedError` when a video failed, so the job ends FAILED and its result file names them."""

    def __init__(self, request: ExtractRequest, options: ExtractOptions, videos: list[str]) -> None:
        self.request = request
        self.options = options
        self.videos = videos

    def __call__(self) -> dict[str, Any]:
        from plstitch_eval.extract.pipeline import extract_many
        from plstitch_eval.hub import load_encoder

        redo = [name for name in self.options.redo or () if name in self.videos] or None
        options = replace(self.options, videos=self.videos, redo=redo, progress=False)
        adapter, targets = self.request.check(options)
        targets = [replace(t, encoder=load_encoder(t.name, **self.request.load)) for t in targets]
        summary = extract_many(adapter, targets, options)
        if not summary.ok:
            raise ShardFailedError(failed_videos_line(summary, self.request.where))
        return summary.to_dict()

    def checkpoint(self) -> Any:
        """submitit calls this on a timeout or preemption signal: requeue the same shard (the videos it
        finished stay in the store and are skipped; `--redo` is not done twice)."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(ShardJob(self.request, replace(self.options, redo=None), self.videos))


@dataclass
class ShardRecord:
    """One shard in the jobs record: its videos, its latest job and the earlier ones, its log link."""

    index: int
    videos: list[str]
    job_id: str | None = None
    earlier_jobs: list[str] = field(default_factory=list)
    log: str | None = None


@dataclass
class ShardStatus:
    """How a shard stands: done (every video in every store), queued, running, failed (with why) or
    missing (never submitted); its job, Slurm state, videos stored and log."""

    index: int
    status: str
    videos: int
    stored: int
    job_id: str | None = None
    slurm_state: str = ""
    error: str | None = None
    log: str | None = None


def read_records(folder: Path) -> tuple[list[str], list[ShardRecord]]:
    """The stores and shards of the jobs record in `folder` (([], []) where there is none yet)."""
    path = folder / JOBS_FILE
    if not path.exists():
        return [], []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return list(data["stores"]), [ShardRecord(**shard) for shard in data["shards"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc}); remove it and rerun to submit anew.") from None


def write_records(folder: Path, stores: list[str], records: list[ShardRecord]) -> None:
    """Write the jobs record atomically (`OUT.slurm/jobs.json`)."""
    data = {"schema": JOBS_SCHEMA, "stores": stores, "shards": [asdict(record) for record in records]}
    write_json_atomic(folder / JOBS_FILE, data)


def shard_statuses(folder: Path, stores: list[str], records: list[ShardRecord]) -> list[ShardStatus]:
    """Each shard's status: done when every store holds all its videos (whatever its job says); else its
    job's phase; a job that ended with videos missing is failed, with the reason its result file or Slurm
    gives (videos that failed, cancelled, out of time)."""
    held = [stored_videos(Path(store)) for store in stores]
    statuses = []
    for record in records:
        stored = sum(all(name in videos for videos in held) for name in record.videos)
        status = ShardStatus(record.index, FAILED, len(record.videos), stored, record.job_id, log=record.log)
        if stored == len(record.videos):
            status.status = DONE
        elif record.job_id is None:
            status.status, status.error = MISSING, "not submitted yet"
        statuses.append(status)
    asked = [s.job_id for s in statuses if s.status == FAILED and s.job_id]
    states = job_states(asked) if asked else {}
    for status in statuses:
        if status.status == FAILED:
            _job_status(folder, status, states.get(status.job_id or "", ""))
    return statuses


def _job_status(folder: Path, status: ShardStatus, state: str) -> None:
    """A submitted shard with videos not stored, by its job's Slurm `state` and result file."""
    status.slurm_state = state
    phase = job_phase(state)
    if phase in (QUEUED, RUNNING):
        status.status = phase
        return
    outcome = job_outcome(submitit_folder(folder), status.job_id or "")
    if outcome is not None and outcome[0] == "error":
        status.error = outcome[1].split(FAILED_PREFIX, 1)[-1]
    elif outcome is not None:
        status.error = "its job finished but some of its videos are not in the store (see its log)"
    elif phase == ENDED:
        status.error = f"its job ended {state.split()[0]}, without a result (see its log)"
    else:
        status.error = "its job is gone from Slurm without a result (cancelled, killed or out of time)"

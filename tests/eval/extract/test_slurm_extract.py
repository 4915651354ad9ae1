"""`plstitch extract --executor slurm --shards 2` through a real one-node Slurm started on this machine
(`tests/eval/benchmark/slurm_cluster.py`; skipped, saying why, where it cannot start or without submitit).

Two shard jobs (a job array) write the store one local process writes: the same videos, the same features,
labels and frame times, the same manifest records; `--status` says how each shard stands, and a rerun once
they have ended submits nothing and prints the summary. A requeued shard resumes from the store's videos,
and a rerun with `--wait` (its poll from a `--slurm-config` [slurm] table) waits for it, submitting
nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.extract.sharding import my_share
from plstitch_eval.extract.slurm_shards import plan_shards
from plstitch_eval.store.features import VIDEO_FRAMES, FeatureStore, compat_key
from plstitch_eval.utils.distributed import DistInfo
from tests.eval.benchmark.slurm_cluster import SlurmCluster, module_slurm

runner = CliRunner()
VIDEOS = ["video01", "video02", "video03"]


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    """A one-node Slurm for this module (`SLURM_CONF` set), stopped after."""
    with module_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


def extract_args(out: Path, root: Path, model: Path, *extra: str) -> list[str]:
    return [
        "extract", "--dataset", "cholec80", "--root", str(root), "--model", str(model), "--out", str(out),
        "--fps", "5", "--batch-size", "4", "--num-workers", "0", "--device", "cpu", *extra,
    ]  # fmt: skip


def jobs(out: Path) -> dict:
    return json.loads((out.parent / f"{out.name}.slurm" / "jobs.json").read_text(encoding="utf-8"))


def wait_until_ended(slurm: SlurmCluster, job_ids: list[str], timeout: float = 180.0) -> None:
    for job_id in job_ids:
        slurm.wait_for(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=timeout)


def assert_same_store(sharded: Path, single: Path) -> None:
    one, two = FeatureStore(single), FeatureStore(sharded)
    assert two.videos() == one.videos() == VIDEOS
    assert compat_key(two.manifest) == compat_key(one.manifest)
    assert two.manifest[VIDEO_FRAMES] == one.manifest[VIDEO_FRAMES]
    for video in VIDEOS:
        a, b = one.read(video), two.read(video)
        np.testing.assert_allclose(b.features, a.features, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(b.labels, a.labels)
        np.testing.assert_array_equal(b.frame_times, a.frame_times)


@pytest.fixture(scope="module")
def single(cholec_root: Path, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store one local process writes."""
    out = tmp_path_factory.mktemp("single") / "store"
    options = ExtractOptions(fps=5.0, batch_size=4, num_workers=0, device="cpu", progress=False)
    extract_features("cholec80", str(tiny_model_dir), out, options, root=cholec_root)
    return out


@pytest.mark.slow
def test_two_shards_as_slurm_jobs_write_the_store_of_one_process(
    slurm: SlurmCluster, single: Path, cholec_root: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "store"
    args = extract_args(out, cholec_root, tiny_model_dir, "--executor", "slurm", "--shards", "2")
    submitted = runner.invoke(app, args)
    assert submitted.exit_code == 0, submitted.output
    assert "submitted 2 shard(s) as job array" in submitted.stderr
    record = jobs(out)
    assert [shard["videos"] for shard in record["shards"]] == [["video01", "video03"], ["video02"]]
    assert record["stores"] == [str(out)]
    job_ids = [shard["job_id"] for shard in record["shards"]]
    assert len({job_id.split("_")[0] for job_id in job_ids}) == 1  # one job array
    wait_until_ended(slurm, job_ids)

    status = runner.invoke(app, [*args, "--status"])
    assert status.exit_code == 0, status.output
    report = json.loads(status.stdout)
    assert report["finished"] and report["counts"] == {"done": 2}
    assert [(s["stored"], s["videos"]) for s in report["shards"]] == [(2, 2), (1, 1)]
    for shard in record["shards"]:  # each shard's log linked by its name, the job's own
        log = out.parent / "store.slurm" / shard["log"]
        assert log.name == f"shard-{shard['index']}.out"
        assert f"job_id={shard['job_id']}" in log.read_text(encoding="utf-8")

    rerun = runner.invoke(app, [*args, "--json", "-"])  # every shard done: nothing submitted, the summary
    assert rerun.exit_code == 0, rerun.output
    assert "submitted" not in rerun.stderr
    summary = json.loads(rerun.stdout)
    assert summary["ok"] and summary["world_size"] == 2
    assert [(v["video"], v["status"]) for v in summary["videos"]] == [(v, "done") for v in VIDEOS]
    assert summary["frames"] == sum(FeatureStore(single).manifest[VIDEO_FRAMES].values())
    assert_same_store(out, single)


@pytest.mark.slow
def test_a_requeued_shard_resumes_from_the_stores_videos(
    slurm: SlurmCluster, single: Path, cholec_root: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    submitit = pytest.importorskip("submitit")
    out = tmp_path / "store"
    args = extract_args(out, cholec_root, tiny_model_dir, "--executor", "slurm", "--shards", "1")
    submitted = runner.invoke(app, args)
    assert submitted.exit_code == 0, submitted.output
    job_id = jobs(out)["shards"][0]["job_id"]
    log = out.parent / "store.slurm" / jobs(out)["shards"][0]["log"]
    deadline = time.monotonic() + 180  # requeue once the job has written its first video
    while not list(out.glob("*.safetensors")) and time.monotonic() < deadline:
        time.sleep(0.2)
    state = slurm.run("squeue", "-h", "--states=all", "-o", "%T", "-j", job_id, check=False).strip()
    tail = log.read_text(encoding="utf-8", errors="replace")[-2000:] if log.exists() else "no log"
    assert list(out.glob("*.safetensors")), f"the shard wrote no video in 180 s (job {state}): {tail}"
    slurm.run("scontrol", "requeue", job_id)
    config = tmp_path / "slurm.toml"  # --wait asks Slurm every 0.5 s
    config.write_text("[slurm]\npoll_seconds = 0.5\ntime = 10\n", encoding="utf-8")
    finished = runner.invoke(app, [*args, "--slurm-config", str(config), "--wait", "--json", "-"])
    assert finished.exit_code == 0, finished.output
    assert "submitted" not in finished.stderr and jobs(out)["shards"][0]["job_id"] == job_id
    summary = json.loads(finished.stdout)
    assert summary["ok"] and [v["status"] for v in summary["videos"]] == ["done"] * 3
    wait_until_ended(slurm, [job_id])
    assert log.read_text(encoding="utf-8").count("Starting with") == 2  # the same job ran again
    folder = out.parent / "store.slurm" / "submitit"
    kind, result = submitit.core.utils.pickle_load(
        submitit.core.utils.JobPaths(folder, job_id=job_id).result_pickle
    )
    assert kind == "success"  # its second life skipped what the first one had written
    assert "skipped" in {video["status"] for store in result["stores"] for video in store["videos"]}
    assert_same_store(out, single)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("shards", [1, 2, 3, 4])
def test_the_shards_deal_the_videos_as_torchrun_ranks_do(count: int, shards: int) -> None:
    names = [f"v{i}" for i in range(count)]
    plan = plan_shards(names, shards)
    used = min(shards, count)  # never an empty shard
    ranks = [[names[i] for i in my_share(count, DistInfo(rank=k, world_size=used))] for k in range(used)]
    assert plan == ranks
    assert sorted(name for shard in plan for name in shard) == sorted(names)  # each video once


def test_no_shards_is_one_line() -> None:
    with pytest.raises(ConfigError, match="--shards must be at least 1"):
        plan_shards(["v0"], 0)


def test_shards_without_slurm_and_overwrite_on_slurm_are_one_line(
    cholec_root: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "store"
    for extra, says in (
        (["--shards", "2"], "--shards N is the number of Slurm jobs: it needs --executor slurm."),
        (["--executor", "slurm", "--overwrite"], "--overwrite with --executor slurm"),
    ):
        result = runner.invoke(app, extract_args(out, cholec_root, tiny_model_dir, *extra))
        assert result.exit_code == 1, result.output
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.output
        assert not out.exists() and not (tmp_path / "store.slurm").exists()

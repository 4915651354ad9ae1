"""Issue 27: runs into one store share the work (each video claimed by one run) and write what one run
would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from plstitch_eval.extract import ELSEWHERE, ExtractOptions, extract_features
from plstitch_eval.store.features import FeatureStore, claim_video

FPS = 5.0

# Both runs start extracting together (a file barrier), and each pauses after every video it writes, so that
# they overlap whatever the machine's speed; stdout: the run's summary JSON.
RUN = """
import json, sys, time
from pathlib import Path
from plstitch_eval.extract import ExtractOptions, extract_features
root, model, out, me, other, workers = sys.argv[1:7]
Path(me).touch()
deadline = time.monotonic() + 120
while not Path(other).exists() and time.monotonic() < deadline:
    time.sleep(0.01)
options = ExtractOptions(fps=5.0, batch_size=4, num_workers=int(workers), device="cpu", progress=False)
pause = lambda result: time.sleep(0.5)
summary = extract_features("cholec80", model, out, options, root=root, on_video_done=pause)
print(json.dumps(summary.to_dict()))
"""


def _files(store):
    return {p.name: p.read_bytes() for p in sorted(store.glob("*.safetensors"))}


def _manifest_without_time(store):
    manifest = json.loads((store / "manifest.json").read_text())
    manifest.pop("created")
    return manifest


def _options(**kwargs):
    defaults = {"fps": FPS, "batch_size": 4, "num_workers": 0, "device": "cpu", "progress": False}
    return ExtractOptions(**{**defaults, **kwargs})


def test_two_runs_into_one_store_do_each_video_once(cholec_root, tiny_model_dir, tmp_path):
    single = tmp_path / "single"
    extract_features("cholec80", str(tiny_model_dir), single, _options(), root=cholec_root)
    out = tmp_path / "shared"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = []
    for me, other, workers in (("a", "b", "0"), ("b", "a", "1")):  # main-process and worker decoding
        args = [cholec_root, tiny_model_dir, out, tmp_path / me, tmp_path / other, workers]
        command = [sys.executable, "-c", RUN, *map(str, args)]
        runs.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        )
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err[-3000:] for _, err in outputs]

    summaries = [json.loads(stdout) for stdout, _ in outputs]
    for summary in summaries:  # each run ends with the whole store: its own videos and the other's
        assert summary["ok"] and [v["status"] for v in summary["videos"]] != []
        assert all(v["status"] in ("done", "skipped") for v in summary["videos"])
    done = [v["video"] for summary in summaries for v in summary["videos"] if v["status"] == "done"]
    assert sorted(done) == ["video01", "video02", "video03"]  # every video encoded exactly once in total
    assert _files(out) == _files(single)
    assert _manifest_without_time(out) == _manifest_without_time(single)


@pytest.mark.parametrize("other_run_writes", [True, False])
def test_a_video_another_run_holds_is_waited_for(
    cholec_root, tiny_model_dir, tmp_path, capsys, other_run_writes
):
    """Another run holds video02: this run takes the others first, then waits; when the other run lets go it
    skips video02 if that run wrote it, else (the other run failed or was killed) extracts it itself."""
    single = tmp_path / "single"
    extract_features("cholec80", str(tiny_model_dir), single, _options(), root=cholec_root)
    out = tmp_path / "shared"
    held = claim_video(out, "video02")
    order = []

    def other_run_finishes():
        if other_run_writes:
            FeatureStore(out).write(FeatureStore(single).read("video02"))
        held.release()

    def done(result):  # the other run finishes a little after this one ran out of other videos
        order.append(result.video)
        if result.video == "video03":
            threading.Timer(0.5, other_run_finishes).start()

    summary = extract_features(
        "cholec80", str(tiny_model_dir), out, _options(), root=cholec_root, on_video_done=done
    )
    statuses = {r.video: (r.status, r.note) for r in summary.results}
    stderr = capsys.readouterr().err
    assert "video02: another run is extracting it; waiting for that run\n" in stderr
    if other_run_writes:
        assert statuses["video02"] == ("skipped", ELSEWHERE)
        assert "video02: another run extracted it\n" in stderr
    else:
        assert statuses["video02"] == ("done", None)
    assert order == ["video01", "video03", "video02"] and summary.ok
    assert _files(out) == _files(single)
    assert _manifest_without_time(out) == _manifest_without_time(single)

"""A 2-process torchrun run (gloo, CPU) writes the same store as one process."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.store.features import FeatureStore, compat_key


def test_torchrun_two_ranks_match_one_process(cholec_root, tiny_model_dir, tmp_path):
    single = tmp_path / "single"
    options = ExtractOptions(fps=5.0, batch_size=4, num_workers=0, device="cpu", progress=False)
    extract_features("cholec80", str(tiny_model_dir), single, options, root=cholec_root)
    sharded = tmp_path / "sharded"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        "-m", "plstitch_eval", "extract",
        "--dataset", "cholec80", "--root", str(cholec_root), "--model", str(tiny_model_dir),
        "--out", str(sharded), "--fps", "5", "--batch-size", "4", "--num-workers", "0", "--device", "cpu",
        "--json", "-",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"world_size": 2' in done.stdout  # rank 0 printed the merged summary

    one, two = FeatureStore(single), FeatureStore(sharded)
    assert two.videos() == one.videos() == ["video01", "video02", "video03"]
    assert compat_key(two.manifest) == compat_key(one.manifest)
    for video in one.videos():
        a, b = one.read(video), two.read(video)
        np.testing.assert_allclose(b.features, a.features, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(b.labels, a.labels)
        np.testing.assert_array_equal(b.frame_times, a.frame_times)
